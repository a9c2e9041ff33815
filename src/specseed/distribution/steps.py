"""Step-aware sub-tests of the distribution check: tokens that the step structure, or the
trace's shared draws, say an RNG layout can couple.

The global pair tests (``analysis``: every consecutive pair alike) drown a coupling that only
a few pairs carry. Under ``trtllm-pr17599`` (one-draw slots, subsequence = kernel row), for
example, the accept kernel's residual or bonus draw is the draw of a later draft step or of the
next step's accept test on the same row: only the pair (token that draw produced, token that
draft or test decides) is coupled. This module picks those pairs from the recorded steps and
tests them on their own. Pure Python (no torch): inputs are per-token PIT values and the
trace's ``RowRecord``s.

Why the test is valid. Let ``U_t`` be the randomized PIT of emitted token ``t`` under the
target given its prefix (``analysis`` computes it, in token-id order). Under H0 (every token
follows the target's conditional distribution given everything generated before it), ``U_t``
is uniform and independent of ``F_{t-1}``: every earlier token of every request, the PIT
randomization, and the step structure through token ``t - 1`` (which step emitted each token,
whether it was a residual after a rejection or a bonus after every draft was accepted, and
each event's seed, subsequence, offset, and the draws of the events that produced those
tokens). Draft tokens are *not* in it: given the draft, the emitted token is not
target-distributed. So a pair ``(t, t')`` with ``t' > t`` is chosen from ``F_t`` only:

- ``t`` is the last token of a step (its residual or bonus token, or a prefill row's token);
  its kind (``residual``, ``bonus``, ``plain``) is known once ``t`` is emitted;
- ``t' = t + 1`` for every residual and bonus token (the structural pairs, whatever the
  layout), and ``t' = t + d`` where a later event's start offset lies inside the draws of the
  event that produced ``t`` (same seed and subsequence): draft step ``i`` of the same row
  (``d = i + 1``, where that draft is emitted if accepted) or target/accept row ``j`` of the
  request's next step (``d = j + 1``). Overlaps are read from the trace's events, never from
  the contract's name; only start offsets of later events are used (their draw counts can
  depend on draft values, which are not in ``F_t``).

Selection never looks at whether ``t'`` was an accepted draft (not in ``F_t``). By Doob's
optional-skipping theorem the ``U_{t'}`` selected this way are i.i.d. uniform, whatever the
class; within a class each ``t'`` appears once (``t' = t + d`` with ``d`` fixed). The
statistic per class: the pairs binned by an ``F_t``-measurable covariate, the id-order PIT
of token ``t`` (monotone in the shared draw for inverse-CDF kernels), into ``m`` equal-width
rows (a row expected below 5 per cell merged into its neighbour), and ``U_{t'}`` into ``m``
columns; Pearson's chi-square with ``row_total / m`` expected per cell and
``rows * (m - 1)`` degrees of freedom (asymptotically valid for predictable selection: a
martingale central limit theorem). The pair is never tested against the uniform square:
a residual token is not target-distributed given that a rejection happened, so ``U_t`` is
not uniform within its class. A deviation of TV ``eps`` per token in ``U_{t'}`` gives a
noncentrality of at most ``2 n eps^2 m``; the p-value is taken under it, as ``analysis``
does. These sub-tests join the run's Holm family.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from specseed.distribution import stats
from specseed.distribution.stats import SubTest
from specseed.traces.records import RowRecord, SamplingEvent

MIN_CELL = 5.0
"""Cells expected below this are merged (rows) or make the class too small (columns)."""
MAX_SIDE = 5
MAX_SHIFT = 8
"""Pairs further apart than this (K > 7) are not formed."""


@dataclass(frozen=True)
class StepPair:
    """One selected pair of a request's emitted positions."""

    label: str
    """Its class: the kind of token ``t``, the distance, and whether a draw was shared."""
    first: int
    second: int


def _kind(row: RowRecord) -> str:
    """The step's outcome, known once its last token is emitted: ``plain`` (no drafts
    verified), else ``a/K accepted`` (``K/K``: the last token is the bonus; below: a
    residual after the first rejection)."""
    if not row.drafts_verified:
        return "plain"
    return f"{len(row.emitted) - 1}/{len(row.drafts_verified)} accepted"


def _own_event(row: RowRecord) -> SamplingEvent | None:
    """The event that drew the row's last emitted token: the accept kernel where one ran,
    else the target row of that token."""
    for event in row.events:
        if event.kind == "accept":
            return event
    targets = [e for e in row.events if e.kind == "target"]
    last = len(row.emitted) - 1
    for event in targets:
        if event.index == last:
            return event
    return targets[-1] if targets else None


