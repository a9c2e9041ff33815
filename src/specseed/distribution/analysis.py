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

Precision. The engine samples from its own arithmetic, not from float64 exact values. Per
emitted token, an envelope ``eps`` bounds the total variation between the oracle's
distribution and one computed from the engine's logits: logits rounded to the engine's
logits dtype (unit roundoff u: 2^-24 float32, 2^-11 float16, 2^-8 bfloat16) change each
logit by at most ``delta = u * max|logit|``, so every probability moves by a factor in
``exp(+-2 delta / T)`` (TV <= 1 - exp(-2 delta / T)); float32 probability arithmetic
(softmax, the kernels' running sums) adds at most ``vocab * 2^-24``; and tokens whose
top-k/top-p membership could flip under that perturbation add their normalised mass. The
sub-tests then test against the envelope, not against exactness: a deviation of TV ``eps``
gives a chi-square noncentrality of at most ``2 n eps^2 / min(cell probability)``, and the
p-value is taken under that noncentral chi-square (the largest p-value any engine within
the envelope could produce). For float32 engines (the reference engine) the envelope is
about 1e-5 and changes nothing measurable; for bfloat16 logits it is wide and the finding
says so. ``alpha`` is never widened. An oracle that states a ``logits_error`` (the float32
oracle on CUDA, TF32 off: its logits differ from the CPU forward by reduction order) adds it
to ``u``: ``delta = (u + logits_error) * max|logit|``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from specseed.distribution import stats
from specseed.distribution.oracle import ProbabilityOracle, SamplingSetup, distributions
from specseed.distribution.steps import step_tests

if TYPE_CHECKING:
    from specseed.traces.records import RowRecord

DEFAULT_ALPHA = 1e-3
"""Family-wise significance level of one run's finding."""
POWER = 0.8
MIN_CELL = 5.0
"""Chi-square cells expected below this are pooled."""
MIN_SAMPLES = 20
"""Fewer sampled requests in a group than this are too few to test."""
MIN_PREFIX_SAMPLES = 40
MAX_PREFIX_TESTS = 16
UNIT_ROUNDOFF = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}


@dataclass(frozen=True)
class Sample:
    """One sampled request as the engine served it."""

    request_id: str
    prompt_ids: tuple[int, ...]
    setup: SamplingSetup
    tokens: tuple[int, ...]
    steps: tuple[RowRecord, ...] = ()
    """The request's recorded rows, in step order (empty: no step-aware sub-tests)."""


@dataclass(frozen=True)
class SubTest:
    """One chi-square (or exact) sub-test."""

    name: str
    n: int
    """Observations it counts."""
    df: int
    statistic: float
    null_nc: float
    """Noncentrality the precision envelope allows under H0."""
    p_value: float
    adjusted_p: float = 1.0
    """Holm-adjusted p-value (family: every sub-test of the run)."""
    detectable_tv: float | None = None
    """TV detected with 80% power at the Bonferroni level (pooled and first-token tests)."""
    note: str = ""
    """Where the deviation lies (for rejected tests)."""


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


# -- per-token quantities -------------------------------------------------------------------


