"""Two-sample losslessness statistics: speculative tokens against a K = 0 baseline.

Speculative decoding is lossless when the tokens it emits have the distribution plain
decoding (K = 0) has. With the same requests served both ways under independent seeds, that
is a two-sample question that needs no model: per group (one prompt and sampling setup) the
token sequences of the speculative arm and of the baseline arm must come from one law.

Sub-tests per group, each a Pearson chi-square test of homogeneity on a 2 x C table
(speculative, baseline) x cells, sparse cells pooled:

- ``position p`` for each position p < ``MAX_POSITIONS``: the token counts at p (the first
  token, p = 0, is the prefill's; later ones pass through verification);
- ``first two tokens``: the pairs (t0, t1), where a coupling between consecutive tokens
  (two tokens that share a draw) shows while each marginal holds;
- ``position p after <prefix>``: the next token among the sequences that share the
  prefix t0..t(p-1), for the most frequent prefixes (the conditional the marginals average);
- ``per token``, where the baseline reported log-probabilities (``logprobs: n``): every
  speculative token whose prefix a baseline copy emitted, scored by that copy's report
  (``pertoken``: a randomized PIT, a two-sample Kolmogorov-Smirnov test).

Holm over every sub-test of the scenario at ``ALPHA`` family-wise.

Pooling: cells are the tokens ordered by their total count; a cell is kept while its expected
count in the smaller arm is at least ``MIN_EXPECTED``; the rest form one "other" cell (merged
into the last kept one when itself too sparse). The pooling reads only the column totals,
which carry no information on the difference between the arms under H0.

Power (derivation). With n1 and n2 sequences and cell probabilities p1, p2 (pooled
p = (n1 p1 + n2 p2) / N), Pearson's statistic is asymptotically noncentral chi-square with
C - 1 degrees of freedom and noncentrality lambda = (n1 n2 / N) * sum_j (p1_j - p2_j)^2 / p_j.
By Cauchy-Schwarz, (sum_j |d_j|)^2 <= sum_j d_j^2 / p_j * sum_j p_j, so with the total
variation delta = sum_j |d_j| / 2 over the table's cells, lambda >= 4 delta^2 n1 n2 / N. A
sub-test at level alpha / m (Holm's first step: at least as strict as any later one) detects
with power 0.8 every alternative with lambda >= lambda_80 (``stats.noncentrality_for_power``),
so every one with delta >= sqrt(lambda_80 N / (4 n1 n2)): that is ``detectable_tv``. It holds
for the worst direction of the difference (d_j proportional to p_j); differences hidden
inside the pooled cell count only by their pooled part.

Pure Python: no torch, no numpy; it reads only emitted tokens (and reported
log-probabilities), so it judges any engine.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from functools import cache

from specseed.distribution import pertoken
from specseed.distribution.pertoken import Top
from specseed.distribution.stats import chi2_sf, holm, noncentrality_for_power

ALPHA = 1e-3
"""Family-wise false-alarm rate per scenario (Holm over every sub-test)."""
POWER = 0.8
MIN_EXPECTED = 5.0
"""Smallest expected count of a kept cell in the smaller arm (Cochran's rule)."""
MIN_COPIES = 30
"""Fewest sequences per arm for a group to be tested."""
MAX_POSITIONS = 4
"""Positions tested marginally (0 .. MAX_POSITIONS - 1): a planted bias acts on every
verified position alike, so later positions add multiplicity more than power."""
MAX_PREFIXES = 2
"""Most frequent prefixes tested per position."""
MIN_PREFIX_COPIES = 20
"""Fewest sequences per arm sharing a prefix for its conditional test."""

Tokens = tuple[int, ...]


@dataclass(frozen=True)
class TwoSampleGroup:
    """One group: the same prompt and sampling setup served with and without speculation."""

    label: str
    speculative: tuple[Tokens, ...]
    baseline: tuple[Tokens, ...]
    baseline_tops: tuple[tuple[Top, ...], ...] | None = None
    """Per baseline sequence, per token, the top-n log-probabilities the engine reported
    (``logprobs: n``): the per-token sub-test (``pertoken``) scores the speculative tokens
    by them. None where the baseline did not report them."""


@dataclass(frozen=True)
class TwoSampleTest:
    group: str
    name: str
    statistic: float
    df: int
    p_value: float
    cells: int
    speculative: int
    """Sequences of the speculative arm in the table (scored tokens for ``per token``)."""
    baseline: int
    detectable_tv: float = math.nan
    """Smallest TV over the table's cells detected with 80% power (set by ``analyse``)."""
    adjusted_p: float = 1.0
    rejected: bool = False
    worst_cell: str = ""
    """The cell whose counts differ most (largest Pearson contribution), as text."""


@dataclass(frozen=True)
class TwoSampleResult:
    alpha: float
    tests: tuple[TwoSampleTest, ...]
    groups: tuple[TwoSampleGroup, ...]
    skipped: tuple[str, ...]
    """Groups not tested, with the reason."""

    @property
    def rejected(self) -> tuple[TwoSampleTest, ...]:
        return tuple(t for t in self.tests if t.rejected)

    def detectable_tv(self, group: str, name: str) -> float | None:
        for test in self.tests:
            if test.group == group and test.name == name:
                return test.detectable_tv
        return None


def homogeneity(
    speculative: Sequence[Hashable], baseline: Sequence[Hashable]
) -> tuple[float, int, int, str] | None:
    """Pearson chi-square of a 2 x C table of the two arms' values, sparse cells pooled:
    (statistic, df, cells, worst cell), or None when fewer than two cells remain."""
    n1, n2 = len(speculative), len(baseline)
    total = n1 + n2
    if n1 == 0 or n2 == 0:
        return None
    a, b = Counter(speculative), Counter(baseline)
    both = a + b
    # Ties broken by the value's text: the pooling must not depend on hash order.
    order = sorted(both, key=lambda v: (-both[v], repr(v)))
    smaller = min(n1, n2)
    kept = [v for v in order if smaller * both[v] / total >= MIN_EXPECTED]
    rest = [v for v in order if v not in set(kept)]
    cells: list[tuple[str, int, int]] = [(repr(v), a[v], b[v]) for v in kept]
    if rest:
        other = ("other", sum(a[v] for v in rest), sum(b[v] for v in rest))
        if smaller * (other[1] + other[2]) / total >= MIN_EXPECTED or not cells:
            cells.append(other)
        else:
            name, x, y = cells.pop()
            cells.append((f"{name}+other", x + other[1], y + other[2]))
    if len(cells) < 2:
        return None
    statistic = 0.0
    worst, worst_part = "", -1.0
    for name, x, y in cells:
        column = x + y
        part = 0.0
        for observed, row in ((x, n1), (y, n2)):
            expected = row * column / total
            part += (observed - expected) ** 2 / expected
        statistic += part
        if part > worst_part:
            worst, worst_part = f"{name}: {x} speculative vs {y} baseline", part
    return statistic, len(cells) - 1, len(cells), worst


def _test(
    group: str, name: str, speculative: Sequence[Hashable], baseline: Sequence[Hashable]
) -> TwoSampleTest | None:
    if len(speculative) < 1 or len(baseline) < 1:
        return None
    table = homogeneity(speculative, baseline)
    if table is None:
        return None
    statistic, df, cells, worst = table
    return TwoSampleTest(
        group,
        name,
        statistic,
        df,
        chi2_sf(statistic, df),
        cells,
        len(speculative),
        len(baseline),
        worst_cell=worst,
    )


def group_tests(group: TwoSampleGroup) -> list[TwoSampleTest]:
    """The sub-tests of one group (not yet corrected)."""
    spec, base = group.speculative, group.baseline
    tests: list[TwoSampleTest | None] = []
    for position in range(MAX_POSITIONS):
        tests.append(
            _test(
                group.label,
                f"position {position}",
                [s[position] for s in spec if len(s) > position],
                [s[position] for s in base if len(s) > position],
            )
        )
        if position == 1:
            tests.append(
                _test(
                    group.label,
                    "first two tokens",
                    [s[:2] for s in spec if len(s) > 1],
                    [s[:2] for s in base if len(s) > 1],
                )
            )
    for position in range(1, MAX_POSITIONS):
        # One pass per arm: each prefix's next tokens (scanning every sequence per prefix
        # made this quadratic in the copies).
        arms: dict[Tokens, tuple[list[int], list[int]]] = {}
        for side, sequences in ((0, spec), (1, base)):
            for s in sequences:
                if len(s) > position:
                    arms.setdefault(s[:position], ([], []))[side].append(s[position])
        ranked = sorted(
            (p for p, (x, y) in arms.items() if min(len(x), len(y)) >= MIN_PREFIX_COPIES),
            key=lambda p: (-len(arms[p][0]) - len(arms[p][1]), p),
        )
        for prefix in ranked[:MAX_PREFIXES]:
            x, y = arms[prefix]
            shown = " ".join(str(t) for t in prefix)
            tests.append(_test(group.label, f"position {position} after [{shown}]", x, y))
    return [t for t in tests if t is not None]


@cache
def _noncentrality(alpha: float, df: int, power: float) -> float:
    return noncentrality_for_power(alpha, df, power)


def detectable_tv(alpha: float, df: int, n1: int, n2: int, power: float = POWER) -> float:
    """Smallest TV over a 2 x (df + 1) table's cells that a Pearson test at ``alpha`` with
    n1 and n2 samples detects with ``power`` (module docstring: lambda >= 4 TV^2 n1 n2 / N)."""
    nc = _noncentrality(alpha, df, power)
    return math.sqrt(nc * (n1 + n2) / (4.0 * n1 * n2))


def analyse(groups: Sequence[TwoSampleGroup], alpha: float = ALPHA) -> TwoSampleResult:
    """Every group's sub-tests, Holm-corrected together at ``alpha``."""
    tests: list[TwoSampleTest] = []
    skipped: list[str] = []
    tested: list[TwoSampleGroup] = []
    for group in groups:
        fewest = min(len(group.speculative), len(group.baseline))
        if fewest < MIN_COPIES:
            skipped.append(
                f"{group.label}: {len(group.speculative)} speculative and "
                f"{len(group.baseline)} baseline copies, fewer than {MIN_COPIES} per arm"
            )
            continue
        found = group_tests(group)
        if not found:
            skipped.append(f"{group.label}: every token falls in one cell (nothing varies)")
            continue
        tested.append(group)
        tests.extend(found)
        if group.baseline_tops is not None:
            scored = pertoken.per_token(
                group.label, group.speculative, group.baseline, group.baseline_tops
            )
            if isinstance(scored, str):
                skipped.append(scored)
            else:
                tests.append(
                    TwoSampleTest(
                        group.label,
                        pertoken.NAME,
                        scored.statistic,
                        0,
                        scored.p_value,
                        0,
                        scored.speculative,
                        scored.baseline,
                        worst_cell=scored.where,
                    )
                )
    if not tests:
        return TwoSampleResult(alpha, (), tuple(tested), tuple(skipped))
    rejected, adjusted = holm([t.p_value for t in tests], alpha)
    m = len(tests)
    final = tuple(
        TwoSampleTest(
            **{
                **t.__dict__,
                "adjusted_p": adj,
                "rejected": rej,
                "detectable_tv": (
                    pertoken.detectable_tv(alpha / m, t.speculative, t.baseline)
                    if t.name == pertoken.NAME
                    else detectable_tv(alpha / m, t.df, t.speculative, t.baseline)
                ),
            }
        )
        for t, adj, rej in zip(tests, adjusted, rejected, strict=True)
    )
    return TwoSampleResult(alpha, final, tuple(tested), tuple(skipped))
