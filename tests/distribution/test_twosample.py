"""The two-sample losslessness statistics on simulated samples: the false-alarm rate of
clean samples is calibrated over many seeds, a simulated biased arm is rejected, the stated
power holds in the worst direction, and sparse cells are pooled."""

from __future__ import annotations

import random

from specseed.distribution.stats import chi2_critical
from specseed.distribution.twosample import (
    MIN_COPIES,
    TwoSampleGroup,
    analyse,
    detectable_tv,
    homogeneity,
)

VOCAB = 40
WEIGHTS = [1.0 / (k + 1) for k in range(VOCAB)]


def _sequences(rng: random.Random, n: int, bias: float = 0.0) -> tuple[tuple[int, ...], ...]:
    """A Markov chain over VOCAB tokens (the next token's law depends on the last one);
    ``bias``: the chance that a token after the first falls to the last token instead, as a
    residual left unnormalised does."""
    out = []
    for _ in range(n):
        tokens: list[int] = []
        last = 0
        for position in range(4):
            token = (rng.choices(range(VOCAB), WEIGHTS)[0] + last) % VOCAB
            if position > 0 and rng.random() < bias:
                token = VOCAB - 1
            tokens.append(token)
            last = token % 5
        out.append(tuple(tokens))
    return tuple(out)


def _group(rng: random.Random, n: int, bias: float = 0.0) -> TwoSampleGroup:
    return TwoSampleGroup("hot (T=1)", _sequences(rng, n, bias), _sequences(rng, n))


def test_clean_samples_raise_no_alarm_over_many_seeds() -> None:
    # 150 simulated scenarios of two groups each; the family-wise level is 1e-3, so even one
    # alarm here would be a 1-in-7 event, and a mis-stated statistic shows as many.
    alarms = 0
    smallest = 1.0
    for seed in range(150):
        rng = random.Random(seed)
        result = analyse([_group(rng, 150), _group(rng, 150)])
        assert len(result.tests) >= 8
        alarms += bool(result.rejected)
        smallest = min(smallest, *(t.p_value for t in result.tests))
    assert alarms <= 1
    # The raw p-values are not all near 1: the tests are not vacuous.
    assert smallest < 0.01


def test_a_biased_arm_is_rejected_and_where() -> None:
    for seed in range(5):
        result = analyse([_group(random.Random(seed), 150, bias=0.3)])
        names = {t.name for t in result.rejected}
        assert names, seed
        # The bias acts after the first token: the first token's test must hold.
        assert "position 0" not in names
        assert any(str(VOCAB - 1) in t.worst_cell for t in result.rejected)


def test_stated_power_holds_in_the_worst_direction() -> None:
    # The worst alternative of a given TV moves mass proportionally to the cell
    # probabilities (Cauchy-Schwarz is tight there): cells 0..9 equally likely, half the
    # cells gain what the others lose. At the stated detectable TV a test at alpha must
    # reject in at least ~80% of draws.
    cells, n, alpha = 10, 400, 0.01
    tv = detectable_tv(alpha, cells - 1, n, n)
    base = [1.0 / cells] * cells
    shifted = [p * (1 + 2 * tv) if i < cells // 2 else p * (1 - 2 * tv) for i, p in enumerate(base)]
    critical = chi2_critical(alpha, cells - 1)
    rng = random.Random(7)
    hits = 0
    reps = 300
    for _ in range(reps):
        x = rng.choices(range(cells), shifted, k=n)
        y = rng.choices(range(cells), base, k=n)
        table = homogeneity(x, y)
        assert table is not None
        hits += table[0] >= critical
    assert hits / reps >= 0.7, (tv, hits)
    # And the bound is not loose by orders of magnitude: at a third of it the test is weak.
    weak = [
        p * (1 + 2 * tv / 3) if i < cells // 2 else p * (1 - 2 * tv / 3) for i, p in enumerate(base)
    ]
    misses = sum(
        (
            homogeneity(rng.choices(range(cells), weak, k=n), rng.choices(range(cells), base, k=n))
            or (0.0,)
        )[0]
        < critical
        for _ in range(100)
    )
    assert misses >= 50


def test_sparse_cells_are_pooled_and_a_single_cell_is_no_test() -> None:
    statistic, df, cells, _ = homogeneity([1] * 50 + [2] * 50 + [3], [1] * 50 + [2] * 50 + [4])
    # 3 and 4 are expected below 5 each: pooled into the last kept cell, leaving 2 cells.
    assert (df, cells) == (1, 2)
    assert statistic < 1.0
    assert homogeneity([5] * 40, [5] * 40) is None


def test_too_few_copies_are_reported_not_tested() -> None:
    rng = random.Random(0)
    result = analyse([_group(rng, MIN_COPIES - 1)])
    assert result.tests == ()
    assert "fewer than" in result.skipped[0]