def _envelope(
    logits: torch.Tensor,
    probs: torch.Tensor,
    setup: SamplingSetup,
    dtype: str,
    oracle_error: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: the TV envelope, and which tokens' filter membership is ambiguous."""
    unit = UNIT_ROUNDOFF.get(dtype, UNIT_ROUNDOFF["bfloat16"]) + oracle_error
    vocab = logits.shape[-1]
    delta = unit * logits.abs().amax(dim=-1)
    # Probability ratios under the perturbation, widened by float32 probability rounding.
    log_ratio = 2.0 * delta / setup.temperature + 64 * 2.0**-24
    eps = -torch.expm1(-log_ratio) + vocab * 2.0**-24
    ambiguous = torch.zeros_like(probs, dtype=torch.bool)
    if (0 < setup.top_k < vocab) or setup.top_p < 1.0:
        raw = torch.softmax(logits / setup.temperature, dim=-1)
        ratio = torch.exp(2.0 * log_ratio).unsqueeze(-1)
        sorted_desc, _ = torch.sort(raw, dim=-1, descending=True)
        if 0 < setup.top_k < vocab:
            # Membership flips only where the k-th and (k+1)-th probabilities nearly tie.
            last_kept = sorted_desc[:, setup.top_k - 1 : setup.top_k]
            first_dropped = sorted_desc[:, setup.top_k : setup.top_k + 1]
            near_tie = first_dropped * ratio >= last_kept / ratio
            band = (raw >= first_dropped / ratio) & (raw <= last_kept * ratio)
            ambiguous |= band & near_tie
        if setup.top_p < 1.0:
            greater = torch.searchsorted(
                (-sorted_desc).contiguous(), (-raw).contiguous(), right=False
            )
            prefix = torch.cumsum(sorted_desc, dim=-1) - sorted_desc
            mass = torch.gather(prefix, -1, greater.clamp(max=vocab - 1))
            ambiguous |= (mass >= setup.top_p / ratio) & (mass <= setup.top_p * ratio)
        kept = (probs > 0).to(torch.float64)
        kept_mass = (raw * kept).sum(-1).clamp(min=1e-300)
        eps = eps + 2.0 * (raw * ambiguous).sum(-1) / kept_mass
    return eps.clamp(max=1.0), ambiguous


def _pit(
    probs: torch.Tensor, tokens: torch.Tensor, noise: torch.Tensor, *, by_probability: bool
) -> torch.Tensor:
    """Randomized PIT of each token under its row: tokens ordered by descending probability
    (ties by id), or by id (the order in which inverse-CDF kernels lay tokens out)."""
    own = probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    if by_probability:
        order = torch.sort(-probs, dim=-1, stable=True).indices
        sorted_p = torch.gather(probs, -1, order)
        rank = torch.argsort(order, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        cdf = torch.cumsum(sorted_p, dim=-1) - sorted_p
        before = cdf.gather(-1, rank.unsqueeze(-1)).squeeze(-1)
    else:
        cdf = torch.cumsum(probs, dim=-1) - probs
        before = cdf.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return (before + noise * own).clamp(0.0, 1.0 - 1e-12)


# -- sub-tests ------------------------------------------------------------------------------


def _detectable_tv(alpha: float, df: int, null_nc: float, n: int) -> float:
    nc = stats.noncentrality_for_power(alpha, df, POWER, null_nc)
    return math.sqrt(nc / (4.0 * n))


def _pearson(counts: torch.Tensor, expected: torch.Tensor) -> float:
    return float(((counts - expected) ** 2 / expected).sum())


def _uniform_test(name: str, values: torch.Tensor, eps: float) -> SubTest | None:
    scale = "low token ids" if name.startswith("pit-id") else "the most probable tokens"
    n = values.numel()
    bins = max(2, min(20, n // 25))
    if n < 2 * MIN_CELL:
        return None
    counts = torch.bincount((values * bins).long().clamp(max=bins - 1), minlength=bins)
    expected = torch.full((bins,), n / bins, dtype=torch.float64)
    statistic = _pearson(counts.double(), expected)
    null_nc = 2.0 * n * eps * eps * bins
    p = stats.ncx2_sf(statistic, bins - 1, null_nc)
    heavy = int(torch.argmax(counts.double() - expected))
    note = (
        f"PIT bin [{heavy / bins:.2f}, {(heavy + 1) / bins:.2f}) holds {int(counts[heavy])} "
        f"tokens, {n / bins:.0f} expected (PIT near 0 = {scale})"
    )
    return SubTest(name, n, bins - 1, statistic, null_nc, p, note=note)


def _pair_test(name: str, first: torch.Tensor, second: torch.Tensor, eps: float) -> SubTest | None:
    n = first.numel()
    side = max(2, min(5, math.isqrt(n // 25)))
    if n < side * side * MIN_CELL:
        return None
    a = (first * side).long().clamp(max=side - 1)
    b = (second * side).long().clamp(max=side - 1)
    counts = torch.bincount(a * side + b, minlength=side * side).double()
    expected = torch.full_like(counts, n / (side * side))
    statistic = _pearson(counts, expected)
    cells = side * side
    null_nc = 2.0 * n * (2.0 * eps) ** 2 * cells
    p = stats.ncx2_sf(statistic, cells - 1, null_nc)
    heavy = int(torch.argmax(counts - expected))
    note = (
        f"cell (PIT bin {heavy // side}, then bin {heavy % side}) of a {side}x{side} grid holds "
        f"{int(counts[heavy])} pairs, {n / cells:.0f} expected"
    )
    return SubTest(name, n, cells - 1, statistic, null_nc, p, note=note)


def _token_test(name: str, tokens: torch.Tensor, probs: torch.Tensor, eps: float) -> SubTest | None:
    """Token counts against one exact distribution ``probs`` (cells below 5 pooled)."""
    n = tokens.numel()
    expected = probs * n
    big = expected >= MIN_CELL
    if int(big.sum()) < 1:
        return None
    counts = torch.bincount(tokens, minlength=probs.numel()).double()
    cells_obs = counts[big].tolist()
    cells_exp = expected[big].tolist()
    rest_exp = float(expected[~big].sum())
    rest_obs = float(counts[~big].sum())
    labels = [int(t) for t in torch.nonzero(big).flatten()]
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
    if len(cells_exp) < 2:
        return None
    obs = torch.tensor(cells_obs, dtype=torch.float64)
    exp = torch.tensor(cells_exp, dtype=torch.float64)
    if float(exp.min()) <= 0.0:
        return None
    statistic = _pearson(obs, exp)
    null_nc = n * 2.0 * eps * eps / (float(exp.min()) / n)
    p = stats.ncx2_sf(statistic, len(cells_exp) - 1, null_nc)
    worst = int(torch.argmax((obs - exp).abs() / exp.sqrt()))
    token = "rare tokens (pooled)" if labels[worst] == -1 else f"token {labels[worst]}"
    note = f"{token}: {int(obs[worst])} emitted, {float(exp[worst]):.1f} expected"
    return SubTest(name, n, len(cells_exp) - 1, statistic, null_nc, p, note=note)


# -- one group ------------------------------------------------------------------------------


def _group_tests(
    label: str,
    samples: Sequence[Sample],
    oracle: ProbabilityOracle,
    dtype: str,
    seed: int,
) -> GroupResult:
    length = min(len(s.tokens) for s in samples)
    setup = samples[0].setup
    sequences = [(s.prompt_ids, s.tokens[:length]) for s in samples]
    logits = torch.stack(oracle.logits(sequences))  # [N, L, V]
    n_req, _, vocab = logits.shape
    flat_logits = logits.reshape(-1, vocab)
    probs = distributions(flat_logits, setup)
    oracle_error = float(getattr(oracle, "logits_error", 0.0))
    eps, ambiguous = _envelope(flat_logits, probs, setup, dtype, oracle_error)
    tokens = torch.tensor([s.tokens[:length] for s in samples], dtype=torch.int64).reshape(-1)
    generator = torch.Generator().manual_seed(seed)
    noise = torch.rand(tokens.shape, generator=generator, dtype=torch.float64)
    pit = _pit(probs, tokens, noise, by_probability=True).reshape(n_req, length)
    pit_id = _pit(probs, tokens, noise, by_probability=False).reshape(n_req, length)
    eps_grid = eps.reshape(n_req, length)
    mean_eps = float(eps.mean())
    tests: list[SubTest] = []

    own = probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    amb = ambiguous.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    impossible = int(((own <= 0) & ~amb).sum())
    tests.append(
        SubTest(
            "impossible",
            tokens.numel(),
            0,
            float(impossible),
            0.0,
            0.0 if impossible else 1.0,
            note=f"{impossible} emitted tokens have probability 0 under the target "
            "(outside its top-k/top-p set)",
        )
    )
    pooled = _uniform_test("pit", pit.reshape(-1), mean_eps)
    if pooled is not None:
        tests.append(pooled)
    pooled_id = _uniform_test("pit-id", pit_id.reshape(-1), mean_eps)
    if pooled_id is not None:
        tests.append(pooled_id)
    for values, suffix in ((pit, ""), (pit_id, "-id")):
        for start, name in ((0, "pairs-even"), (1, "pairs-odd")):
            firsts = values[:, start : length - 1 : 2].reshape(-1)
            seconds = values[:, start + 1 : length : 2].reshape(-1)
            if firsts.numel():
                found = _pair_test(name + suffix, firsts, seconds, mean_eps)
                if found is not None:
                    tests.append(found)
    for t in range(length):
        found = _uniform_test(f"pit[{t}]", pit[:, t], float(eps_grid[:, t].mean()))
        if found is not None:
            tests.append(found)
    for t in range(length - 1):
        eps_pair = float(eps_grid[:, t].mean() + eps_grid[:, t + 1].mean()) / 2.0
        found = _pair_test(f"pairs[{t}]", pit[:, t], pit[:, t + 1], eps_pair)
        if found is not None:
            tests.append(found)
    tests.extend(_prefix_tests(samples, length, probs.reshape(n_req, length, vocab), eps_grid))
    if any(s.steps for s in samples):
        # Step-aware pairs (``steps``): where the step structure or shared draws can couple.
        for step in step_tests(pit_id.tolist(), [s.steps for s in samples], eps_grid.tolist()):
            tests.append(
                SubTest(
                    step.name,
                    step.n,
                    step.df,
                    step.statistic,
                    step.null_nc,
                    step.p_value,
                    note=step.note,
                )
            )
    return GroupResult(label, n_req, length, mean_eps, tuple(tests))


def _prefix_tests(
    samples: Sequence[Sample], length: int, probs: torch.Tensor, eps: torch.Tensor
) -> list[SubTest]:
    candidates: list[tuple[int, int, tuple[int, ...], list[int]]] = []
    for t in range(length):
        by_prefix: dict[tuple[int, ...], list[int]] = {}
        for i, s in enumerate(samples):
            by_prefix.setdefault(s.tokens[:t], []).append(i)
        for prefix, members in by_prefix.items():
            if len(members) >= MIN_PREFIX_SAMPLES or t == 0:
                candidates.append((t, -len(members), prefix, members))
    # Position 0, then the most frequent prefixes at the earliest positions.
    candidates.sort(key=lambda c: (c[0] != 0, c[1], c[0]))
    tests = []
    for t, _, prefix, members in candidates[:MAX_PREFIX_TESTS]:
        rows = torch.tensor(members)
        observed = torch.tensor([samples[i].tokens[t] for i in members], dtype=torch.int64)
        shown = ",".join(str(x) for x in prefix[-3:])
        name = f"tokens[{t}]" if t == 0 else f"tokens[{t}|{'…,' if t > 3 else ''}{shown}]"
        found = _token_test(name, observed, probs[rows[0], t], float(eps[rows, t].mean()))
        if found is not None:
            tests.append(found)
    return tests


def _seed(*parts: str) -> int:
    digest = hashlib.blake2b("\x00".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def analyse(
    samples: Sequence[Sample],
    oracle: ProbabilityOracle,
    *,
    alpha: float = DEFAULT_ALPHA,
    logits_dtype: str = "float32",
    seed_label: str = "",
) -> DistributionResult:
    """Test ``samples`` (sampled requests of one run) against the oracle; see module doc."""
    groups: dict[tuple[tuple[int, ...], SamplingSetup], list[Sample]] = {}
    for sample in samples:
        groups.setdefault((sample.prompt_ids, sample.setup), []).append(sample)
    results: list[GroupResult] = []
    for number, ((_prompt, setup), members) in enumerate(groups.items()):
        if len(members) < MIN_SAMPLES or min(len(m.tokens) for m in members) < 1:
            continue
        label = (
            f"{members[0].request_id.rsplit('.', 1)[0]} (T={setup.temperature:g}"
            + (f", top_k={setup.top_k}" if setup.top_k else "")
            + (f", top_p={setup.top_p:g}" if setup.top_p < 1.0 else "")
            + ")"
        )
        results.append(
            _group_tests(label, members, oracle, logits_dtype, _seed(seed_label, str(number)))
        )
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
    return DistributionResult(alpha, logits_dtype, tuple(final))
