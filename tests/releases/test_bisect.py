"""The table's arithmetic and the bisection's choices, on outcomes written as data: which
release runs next, how many runs an answer takes, what counts as a change."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from specseed.releases.bisect import next_release
from specseed.releases.spec import Release
from specseed.releases.table import (
    Cell,
    ReleaseOutcome,
    changes,
    outcome_from_dict,
    outcome_to_dict,
    transition,
)

PACKAGE = "engine"


def _ran(version: str, **cells: str) -> ReleaseOutcome:
    grid = {"s": {check: Cell(status, f"{check} on {version}") for check, status in cells.items()}}
    verdict = "fail" if "fail" in cells.values() else "pass"
    return ReleaseOutcome(PACKAGE, version, "ran", verdict=verdict, exit_code=0, cells=grid)


def _releases(count: int) -> list[Release]:
    return [Release(PACKAGE, f"1.{i}") for i in range(count)]


def _bisect(
    releases: list[Release], judge: Callable[[Release], ReleaseOutcome]
) -> tuple[dict[str, ReleaseOutcome], list[str]]:
    outcomes: dict[str, ReleaseOutcome] = {}
    order = []
    while (chosen := next_release(releases, outcomes)) is not None:
        order.append(chosen.version)
        outcomes[chosen.version] = judge(chosen)
    return outcomes, order


@pytest.mark.parametrize("first_bad", [1, 7, 15, 31])
def test_bisection_finds_the_first_bad_release_in_log2_runs(first_bad: int) -> None:
    releases = _releases(32)

    def judge(release: Release) -> ReleaseOutcome:
        index = int(release.version.split(".")[1])
        return _ran(release.version, a="fail" if index >= first_bad else "pass", b="pass")

    outcomes, order = _bisect(releases, judge)
    assert order[:2] == ["1.31", "1.0"]  # the newest, then the oldest
    assert len(order) <= 2 + 5  # log2(32) more
    found = transition(list(outcomes.values()), releases)
    assert found is not None and found.kind == "regression"
    assert (found.last_before, found.first_after) == (f"1.{first_bad - 1}", f"1.{first_bad}")
    assert found.untested_between == ()
    assert [(c.check, c.before and c.before.status, c.after and c.after.status)
            for c in found.cells] == [("a", "pass", "fail")]  # fmt: skip


def test_releases_without_a_verdict_are_stepped_over_and_named() -> None:
    releases = _releases(8)
    broken = {"1.0", "1.4", "1.5"}  # cannot be installed

    def judge(release: Release) -> ReleaseOutcome:
        if release.version in broken:
            return ReleaseOutcome(PACKAGE, release.version, "not-installable", reason="no torch")
        index = int(release.version.split(".")[1])
        return _ran(release.version, a="fail" if index >= 5 else "pass")

    outcomes, order = _bisect(releases, judge)
    assert order[:3] == ["1.7", "1.0", "1.1"]  # the oldest cannot be installed: its neighbour
    found = transition(list(outcomes.values()), releases)
    assert found is not None
    # 1.5 is the first bad release but cannot be installed: the change is between 1.3 and 1.6.
    assert (found.last_before, found.first_after) == ("1.3", "1.6")
    assert found.untested_between == ("1.4", "1.5")


def test_agreeing_ends_need_two_runs_and_name_no_release() -> None:
    releases = _releases(10)
    outcomes, order = _bisect(releases, lambda r: _ran(r.version, a="fail"))
    assert order == ["1.9", "1.0"]
    assert transition(list(outcomes.values()), releases) is None


def test_a_fix_is_named_as_one() -> None:
    outcomes = [_ran("1.0", a="fail"), _ran("1.1", a="fail"), _ran("1.2", a="pass")]
    found = transition(outcomes)
    assert found is not None and found.kind == "fix"
    assert (found.last_before, found.first_after) == ("1.1", "1.2")


def test_changes_list_every_neighbouring_pair_that_differs_with_evidence() -> None:
    outcomes = [
        _ran("1.0", a="pass", b="pass"),
        ReleaseOutcome(PACKAGE, "1.1", "cannot-run", reason="knob refused"),
        _ran("1.2", a="fail", b="pass"),
        _ran("1.3", a="fail", b="skip"),
    ]
    found = changes(outcomes, [Release(PACKAGE, v) for v in ("1.0", "1.1", "1.2", "1.3")])
    assert [(c.older, c.newer, c.untested_between) for c in found] == [
        ("1.0", "1.2", ("1.1",)),
        ("1.2", "1.3", ()),
    ]
    first = found[0].cells[0]
    assert (first.check, first.after and first.after.evidence) == ("a", "a on 1.2")


def test_an_outcome_survives_sweep_json() -> None:
    outcome = _ran("1.0", a="fail")
    assert outcome_from_dict(outcome_to_dict(outcome)) == outcome


def test_evidence_that_moves_without_the_verdict_is_no_verdict_change() -> None:
    # pass -> skip and fail -> error change the evidence, not whether the audit fails.
    outcomes = [_ran("1.0", a="pass", b="fail"), _ran("1.1", a="skip", b="error")]
    assert len(changes(outcomes)[0].cells) == 2
    assert changes(outcomes, verdicts_only=True) == []
    assert transition(outcomes) is None
