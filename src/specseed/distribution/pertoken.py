"""Per-token losslessness: the speculative arm's tokens scored by the K = 0 arm's reported
log-probabilities.

Where the baseline (K = 0) requests ask ``logprobs: n``, the engine reports with every emitted
token the n most probable next tokens and their log-probabilities: the next-token distribution
after that token's prefix, as far as n tokens show it, the rest being one "tail" category of
mass 1 - sum. Every speculative token whose prefix (the emitted tokens before it) some
baseline copy also emitted can then be scored against that distribution, at every position,
not only where enough copies share a prefix for a histogram.

The score is the randomized probability integral transform (PIT). Categories in a fixed
order (most probable first, ties by id, the tail last), F the cumulative mass before the
token's category and p its mass: u = F + V p with V ~ U(0, 1) drawn independently. When the
token was drawn from the reported distribution, u ~ U(0, 1), and the u of successive
positions are independent (each is uniform given everything before it), so the scored u of
one arm are i.i.d. uniform whichever positions are scored: a position is scored or not on
its prefix alone.

Tests, per group:

- the control: the baseline's own tokens scored the same way (each against another baseline
  copy's report for its prefix) must be uniform (one-sample Kolmogorov-Smirnov at
  ``CONTROL_ALPHA``). Where they are not, the reports do not describe the distribution the
  engine samples from (vLLM reports raw log-probabilities by default, before temperature
  and top-k/top-p; or they are not log-probabilities at all): the per-token test is not run
  and the reason says so;
- the test: the speculative arm's u against the baseline arm's u, a two-sample
  Kolmogorov-Smirnov test (its asymptotic p-value: conservative). Under H0 both are i.i.d.
  uniform; being two-sample, it does not turn a small inaccuracy of the reports into a false
  alarm. Each arm is scored against reports of the same number of other copies (a
  speculative copy ignores one baseline copy, a baseline copy ignores itself), so the scored
  positions are chosen alike in both arms.

Power (stated, not assumed for every alternative). A speculative token drawn from q instead
of p (total variation delta) moves its PIT's CDF G. When q / p is monotone in the category
order, as it is for a shift toward the likelier tokens (sharpening: a bias toward the draft's
favourites) or away from them (flattening), G - u is concave (or convex), vanishes at 0 and 1
and reaches delta, so it is at least delta / 2 at u = 1/2 and the pooled CDF moves by at least
the mean delta over two. A Kolmogorov-Smirnov test at level a with n1 and n2 scored tokens
rejects with probability at least 0.8 when the CDFs differ by
d >= c(a) sqrt((n1 + n2) / (n1 n2)) + z(0.8) sqrt(1 / (4 n1) + 1 / (4 n2)), c(a) =
sqrt(-ln(a / 2) / 2) (the asymptotic critical value, and the binomial spread of one ECDF
point): ``detectable_tv`` is 2 d. Differences that only swap mass between tokens of similar
probability can hide from it (the histogram sub-tests cover those).

Pure Python (no torch, numpy or scipy: an audit does not pay scipy's import); it reads tokens
and reported log-probabilities only, so it judges a black-box server.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from random import Random

from specseed.distribution.stats import ks_two_sample, ks_uniform

CONTROL_ALPHA = 1e-3
"""Below this one-sample p-value the baseline's reports do not describe its own tokens."""
MIN_SCORED = 50
"""Fewest scored tokens per arm for the per-token test."""
NAME = "per token"
"""The sub-test's name in the family."""
_Z80 = 0.8416212335729143
"""The standard normal quantile of 0.8."""

Top = tuple[tuple[int, float], ...]
"""A reported top-n: (token, natural-log probability) pairs."""
Categories = tuple[tuple[tuple[int, float], ...], float]
"""A report as ``_categories`` orders it: (token, probability) most probable first, and the
tail's mass."""


@dataclass(frozen=True)
class PerToken:
    """The per-token test of one group."""

    statistic: float
    """Kolmogorov-Smirnov D between the arms' scored PIT values."""
    p_value: float
    speculative: int
    """Scored speculative tokens."""
    baseline: int
    where: str
    """Where the arms' CDFs differ most, in words."""


