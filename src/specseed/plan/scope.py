"""What an audit checks: refuse one that would check nothing, and notice one that did.

An audit whose every check is skipped would print PASS after running engines for nothing.
``check_scope`` decides it from the plan, before anything runs; ``checked_nothing`` catches
the case only the results show (an engine that exposed no evidence for any check).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from specseed.checks import CHECKS
from specseed.checks.findings import Finding
from specseed.checks.registry import checks_of_kind
from specseed.core.errors import InputError
from specseed.scenarios.schema import Scenario


def applicable_checks(scenarios: Iterable[Scenario]) -> set[str]:
    """Check ids an audit of these scenarios applies: every run check, and what ``expect`` names."""
    ids = {spec.id for spec in checks_of_kind("run")}
    for scenario in scenarios:
        ids.update(expectation.check for expectation in scenario.expect)
    return ids & set(CHECKS)


def check_scope(skip: Sequence[str], scenarios: Iterable[Scenario], source: str) -> None:
    """Raise ``InputError`` when ``checks.skip`` leaves no check to apply."""
    applicable = applicable_checks(scenarios)
    if applicable and applicable <= set(skip):
        raise InputError(
            f"{source}: checks.skip skips every check these scenarios apply "
            f"({', '.join(sorted(applicable))}): the audit would check nothing",
            hint="remove some ids from checks.skip",
        )


def checked_nothing(findings: Sequence[Finding]) -> bool:
    """True when no finding says anything: none at all, or every one is ``skip``."""
    return all(finding.status == "skip" for finding in findings)
