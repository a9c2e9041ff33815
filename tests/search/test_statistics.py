"""The search's false-alarm budget (issue 37): the bound it states is M * alpha^(1 + r) and
stays within the target however long the search, and confirmation is what buys it."""

from __future__ import annotations

import random

import pytest

from specseed.search.statistics import STATISTICAL_CHECKS, alarm_budget


@pytest.mark.parametrize("seconds", [1, 60, 600, 1800, 36_000, 10**7])
@pytest.mark.parametrize("workers", [1, 2, 16])
def test_the_stated_bound_holds_the_target_at_any_budget(seconds: int, workers: int) -> None:
    budget = alarm_budget(seconds, workers, target=0.01)
    assert budget.max_tests >= seconds * workers  # one test per worker-second, at most
    assert budget.bound == budget.max_tests * budget.alpha ** (1 + budget.confirmations)
    assert budget.bound <= 0.01
    # The fewest confirmations that do it.
    fewer = budget.max_tests * budget.alpha**budget.confirmations
    assert budget.confirmations == 1 or fewer > 0.01


def test_longer_searches_confirm_more() -> None:
    short, long = alarm_budget(600, 2), alarm_budget(10**6, 2)
    assert short.confirmations == 1 and long.confirmations == 2
    assert "family-wise rate <=" in short.text()


def test_each_slice_gets_a_share_within_the_cap() -> None:
    budget = alarm_budget(300, 2)
    assert budget.tests_per_slice(40) * 40 <= budget.max_tests


def test_confirmation_bounds_false_alarms_in_simulation() -> None:
    # Under a correct engine each test and each fresh rerun rejects with probability alpha,
    # independently: the share of searches that report anything stays within the bound.
    rng = random.Random(37)
    alpha, tests, searches = 0.05, 40, 2000  # a large alpha, so that alarms are seen at all
    budget = alarm_budget(tests, 1, alpha=alpha, tests_per_second=1, target=0.2)
    reported = 0
    screened = 0
    for _ in range(searches):
        for _ in range(budget.max_tests):
            if rng.random() < alpha:
                screened += 1
                if all(rng.random() < alpha for _ in range(budget.confirmations)):
                    reported += 1
                    break
    assert screened > searches  # without confirmation nearly every search would cry wolf
    assert reported / searches <= budget.bound


def test_the_statistical_checks_are_registered() -> None:
    from specseed.checks import CHECKS

    assert STATISTICAL_CHECKS <= set(CHECKS)
