"""Test emitted tokens against the target's exact conditional distributions.

The hypothesis H0: every emitted token of a sampled request is drawn from the target's
next-token distribution given the prompt and the tokens before it (temperature and the
top-k/top-p filter applied), independently of everything else. That is what speculative
sampling promises: lossless, as if no draft existed.

How (all per group of requests that share prompt and sampling setup, all positions):

1. Randomized probability integral transform (PIT). Tokens are ordered by descending exact
   probability (ties by id); a token ``x`` with ``F(x-)`` mass before it maps to
   ``U = F(x-) + V * p(x)`` with ``V`` uniform from a generator seeded by the scenario and
   run (the check is deterministic). Under H0 the ``U`` of every position of every request
   are independent and uniform on (0, 1) (Rosenblatt's construction: each conditional
   transform is uniform whatever came before), so uniformity per position and independence
   of consecutive positions can both be tested on one scale, whatever the prefix.
2. Sub-tests, each a Pearson chi-square:
   - ``pit``: all positions pooled, ``M`` equal bins (``M = clamp(n // 25, 2, 20)``);
   - ``pit[t]``: position ``t`` alone;
   - ``pairs[t]``: positions ``(t, t + 1)`` on an ``m x m`` grid (``m = clamp(isqrt(n //
     25), 2, 5)``): a shared random number that leaves each marginal exact but couples
     consecutive tokens shows here;
   - ``pairs-even`` / ``pairs-odd``: non-overlapping consecutive pairs pooled over
     positions (overlapping pairs are not independent);
   - ``tokens[t|prefix]``: the token counts at position ``t`` among requests that share the
     whole prefix before it, against the exact conditional probabilities, for the most
     frequent prefixes (at least ``MIN_PREFIX_SAMPLES`` requests, ``MAX_PREFIX_TESTS`` in
     all, position 0 always); cells expected below 5 are pooled into one;
   - ``impossible``: no emitted token may have probability 0 under the target (outside the
     top-k/top-p set), unless the precision envelope makes its membership ambiguous.
3. Family-wise level: Holm's step-down procedure over every sub-test of the run at
   ``alpha`` (default 1e-3): the run's finding fails with probability at most ``alpha``
   under H0.
4. Power: for the pooled PIT and the first-token test, the noncentrality a chi-square at
   the Bonferroni level ``alpha / m`` (Holm's strictest step) detects with 80% probability,
   turned into a total variation distance: any deviation of the binned distribution with
   TV >= sqrt(noncentrality / (4 n)) reaches it (Cauchy-Schwarz: a TV of d gives at least
   4 n d^2).

Precision. The engine samples from its own arithmetic, not from float64 exact values: per
emitted token an envelope ``eps`` (``collect`` computes it) bounds the total variation
between the oracle's distribution and the engine's. The sub-tests test against the
envelope, not against exactness: a deviation of TV ``eps`` gives a chi-square noncentrality
of at most ``2 n eps^2 / min(cell probability)``, and the p-value is taken under that
noncentral chi-square (the largest p-value any engine within the envelope could produce).
For float32 engines (the reference engine) the envelope is about 1e-5 and changes nothing
measurable; for bfloat16 logits it is wide and the finding says so. ``alpha`` is never
widened.

Two phases. ``collect`` (torch, the oracle) reduces the oracle's distributions to the
per-token numbers of ``evidence.DistributionEvidence``; :func:`judge` (this module: plain
Python, no torch on its import path) computes every sub-test, Holm and the power from that
evidence alone, so a bundle's stored evidence is re-judged without the model. The PIT noise
``V`` comes from Python's Mersenne Twister (``random.Random``, whose ``random()`` sequence
is stable across Python versions) seeded from the scenario, run and group.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specseed.distribution import stats
from specseed.distribution.evidence import (
    MAX_PREFIX_TESTS,
    MIN_CELL,
    MIN_PREFIX_SAMPLES,
    MIN_SAMPLES,
    DistributionEvidence,
    GroupEvidence,
    Sample,
    SamplingSetup,
    prefix_candidates,
)
from specseed.distribution.stats import SubTest
from specseed.distribution.steps import step_tests

if TYPE_CHECKING:
    from collections.abc import Mapping

    from specseed.distribution.oracle import ProbabilityOracle
    from specseed.traces.records import RowRecord

__all__ = [
    "DEFAULT_ALPHA",
    "MAX_PREFIX_TESTS",
    "MIN_CELL",
    "MIN_PREFIX_SAMPLES",
    "MIN_SAMPLES",
    "DistributionResult",
    "GroupResult",
    "Sample",
    "SamplingSetup",
    "SubTest",
    "analyse",
    "judge",
    "pit_bins",
    "pit_values",
]

DEFAULT_ALPHA = 1e-3
"""Family-wise significance level of one run's finding."""
POWER = 0.8
_TOP = 1.0 - 1e-12
"""PIT values are clamped below 1 (a bin index of exactly M would fall outside)."""