def _categories(top: Top) -> Categories:
    """The reported categories, most probable first (ties by id), and the tail's mass."""
    seen: dict[int, float] = {}
    for token, logprob in top:
        if token not in seen and math.isfinite(logprob) and logprob <= 0.0:
            seen[token] = math.exp(logprob)
    total = sum(seen.values())
    if total > 1.0:  # rounding in the report: renormalise, no tail left
        seen = {t: p / total for t, p in seen.items()}
        total = 1.0
    ordered = tuple(sorted(seen.items(), key=lambda item: (-item[1], item[0])))
    return ordered, max(0.0, 1.0 - total)


def pit(top: Top, token: int, v: float) -> float:
    """The randomized PIT of ``token`` under the reported distribution, with ``v`` in [0, 1)."""
    return _pit(_categories(top), token, v)


def _pit(report: Categories, token: int, v: float) -> float:
    categories, tail = report
    below = 0.0
    for candidate, p in categories:
        if candidate == token:
            return below + v * p
        below += p
    return below + v * tail


class _Reports:
    """The baseline arm's reports as a trie of prefixes: for each prefix, the first two
    copies that emitted it with a report for the next token (its categories, ordered once:
    one report scores every copy that shares its prefix)."""

    def __init__(self, sequences: Sequence[Sequence[int]], tops: Sequence[Sequence[Top]]):
        self.children: dict[tuple[int, int], int] = {}
        self.reports: dict[int, list[tuple[int, Categories]]] = {}
        for copy, (tokens, reported) in enumerate(zip(sequences, tops, strict=True)):
            node = 0
            for position, token in enumerate(tokens):
                top = reported[position] if position < len(reported) else ()
                if top:
                    held = self.reports.setdefault(node, [])
                    if len(held) < 2:
                        held.append((copy, _categories(top)))
                node = self.children.setdefault((node, token), len(self.children) + 1)

    def scores(self, tokens: Sequence[int], ignore: int, random: Random) -> list[float]:
        """The PIT of every token whose prefix another copy (not ``ignore``) reported on."""
        out: list[float] = []
        node = 0
        for token in tokens:
            held = [report for copy, report in self.reports.get(node, ()) if copy != ignore]
            if held:
                out.append(_pit(held[0], token, random.random()))
            following = self.children.get((node, token))
            if following is None:
                break
            node = following
        return out


def per_token(
    label: str,
    speculative: Sequence[Sequence[int]],
    baseline: Sequence[Sequence[int]],
    baseline_tops: Sequence[Sequence[Top]],
) -> PerToken | str:
    """The per-token test of one group, or why it was not run."""
    reports = _Reports(baseline, baseline_tops)
    # One stream of V per group, seeded by its label: a bundle judged again scores alike.
    random = Random(zlib.crc32(label.encode()))
    n_base = len(baseline)
    spec_u = [u for i, s in enumerate(speculative) for u in reports.scores(s, i % n_base, random)]
    base_u = [u for j, s in enumerate(baseline) for u in reports.scores(s, j, random)]
    if min(len(spec_u), len(base_u)) < MIN_SCORED:
        return (
            f"{label}: {len(spec_u)} speculative and {len(base_u)} baseline tokens scored by "
            f"the K = 0 log-probabilities, fewer than {MIN_SCORED} per arm (per-token test)"
        )
    control = ks_uniform(base_u)
    if control < CONTROL_ALPHA:
        return (
            f"{label}: the K = 0 run's reported log-probabilities do not describe its own "
            f"tokens (one-sample p {control:.2g} over {len(base_u)} tokens): raw "
            "log-probabilities of a tempered or filtered request, or not log-probabilities "
            "of the sampled distribution; per-token test not run"
        )
    result = ks_two_sample(spec_u, base_u)
    favour = "likelier" if result.sign > 0 else "less likely"
    where = (
        f"speculative tokens fall in the K = 0 distribution's {favour} tokens: their PIT "
        f"CDF differs by {result.statistic:.3f} at u = {result.location:.3f}"
    )
    return PerToken(
        result.statistic,
        result.p_value,
        len(spec_u),
        len(base_u),
        where,
    )


def detectable_tv(alpha: float, n1: int, n2: int) -> float:
    """Total variation per scored token detected with 80 % power at level ``alpha``, for a
    shift toward or away from the likelier tokens (module docstring)."""
    critical = math.sqrt(-0.5 * math.log(alpha / 2.0)) * math.sqrt((n1 + n2) / (n1 * n2))
    spread = _Z80 * math.sqrt(0.25 / n1 + 0.25 / n2)
    return min(1.0, 2.0 * (critical + spread))
