"""The search's false-alarm budget: how often a correct engine may be reported, over the
whole search.

An audit judges a statistical check (``distribution``, ``losslessness``) at alpha 1e-3 per
run or per expectation. A search judges hundreds of cases: at that alpha alone it would cry
wolf. Two rules bound the family-wise false-alarm rate:

1. A cap. The search runs at most :data:`TESTS_PER_WORKER_SECOND` statistical tests per
   second of worker time; over a budget of ``B`` seconds on ``W`` workers that is at most
   ``M = ceil(B * W * TESTS_PER_WORKER_SECOND)`` tests (a case that would pass the cap is
   not run). The bound holds whatever the tests' timing.
2. Confirmation. A failing statistical test is a candidate, not a report: the case is served
   again ``r`` times with fresh seeds (independent samples), and it is reported only when
   the same check fails every time, each at the same alpha.

On a correct engine a test's false alarm and its confirmations are independent events, each
of probability at most alpha, so by Bonferroni over the at most ``M`` tests:

    P(any false report) <= M * alpha ** (1 + r)

``r`` is the fewest confirmations that keep this at most ``target`` (default 1%). Failures of
the exact checks (token equality, RNG state) need no statistics: a correct engine never
fails them; each is still confirmed by serving the same case again before it is reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specseed.distribution.analysis import DEFAULT_ALPHA

STATISTICAL_CHECKS = frozenset({"distribution", "losslessness"})
"""Checks whose verdict is a hypothesis test: a correct engine fails them with probability
alpha. Every other check's failure is exact (a correct engine never fails it)."""
TESTS_PER_WORKER_SECOND = 1.0
"""The cap on statistical tests: one per second of worker time (a statistical case takes
several seconds on the reference engine, so the cap rarely binds)."""
DEFAULT_TARGET = 0.01
"""The family-wise false-alarm rate a search keeps to unless told otherwise."""
MAX_CONFIRMATIONS = 8


@dataclass(frozen=True)
class AlarmBudget:
    """The false-alarm budget of one search."""

    max_tests: int
    """M: the most statistical tests the search may run."""
    alpha: float
    """Each test's level (the checks' own)."""
    confirmations: int
    """r: fresh reruns a statistical candidate must fail too."""
    target: float
    """The family-wise rate asked for."""

    @property
    def bound(self) -> float:
        """The family-wise false-alarm rate this budget guarantees: M * alpha^(1 + r)."""
        return self.max_tests * self.alpha ** (1 + self.confirmations)

    def tests_per_slice(self, slices: int) -> int:
        """The cap of one of ``slices`` equal shares (their sum stays within M)."""
        return self.max_tests // max(1, slices)

    def text(self) -> str:
        """One line a person reads."""
        reruns = "rerun" if self.confirmations == 1 else "reruns"
        return (
            f"false alarms: at most {self.max_tests} statistical tests at alpha "
            f"{self.alpha:g}, each candidate confirmed by {self.confirmations} fresh {reruns}: "
            f"family-wise rate <= {self.bound:.1e}"
        )


def alarm_budget(
    budget_seconds: float,
    workers: int,
    *,
    target: float = DEFAULT_TARGET,
    alpha: float = DEFAULT_ALPHA,
    tests_per_second: float = TESTS_PER_WORKER_SECOND,
) -> AlarmBudget:
    """The budget of a search of ``budget_seconds`` on ``workers`` workers: M from the cap,
    r the fewest confirmations that keep ``M * alpha^(1 + r)`` at most ``target``."""
    if not 0 < alpha < 1 or not 0 < target < 1:
        raise ValueError("alpha and target lie strictly between 0 and 1")
    tests = max(1, math.ceil(budget_seconds * workers * tests_per_second))
    confirmations = 1
    while tests * alpha ** (1 + confirmations) > target and confirmations < MAX_CONFIRMATIONS:
        confirmations += 1
    return AlarmBudget(tests, alpha, confirmations, target)


__all__ = ["STATISTICAL_CHECKS", "AlarmBudget", "alarm_budget"]
