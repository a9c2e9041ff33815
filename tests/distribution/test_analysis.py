"""The statistics of the distribution check, on a target whose probabilities are known.

The oracle here is a small Markov model (the next token's logits depend on the previous
token); samples drawn exactly from it must pass, and samples drawn in the ways a broken
sampler draws them must fail. The engine is not involved (tests/checks does that).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specseed.distribution.analysis import Sample, analyse, judge
from specseed.distribution.collect import collect
from specseed.distribution.evidence import mismatch, parse_evidence
from specseed.distribution.oracle import SamplingSetup, distributions

VOCAB = 16
SETUP = SamplingSetup(temperature=1.0, top_k=0, top_p=1.0)


class MarkovOracle:
    """Next-token logits = a fixed row per previous token."""

    description = "markov"
    vocab_size = VOCAB

    def __init__(self, seed: int, *, memoryless: bool = False) -> None:
        generator = torch.Generator().manual_seed(seed)
        table = torch.randn(VOCAB, VOCAB, generator=generator, dtype=torch.float64) * 1.5
        self.table = table[:1].expand(VOCAB, VOCAB) if memoryless else table

    def logits(
        self, sequences: Sequence[tuple[Sequence[int], Sequence[int]]]
    ) -> list[torch.Tensor]:
        out = []
        for prompt, emitted in sequences:
            previous = [prompt[-1], *emitted[:-1]]
            out.append(self.table[torch.tensor(previous)])
        return out


def _exact_samples(
    oracle: MarkovOracle, n: int, length: int, seed: int, setup: SamplingSetup = SETUP
) -> list[Sample]:
    generator = torch.Generator().manual_seed(seed)
    samples = []
    for i in range(n):
        tokens: list[int] = []
        previous = 3
        for _ in range(length):
            probs = distributions(oracle.table[previous].unsqueeze(0), setup)[0]
            previous = int(torch.multinomial(probs, 1, generator=generator))
            tokens.append(previous)
        samples.append(Sample(f"s.{i}", (3,), setup, tuple(tokens)))
    return samples


def test_exact_samples_pass_across_seeds() -> None:
    # 20 independent exact samples at alpha 1e-3: a false alarm here would be a 2% event.
    failures = 0
    for seed in range(20):
        oracle = MarkovOracle(seed)
        result = analyse(_exact_samples(oracle, 200, 12, seed), oracle, seed_label=str(seed))
        failures += bool(result.rejected)
    assert failures == 0


def test_exact_samples_pass_with_top_k_and_top_p() -> None:
    setup = SamplingSetup(temperature=0.7, top_k=5, top_p=0.9)
    oracle = MarkovOracle(1)
    result = analyse(_exact_samples(oracle, 300, 10, 5, setup), oracle)
    assert not result.rejected
    assert any(t.name == "impossible" and t.p_value == 1.0 for t in result.tests)


def test_temperature_mismatch_is_detected() -> None:
    oracle = MarkovOracle(2)
    drawn = _exact_samples(oracle, 200, 12, 7, SamplingSetup(0.8, 0, 1.0))
    claimed = [Sample(s.request_id, s.prompt_ids, SETUP, s.tokens) for s in drawn]
    result = analyse(claimed, oracle)
    assert result.rejected


def test_token_outside_the_filter_is_impossible() -> None:
    setup = SamplingSetup(temperature=1.0, top_k=2, top_p=1.0)
    oracle = MarkovOracle(3)
    samples = _exact_samples(oracle, 100, 6, 1, setup)
    unfiltered = _exact_samples(oracle, 100, 6, 2)
    mixed = samples + [
        Sample(s.request_id + "u", s.prompt_ids, setup, s.tokens) for s in unfiltered
    ]
    result = analyse(mixed, oracle)
    impossible = next(t for t in result.tests if t.name == "impossible")
    assert impossible.statistic > 0 and impossible.adjusted_p == 0.0


def test_shared_uniform_with_exact_marginals_is_caught_only_jointly() -> None:
    # Every token's marginal is exactly the target's (a memoryless target, each token drawn
    # by inverse CDF), but positions 2j and 2j + 1 share one uniform. Per-position tests
    # cannot see it; the pair and prefix tests must.
    oracle = MarkovOracle(4, memoryless=True)
    probs = distributions(oracle.table[0].unsqueeze(0), SETUP)[0]
    cdf = torch.cumsum(probs, 0)
    generator = torch.Generator().manual_seed(9)
    samples = []
    for i in range(300):
        tokens = []
        for _ in range(6):
            u = torch.rand((), generator=generator, dtype=torch.float64)
            token = int(torch.searchsorted(cdf, u).clamp(max=VOCAB - 1))
            tokens.extend([token, token])
        samples.append(Sample(f"s.{i}", (3,), SETUP, tuple(tokens)))
    result = analyse(samples, oracle)
    names = {t.name for _, t in result.rejected}
    assert names, "the coupling went unnoticed"
    assert all(name.startswith(("pairs", "tokens[")) for name in names), names
    assert not any(name.startswith("pit[") or name in ("pit", "pit-id") for name in names)


def test_bfloat16_envelope_is_wider_and_only_raises_p_values() -> None:
    oracle = MarkovOracle(5)
    samples = _exact_samples(oracle, 200, 8, 3)
    f32 = analyse(samples, oracle, logits_dtype="float32")
    bf16 = analyse(samples, oracle, logits_dtype="bfloat16")
    assert bf16.groups[0].envelope > 100 * f32.groups[0].envelope
    for a, b in zip(f32.tests, bf16.tests, strict=True):
        assert b.p_value >= a.p_value - 1e-12
        assert b.null_nc >= a.null_nc


def test_power_is_reported_for_pooled_and_first_token_tests() -> None:
    oracle = MarkovOracle(6)
    result = analyse(_exact_samples(oracle, 400, 8, 4), oracle)
    reported = {t.name: t.detectable_tv for t in result.tests if t.detectable_tv is not None}
    assert set(reported) == {"pit", "tokens[0]"}
    assert 0 < reported["pit"] < reported["tokens[0]"] < 1


def test_stored_evidence_judges_as_the_oracle_did_and_names_other_tokens() -> None:
    import json

    oracle = MarkovOracle(7)
    setup = SamplingSetup(temperature=0.9, top_k=6, top_p=0.95)
    samples = _exact_samples(oracle, 120, 6, 8, setup)
    direct = analyse(samples, oracle, seed_label="x")
    evidence = collect(samples, oracle)
    stored = parse_evidence(json.loads(evidence.to_json()))
    assert stored == evidence and mismatch(stored, samples, "float32") is None
    assert judge(stored, seed_label="x") == direct
    assert judge(stored, seed_label="y") != direct  # the PIT noise follows the label
    moved = (*samples[-1].tokens[:2], (samples[-1].tokens[2] + 1) % VOCAB, *samples[-1].tokens[3:])
    other = [*samples[:-1], Sample("s.119", (3,), setup, moved)]
    assert mismatch(stored, other, "float32") == "s.119: the emitted tokens differ at position 2"
    assert "bfloat16" in str(mismatch(stored, samples, "bfloat16"))


def test_evidence_scored_in_chunks_equals_evidence_scored_at_once(monkeypatch) -> None:
    """The oracle scores a group in chunks of bounded logits memory; the evidence (per-token
    numbers, ambiguity indices, prefix cells) must not depend on the chunk size."""
    from specseed.distribution import collect as collect_module

    oracle = MarkovOracle(3)
    setup = SamplingSetup(temperature=1.0, top_k=8, top_p=0.95)
    samples = _exact_samples(oracle, 300, 7, 4, setup)
    whole = collect(samples, oracle)
    calls: list[int] = []
    original = oracle.logits

    def counted(sequences):  # type: ignore[no-untyped-def]
        calls.append(len(sequences))
        return original(sequences)

    monkeypatch.setattr(oracle, "logits", counted)
    # 7 tokens x 16 vocab x 8 bytes = 896 bytes a request: chunks of 4 requests.
    monkeypatch.setattr(collect_module, "CHUNK_BYTES", 4 * 7 * VOCAB * 8)
    chunked = collect(samples, oracle)
    assert calls and max(calls) == 4 and sum(calls) == 300
    assert any(cells.position > 0 for cells in whole.groups[0].prefixes)
    assert chunked == whole
