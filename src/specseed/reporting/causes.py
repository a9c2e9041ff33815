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
        """The clearest finding: one that names the suspect itself and fails (rather than
        errs), with a token diff blamed on the RNG state at the earliest divergence, then
        any diff, then an offset table, then the rest."""

        def rank(finding: Finding) -> tuple[int, int, int, int, int]:
            own = 0 if finding.suspects else 1  # it names the suspect itself
            failed = 0 if finding.status == "fail" else 1  # not an error it caused
            if finding.diffs:
                best = min(finding.diffs, key=lambda d: d.position)
                return (own, failed, 0 if best.attribution == "rng-state" else 1, best.position, 0)
            return (own, failed, 2 if finding.offsets else 3, 0, len(finding.details))

        return min(self.findings, key=rank)


def root_causes(findings: Sequence[Finding]) -> list[RootCause]:
    """Failing findings grouped by their first suspect (by check where there is none),
    largest group first.

    A finding without a suspect joins the cause of a finding with one in the same scenario
    and runs (a comparison that could not run because a run crashed is the crash's doing).
    """
    failing = [f for f in findings if f.status in FAILING]
    groups: dict[tuple[str | None, str], list[Finding]] = defaultdict(list)
    for finding in failing:
        defect = finding.suspects[0].defect if finding.suspects else _adopted(finding, failing)
        groups[(defect, "" if defect else finding.check)].append(finding)
    causes = [RootCause(d, c, tuple(fs)) for (d, c), fs in groups.items()]
    return sorted(causes, key=lambda c: (c.defect is None, -len(c.findings)))


def _adopted(finding: Finding, failing: Sequence[Finding]) -> str | None:
    for other in failing:
        if (
            other.suspects
            and other.scenario == finding.scenario
            and set(other.runs) & set(finding.runs)
        ):
            return other.suspects[0].defect
    return None