def _inside(event: SamplingEvent, own: SamplingEvent) -> bool:
    return (
        event.seed == own.seed
        and event.subsequence == own.subsequence
        and own.offset <= event.offset < own.offset + own.draws
    )


def step_pairs(rows: Sequence[RowRecord]) -> list[StepPair]:
    """The pairs of one request, from its rows in step order (discarded rows skipped)."""
    kept = [r for r in rows if not r.discarded and r.emitted]
    pairs: list[StepPair] = []
    for k, row in enumerate(kept):
        t = row.first_position + len(row.emitted) - 1
        kind = _kind(row)
        shared: set[int] = set()
        own = _own_event(row)
        if own is not None and own.draws > 0:
            for event in row.events:
                if event.kind == "draft" and _inside(event, own):
                    shared.add(event.index + 1)
            following = kept[k + 1] if k + 1 < len(kept) else None
            if following is not None and following.first_position == t + 1:
                for event in following.events:
                    if event.kind in ("accept", "target") and _inside(event, own):
                        shared.add(event.index + 1)
        shifts = set(shared)
        if kind != "plain":
            shifts.add(1)
        for d in sorted(shifts):
            if 1 <= d <= MAX_SHIFT:
                label = f"{kind}, +{d}" + (" shared" if d in shared else "")
                pairs.append(StepPair(label, t, t + d))
    return pairs


def conditional_uniformity(
    name: str, covariates: Sequence[float], values: Sequence[float], eps: float
) -> SubTest | None:
    """Chi-square that ``values`` are uniform within equal-width bins of ``covariates``
    (both on (0, 1)); None when there are too few pairs."""
    n = len(values)
    side = max(2, min(MAX_SIDE, math.isqrt(n // 25)))
    if n < side * side * MIN_CELL:
        return None
    grid = [[0] * side for _ in range(side)]
    for x, y in zip(covariates, values, strict=True):
        grid[min(side - 1, int(x * side))][min(side - 1, int(y * side))] += 1
    # Merge rows until each expects MIN_CELL per cell; the remainder joins the last row.
    rows: list[tuple[int, int, list[int]]] = []
    start, acc = 0, [0] * side
    for r, counts in enumerate(grid):
        acc = [a + c for a, c in zip(acc, counts, strict=True)]
        if sum(acc) >= side * MIN_CELL:
            rows.append((start, r, acc))
            start, acc = r + 1, [0] * side
    if sum(acc):
        if rows:
            first, _, last = rows.pop()
            rows.append((first, side - 1, [a + c for a, c in zip(last, acc, strict=True)]))
        else:
            rows.append((start, side - 1, acc))
    statistic = 0.0
    worst = (0.0, 0, 0, 0, 0.0)
    for index, (_, _, counts) in enumerate(rows):
        expected = sum(counts) / side
        for col, observed in enumerate(counts):
            statistic += (observed - expected) ** 2 / expected
            excess = (observed - expected) / math.sqrt(expected)
            if excess > worst[0]:
                worst = (excess, index, col, observed, expected)
    df = len(rows) * (side - 1)
    null_nc = 2.0 * n * eps * eps * side
    p = stats.ncx2_sf(statistic, df, null_nc)
    _, index, col, observed, expected = worst
    low, high = rows[index][0], rows[index][1]
    note = (
        f"after a token of id-order PIT in [{low / side:.2f}, {(high + 1) / side:.2f}), "
        f"the later token's PIT bin [{col / side:.2f}, {(col + 1) / side:.2f}) holds "
        f"{observed} of {sum(rows[index][2])}, {expected:.0f} expected"
    )
    return SubTest(name, n, df, statistic, null_nc, p, note=note)


def step_tests(
    pits_id: Sequence[Sequence[float]],
    structures: Sequence[Sequence[RowRecord]],
    eps: Sequence[Sequence[float]],
) -> list[SubTest]:
    """One sub-test per pair class over a group's requests: ``pits_id[i][t]`` is the id-order
    PIT of request i's token t, ``structures[i]`` its rows, ``eps[i][t]`` its envelope.
    Positions beyond ``pits_id[i]`` (the group's common length) are left out."""
    classes: dict[str, tuple[list[float], list[float], list[float]]] = {}
    for pit, rows, envelope in zip(pits_id, structures, eps, strict=True):
        length = len(pit)
        for pair in step_pairs(rows):
            if pair.first < 0 or pair.second >= length:
                continue
            xs, ys, es = classes.setdefault(pair.label, ([], [], []))
            xs.append(pit[pair.first])
            ys.append(pit[pair.second])
            es.append(envelope[pair.second])
    tests = []
    for label in sorted(classes):
        xs, ys, es = classes[label]
        found = conditional_uniformity(f"steps[{label}]", xs, ys, sum(es) / len(es))
        if found is not None:
            tests.append(found)
    return tests