@dataclass(frozen=True)
class GroupResult:
    """Sub-tests of one group of requests (same prompt and sampling setup)."""

    label: str
    samples: int
    positions: int
    envelope: float
    """Mean precision envelope (TV) per token."""
    tests: tuple[SubTest, ...]


@dataclass(frozen=True)
class DistributionResult:
    alpha: float
    logits_dtype: str
    groups: tuple[GroupResult, ...]

    @property
    def tests(self) -> list[SubTest]:
        return [t for g in self.groups for t in g.tests]

    @property
    def rejected(self) -> list[tuple[GroupResult, SubTest]]:
        return [(g, t) for g in self.groups for t in g.tests if t.adjusted_p <= self.alpha]

    @property
    def total_tokens(self) -> int:
        return sum(g.samples * g.positions for g in self.groups)


# -- sub-tests ------------------------------------------------------------------------------


def _detectable_tv(alpha: float, df: int, null_nc: float, n: int) -> float:
    nc = stats.noncentrality_for_power(alpha, df, POWER, null_nc)
    return math.sqrt(nc / (4.0 * n))


def _pearson(counts: Sequence[float], expected: Sequence[float]) -> float:
    return math.fsum((c - e) ** 2 / e for c, e in zip(counts, expected, strict=True))


def _heaviest(counts: Sequence[int], expected: float) -> int:
    """The first cell with the largest excess over a uniform expectation."""
    return max(range(len(counts)), key=lambda i: (counts[i] - expected, -i))


def _uniform_test(name: str, values: Sequence[float], eps: float) -> SubTest | None:
    scale = "low token ids" if name.startswith("pit-id") else "the most probable tokens"
    n = len(values)
    bins = pit_bins(n)
    if n < 2 * MIN_CELL:
        return None
    counts = [0] * bins
    for value in values:
        counts[min(int(value * bins), bins - 1)] += 1
    each = n / bins
    statistic = _pearson(counts, [each] * bins)
    null_nc = 2.0 * n * eps * eps * bins
    p = stats.ncx2_sf(statistic, bins - 1, null_nc)
    heavy = _heaviest(counts, each)
    note = (
        f"PIT bin [{heavy / bins:.2f}, {(heavy + 1) / bins:.2f}) holds {counts[heavy]} "
        f"tokens, {each:.0f} expected (PIT near 0 = {scale})"
    )
    return SubTest(name, n, bins - 1, statistic, null_nc, p, note=note)


