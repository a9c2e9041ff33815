"""Root causes: failing findings grouped by the defect they point at, so a report leads with
one line per cause instead of one block per finding."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from specseed.checks.findings import FAILING, Finding


@dataclass(frozen=True)
class RootCause:
    """Failing findings that point at the same suspect defect (or, without a suspect, come
    from the same check)."""

    defect: str | None
    check: str
    """The check, when there is no suspect."""
    findings: tuple[Finding, ...]

    @property
    def label(self) -> str:
        return self.defect or f"no suspect ({self.check})"

    @property
    def scenarios(self) -> list[str]:
        return sorted({f.scenario for f in self.findings})

    @property
    def requests(self) -> set[tuple[str, str]]:
        return {(f.scenario, r) for f in self.findings for r in f.requests}

    @property
    def checks(self) -> list[str]:
        return list(dict.fromkeys(f.check for f in self.findings))

    @property
    def why(self) -> str:
        for finding in self.findings:
            for suspect in finding.suspects:
                if suspect.defect == self.defect:
                    return suspect.why
        return self.findings[0].message

    @property
    def lead(self) -> Finding:
        """The clearest finding: a token diff blamed on the RNG state, earliest divergence,
        then any diff, then an offset table, then the rest."""

        def rank(finding: Finding) -> tuple[int, int, int]:
            if finding.diffs:
                best = min(finding.diffs, key=lambda d: d.position)
                return (0 if best.attribution == "rng-state" else 1, best.position, 0)
            return (2 if finding.offsets else 3, 0, len(finding.details))

        return min(self.findings, key=rank)


def root_causes(findings: Sequence[Finding]) -> list[RootCause]:
    """Failing findings grouped by their first suspect (by check where there is none),
    largest group first."""
    groups: dict[tuple[str | None, str], list[Finding]] = defaultdict(list)
    for finding in findings:
        if finding.status not in FAILING:
            continue
        defect = finding.suspects[0].defect if finding.suspects else None
        groups[(defect, "" if defect else finding.check)].append(finding)
    causes = [RootCause(d, c, tuple(fs)) for (d, c), fs in groups.items()]
    return sorted(causes, key=lambda c: (c.defect is None, -len(c.findings)))
