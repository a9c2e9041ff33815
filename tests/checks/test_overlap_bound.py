"""A crafted trace whose events all read the same draws: the draw-range check counts the
quadratically many overlapping pairs without listing them, so time and memory stay linear."""

from __future__ import annotations

from specseed.checks.findings import EventState
from specseed.checks.rng_state import MAX_PAIRS_JUDGED, overlapping_pairs


def _event(step: int, offset: int, draws: int = 4) -> EventState:
    return EventState("target", 0, "sampling_from_probs", 0, 7, 0, offset, draws, step, step)


def test_pairs_are_counted_in_full_and_listed_up_to_the_limit() -> None:
    events = [_event(step, 0) for step in range(6_000)]
    pairs, total = overlapping_pairs(events, MAX_PAIRS_JUDGED)
    assert total == 6_000 * 5_999 // 2
    assert len(pairs) == MAX_PAIRS_JUDGED


def test_without_a_limit_every_pair_is_listed() -> None:
    events = [_event(0, 0), _event(1, 2), _event(2, 4), _event(3, 100)]
    pairs, total = overlapping_pairs(events)
    assert total == len(pairs) == 2  # 0..3 with 2..5, 2..5 with 4..7
    assert {(a.step, b.step) for a, b in pairs} == {(0, 1), (1, 2)}