def _pair_test(
    name: str, first: Sequence[float], second: Sequence[float], eps: float
) -> SubTest | None:
    n = len(first)
    side = max(2, min(5, math.isqrt(n // 25)))
    if n < side * side * MIN_CELL:
        return None
    cells = side * side
    counts = [0] * cells
    for a, b in zip(first, second, strict=True):
        counts[min(int(a * side), side - 1) * side + min(int(b * side), side - 1)] += 1
    each = n / cells
    statistic = _pearson(counts, [each] * cells)
    null_nc = 2.0 * n * (2.0 * eps) ** 2 * cells
    p = stats.ncx2_sf(statistic, cells - 1, null_nc)
    heavy = _heaviest(counts, each)
    note = (
        f"cell (PIT bin {heavy // side}, then bin {heavy % side}) of a {side}x{side} grid holds "
        f"{counts[heavy]} pairs, {each:.0f} expected"
    )
    return SubTest(name, n, cells - 1, statistic, null_nc, p, note=note)


def _token_test(
    name: str,
    observed: Sequence[int],
    cells: Sequence[tuple[int, float]],
    rest: float,
    eps: float,
) -> SubTest | None:
    """Token counts against one exact distribution (the tokens expected at least 5 times,
    by id, and the rest pooled; a rest expected below 5 joins the smallest cell)."""
    n = len(observed)
    # Only cells the count supports; a stored cell below it is pooled like any rare token.
    labels = [token for token, p in cells if p * n >= MIN_CELL]
    if not labels:
        return None
    counts = Counter(observed)
    cells_exp = [p * n for _, p in cells if p * n >= MIN_CELL]
    cells_obs = [float(counts[token]) for token in labels]
    rest_exp = n * (rest + math.fsum(p for _, p in cells if p * n < MIN_CELL))
    rest_obs = float(n - sum(cells_obs))
    if rest_exp > 0 or rest_obs > 0:
        if rest_exp >= MIN_CELL or not cells_exp:
            cells_obs.append(rest_obs)
            cells_exp.append(rest_exp)
            labels.append(-1)
        else:
            smallest = min(range(len(cells_exp)), key=lambda i: cells_exp[i])
            cells_obs[smallest] += rest_obs
            cells_exp[smallest] += rest_exp
            labels[smallest] = -1
    if len(cells_exp) < 2 or min(cells_exp) <= 0.0:
        return None
    statistic = _pearson(cells_obs, cells_exp)
    null_nc = n * 2.0 * eps * eps / (min(cells_exp) / n)
    p = stats.ncx2_sf(statistic, len(cells_exp) - 1, null_nc)
    worst = max(
        range(len(cells_exp)),
        key=lambda i: (abs(cells_obs[i] - cells_exp[i]) / math.sqrt(cells_exp[i]), -i),
    )
    token = "rare tokens (pooled)" if labels[worst] == -1 else f"token {labels[worst]}"
    note = f"{token}: {int(cells_obs[worst])} emitted, {cells_exp[worst]:.1f} expected"
    return SubTest(name, n, len(cells_exp) - 1, statistic, null_nc, p, note=note)


# -- one group ------------------------------------------------------------------------------


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def _pit(group: GroupEvidence, seed: int) -> tuple[list[float], list[float]]:
    """The group's randomized PIT values, flat, in both orders (descending probability, token
    id), with the noise of ``seed``."""
    draw = random.Random(seed).random
    noise = [draw() for _ in range(len(group.probability))]
    own = group.probability
    pit = [
        min(max(b + v * p, 0.0), _TOP)
        for b, v, p in zip(group.mass_before, noise, own, strict=True)
    ]
    pit_id = [
        min(max(b + v * p, 0.0), _TOP)
        for b, v, p in zip(group.mass_before_id, noise, own, strict=True)
    ]
    return pit, pit_id


def pit_values(group: GroupEvidence, seed_label: str) -> tuple[list[float], list[float]]:
    """The PIT values :func:`judge` tests for ``group`` (``seed_label`` as given to it), flat
    request by request, by descending probability and by token id: what a report plots."""
    return _pit(group, _seed(seed_label, str(group.number)))


def pit_bins(n: int) -> int:
    """The bins of a PIT histogram of ``n`` values, as the uniformity sub-tests count them."""
    return max(2, min(20, n // 25))


def _group_tests(
    label: str,
    group: GroupEvidence,
    seed: int,
    steps: Mapping[str, Sequence[RowRecord]] | None = None,
) -> GroupResult:
    n_req, length = len(group.request_ids), group.length
    own = group.probability
    pit_flat, pit_id_flat = _pit(group, seed)
    pit = [pit_flat[i * length : (i + 1) * length] for i in range(n_req)]
    pit_id = [pit_id_flat[i * length : (i + 1) * length] for i in range(n_req)]
    eps_rows = [group.envelope[i * length : (i + 1) * length] for i in range(n_req)]
    eps_at = [_mean([row[t] for row in eps_rows]) for t in range(length)]
    mean_eps = _mean(group.envelope)
    tests: list[SubTest] = []

    ambiguous = set(group.ambiguous)
    impossible = sum(1 for i, p in enumerate(own) if p <= 0 and i not in ambiguous)
    tests.append(
        SubTest(
            "impossible",
            len(own),
            0,
            float(impossible),
            0.0,
            0.0 if impossible else 1.0,
            note=f"{impossible} emitted tokens have probability 0 under the target "
            "(outside its top-k/top-p set)",
        )
    )
    pooled = _uniform_test("pit", pit_flat, mean_eps)
    if pooled is not None:
        tests.append(pooled)
    pooled_id = _uniform_test("pit-id", pit_id_flat, mean_eps)
    if pooled_id is not None:
        tests.append(pooled_id)
    for values, suffix in ((pit, ""), (pit_id, "-id")):
        for start, name in ((0, "pairs-even"), (1, "pairs-odd")):
            firsts = [v for row in values for v in row[start : length - 1 : 2]]
            seconds = [v for row in values for v in row[start + 1 : length : 2]]
            if firsts:
                found = _pair_test(name + suffix, firsts, seconds, mean_eps)
                if found is not None:
                    tests.append(found)
    columns = [[row[t] for row in pit] for t in range(length)]
    for t in range(length):
        found = _uniform_test(f"pit[{t}]", columns[t], eps_at[t])
        if found is not None:
            tests.append(found)
    for t in range(length - 1):
        eps_pair = (eps_at[t] + eps_at[t + 1]) / 2.0
        found = _pair_test(f"pairs[{t}]", columns[t], columns[t + 1], eps_pair)
        if found is not None:
            tests.append(found)
    tests.extend(_prefix_tests(group, eps_rows))
    if steps is not None:
        rows = [tuple(steps.get(request_id, ())) for request_id in group.request_ids]
        if any(rows):
            # Step-aware pairs (``steps``): where the step structure or shared draws couple.
            tests.extend(step_tests(pit_id, rows, eps_rows))
    return GroupResult(label, n_req, length, mean_eps, tuple(tests))


def _prefix_tests(group: GroupEvidence, eps_rows: Sequence[Sequence[float]]) -> list[SubTest]:
    tests = []
    candidates = prefix_candidates(group.tokens, group.length)
    for (t, prefix, members), cells in zip(candidates, group.prefixes, strict=True):
        observed = [group.tokens[i][t] for i in members]
        shown = ",".join(str(x) for x in prefix[-3:])
        name = f"tokens[{t}]" if t == 0 else f"tokens[{t}|{'…,' if t > 3 else ''}{shown}]"
        eps = _mean([eps_rows[i][t] for i in members])
        found = _token_test(name, observed, cells.cells, cells.rest, eps)
        if found is not None:
            tests.append(found)
    return tests


def _seed(*parts: str) -> int:
    digest = hashlib.blake2b("\x00".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def _label(group: GroupEvidence) -> str:
    return (
        f"{group.request_ids[0].rsplit('.', 1)[0]} (T={group.temperature:g}"
        + (f", top_k={group.top_k}" if group.top_k else "")
        + (f", top_p={group.top_p:g}" if group.top_p < 1.0 else "")
        + ")"
    )


def judge(
    evidence: DistributionEvidence,
    *,
    alpha: float = DEFAULT_ALPHA,
    seed_label: str = "",
    steps: Mapping[str, Sequence[RowRecord]] | None = None,
) -> DistributionResult:
    """Every sub-test, Holm and the power figures of one run, from its evidence alone, plus
    the step-aware sub-tests where ``steps`` gives requests' recorded rows (from the trace:
    the evidence holds no step structure).

    ``evidence`` must describe its own tokens consistently (``evidence.mismatch`` checks
    that against a trace, which includes the prefix tests)."""
    results = [
        _group_tests(_label(g), g, _seed(seed_label, str(g.number)), steps) for g in evidence.groups
    ]
    flat = [t for g in results for t in g.tests]
    _, adjusted = stats.holm([t.p_value for t in flat], alpha)
    m = max(1, len(flat))
    it = iter(adjusted)
    final: list[GroupResult] = []
    for group in results:
        tests = []
        for test in group.tests:
            detectable = None
            if test.name in ("pit", "tokens[0]"):
                detectable = _detectable_tv(alpha / m, test.df, test.null_nc, test.n)
            tests.append(
                SubTest(
                    test.name,
                    test.n,
                    test.df,
                    test.statistic,
                    test.null_nc,
                    test.p_value,
                    next(it),
                    detectable,
                    test.note,
                )
            )
        final.append(
            GroupResult(group.label, group.samples, group.positions, group.envelope, tuple(tests))
        )
    return DistributionResult(alpha, evidence.logits_dtype, tuple(final))


def analyse(
    samples: Sequence[Sample],
    oracle: ProbabilityOracle,
    *,
    alpha: float = DEFAULT_ALPHA,
    logits_dtype: str = "float32",
    seed_label: str = "",
) -> DistributionResult:
    """Test ``samples`` (sampled requests of one run) against the oracle: both phases."""
    from specseed.distribution.collect import collect  # torch: only when an oracle is used

    evidence = collect(samples, oracle, logits_dtype=logits_dtype)
    steps = {s.request_id: s.steps for s in samples if s.steps}
    return judge(evidence, alpha=alpha, seed_label=seed_label, steps=steps or None)
