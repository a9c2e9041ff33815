"""The per-token losslessness test (``specseed.distribution.pertoken``) on exact samples of a
small autoregressive model: calibrated when both arms sample the reported distributions,
rejecting a sharpened or flattened arm with the power it states, and refusing to run where
the reports do not describe the baseline's own tokens."""

from __future__ import annotations

import math
from collections.abc import Sequence
from random import Random

from specseed.distribution import pertoken
from specseed.distribution.pertoken import PerToken, Top, per_token, pit
from specseed.distribution.twosample import TwoSampleGroup, analyse

VOCAB = 12
TOP_N = 5


def _probs(prefix: Sequence[int], temperature: float = 1.0, power: float = 1.0) -> list[float]:
    """A deterministic next-token distribution of a prefix: logits from a hash of it."""
    rng = Random(hash(tuple(prefix)) & 0xFFFFFFFF)
    logits = [rng.gauss(0.0, 1.5) / temperature * power for _ in range(VOCAB)]
    top = max(logits)
    weights = [math.exp(v - top) for v in logits]
    total = sum(weights)
    return [w / total for w in weights]


def _report(probs: Sequence[float]) -> Top:
    order = sorted(range(VOCAB), key=lambda t: (-probs[t], t))[:TOP_N]
    return tuple((t, math.log(probs[t])) for t in order)


def _arm(
    copies: int,
    length: int,
    rng: Random,
    power: float = 1.0,
    report_temperature: float | None = None,
) -> tuple[list[tuple[int, ...]], list[tuple[Top, ...]]]:
    """Sequences sampled from the model (sharpened by ``power``), with the reports of the
    plain model (or of the model at ``report_temperature``: raw against tempered)."""
    sequences, tops = [], []
    for _ in range(copies):
        tokens: list[int] = []
        reports: list[Top] = []
        for _ in range(length):
            reports.append(_report(_probs(tokens, temperature=report_temperature or 1.0)))
            tokens.append(rng.choices(range(VOCAB), _probs(tokens, power=power))[0])
        sequences.append(tuple(tokens))
        tops.append(tuple(reports))
    return sequences, tops


def test_pit_orders_categories_and_puts_the_tail_last() -> None:
    top: Top = ((3, math.log(0.5)), (1, math.log(0.2)), (7, math.log(0.2)))
    # Most probable first, equal ones by id: 3 [0, .5), 1 [.5, .7), 7 [.7, .9), tail [.9, 1).
    assert pit(top, 3, 0.0) == 0.0
    assert math.isclose(pit(top, 1, 0.5), 0.6)
    assert math.isclose(pit(top, 7, 0.0), 0.7)
    assert math.isclose(pit(top, 42, 0.5), 0.95)
    # A report whose mass rounds above one is renormalised: no tail, nothing outside [0, 1].
    assert 0.0 <= pit(((1, math.log(0.6)), (2, math.log(0.6))), 9, 0.99) <= 1.0


def test_exact_samples_are_calibrated_over_many_seeds() -> None:
    p_values = []
    for seed in range(120):
        rng = Random(seed)
        spec, _ = _arm(60, 6, rng)
        base, tops = _arm(60, 6, rng)
        result = per_token(f"g{seed}", spec, base, tops)
        # The control rejects clean reports at its own level (1e-3): a skip, never a pass.
        if isinstance(result, PerToken):
            p_values.append(result.p_value)
    assert len(p_values) >= 117
    below = sum(p < 0.05 for p in p_values) / len(p_values)
    assert below < 0.12, below  # 5 % expected; 0.12 is about 3 standard errors above
    assert min(p_values) > 1e-4


def test_a_sharpened_arm_is_rejected_and_said_to_favour_likelier_tokens() -> None:
    rng = Random(1)
    spec, _ = _arm(150, 8, rng, power=1.6)
    base, tops = _arm(150, 8, rng)
    result = per_token("hot", spec, base, tops)
    assert isinstance(result, PerToken)
    assert result.p_value < 1e-4
    assert "likelier" in result.where
    flattened, _ = _arm(150, 8, rng, power=0.5)
    result = per_token("hot", flattened, base, tops)
    assert isinstance(result, PerToken) and result.p_value < 1e-4
    assert "less likely" in result.where


def test_stated_power_holds_for_a_shift_toward_the_likelier_tokens() -> None:
    """At the sharpening whose per-token TV equals the stated detectable TV, the test
    rejects at its level in at least 80 % of repeats (here: 70 %, for the repeats' noise)."""
    alpha, copies, length = 0.01, 80, 6
    # Measure the stated TV on one clean pair, then the TV a sharpening power gives.
    rng = Random(5)
    spec, _ = _arm(copies, length, rng)
    base, tops = _arm(copies, length, rng)
    clean = per_token("g", spec, base, tops)
    assert isinstance(clean, PerToken)
    stated = pertoken.detectable_tv(alpha, clean.speculative, clean.baseline)

    def mean_tv(power: float) -> float:
        prefixes = [s[:i] for s in base for i in range(length)]
        return sum(
            0.5 * sum(abs(a - b) for a, b in zip(_probs(p, power=power), _probs(p), strict=True))
            for p in prefixes
        ) / len(prefixes)

    power = 1.0
    while mean_tv(power) < stated:
        power += 0.05
    rejected = 0
    for seed in range(30):
        rng = Random(100 + seed)
        spec, _ = _arm(copies, length, rng, power=power)
        base, tops = _arm(copies, length, rng)
        result = per_token(f"g{seed}", spec, base, tops)
        rejected += isinstance(result, PerToken) and result.p_value < alpha
    assert rejected >= 21, (rejected, stated, power)


def test_reports_that_do_not_describe_the_baselines_tokens_stop_the_test() -> None:
    """Raw log-probabilities of a tempered request (vLLM's default report) describe another
    distribution than the one sampled: the control says so and nothing is judged."""
    rng = Random(3)
    spec, _ = _arm(150, 8, rng)
    base, tops = _arm(150, 8, rng, report_temperature=2.5)
    result = per_token("hot", spec, base, tops)
    assert isinstance(result, str)
    assert "do not describe its own tokens" in result


def test_too_few_scored_tokens_is_said_not_tested() -> None:
    rng = Random(4)
    spec, _ = _arm(10, 2, rng)
    base, tops = _arm(10, 2, rng)
    result = per_token("tiny", spec, base, tops)
    assert isinstance(result, str) and "fewer than" in result


def test_the_two_sample_family_holds_the_per_token_test_with_its_power() -> None:
    rng = Random(6)
    spec, _ = _arm(150, 8, rng, power=1.6)
    base, tops = _arm(150, 8, rng)
    result = analyse([TwoSampleGroup("hot", tuple(spec), tuple(base), tuple(tops))])
    [scored] = [t for t in result.tests if t.name == pertoken.NAME]
    assert scored.rejected and 0.0 < scored.detectable_tv < 1.0
    without = analyse([TwoSampleGroup("hot", tuple(spec), tuple(base))])
    assert not [t for t in without.tests if t.name == pertoken.NAME]
    assert len(without.tests) == len(result.tests) - 1
