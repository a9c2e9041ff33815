"""flashinfer's calling conventions and specseed's extensions on the CPU samplers."""

from __future__ import annotations

import pytest
import torch

import specseed.sampling as sampling
from specseed.core.errors import InputError
from specseed.rng import philox_uniforms
from specseed.sampling import SamplingInputError

U64 = (1 << 64) - 1


def probs(batch: int = 6, vocab: int = 64, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(1, 50, (batch, vocab), generator=g)
    scaled = counts * 65536 // counts.sum(dim=1, keepdim=True)
    scaled[:, 0] += 65536 - scaled.sum(dim=1)
    return scaled.to(torch.float32) / 65536


SINGLE_ROW_SAMPLERS = [
    ("sampling_from_probs", ()),
    ("top_k_sampling_from_probs", (5,)),
    ("top_p_sampling_from_probs", (0.5,)),
    ("min_p_sampling_from_probs", (0.2,)),
    ("top_k_top_p_sampling_from_probs", (5, 0.8)),
]


@pytest.mark.parametrize(("name", "extra"), SINGLE_ROW_SAMPLERS)
def test_return_shapes_and_dtypes(name: str, extra: tuple) -> None:
    fn = getattr(sampling, name)
    p = probs()
    tokens = fn(p, *extra, seed=1, offset=0)
    assert isinstance(tokens, torch.Tensor) and tokens.dtype == torch.int32 and tokens.shape == (6,)
    tokens2, valid = fn(p, *extra, seed=1, offset=0, return_valid=True)
    assert torch.equal(tokens, tokens2) and valid.dtype == torch.bool and bool(valid.all())
    tokens3, draws = fn(p, *extra, seed=1, offset=0, return_draws=True)
    assert torch.equal(tokens, tokens3) and draws.dtype == torch.int64 and bool((draws >= 1).all())
    *_, draws2 = fn(p, *extra, seed=1, offset=0, return_valid=True, return_draws=True)
    assert torch.equal(draws, draws2)
    indexed = fn(p, *extra, indices=torch.tensor([2, 2, 0], dtype=torch.int32), seed=1, offset=0)
    assert indexed.dtype == torch.int32
    indexed64 = fn(p, *extra, indices=torch.tensor([2, 2, 0], dtype=torch.int64), seed=1, offset=0)
    assert indexed64.dtype == torch.int64


@pytest.mark.parametrize(("name", "extra"), SINGLE_ROW_SAMPLERS)
def test_default_subsequence_is_the_output_row(name: str, extra: tuple) -> None:
    """Row r of a batch equals a one-row call on subsequence r: the batch-position effect."""
    fn = getattr(sampling, name)
    p = probs(8, 200, seed=3)
    seeds = torch.arange(8, dtype=torch.int64) + 100
    offsets = torch.full((8,), 20, dtype=torch.int64)
    batch = fn(p, *extra, seed=seeds, offset=offsets)
    for r in range(8):
        alone = fn(p[r : r + 1], *extra, seed=seeds[r : r + 1], offset=offsets[r : r + 1],
                   subsequence=torch.tensor([r]))  # fmt: skip
        assert int(alone[0]) == int(batch[r])
    # Same row, same seed and offset, different batch positions: the draws differ.
    same = fn(p[:1].expand(8, -1), *extra, seed=7, offset=0, return_draws=True)[0]
    pinned = fn(p[:1].expand(8, -1), *extra, seed=7, offset=0,
                subsequence=torch.zeros(8, dtype=torch.int64))  # fmt: skip
    assert len(set(pinned.tolist())) == 1
    if name != "top_k_sampling_from_probs":  # top-5 of 200 may well agree by chance
        assert len(set(same.tolist())) > 1


def test_element0_reads_only_the_first_seed_and_offset() -> None:
    p = probs(8, 300, seed=5)
    seeds = torch.tensor([11, 22, 33, 44, 55, 66, 77, 88])
    offsets = torch.tensor([4, 8, 12, 16, 20, 24, 28, 32])
    legacy = sampling.top_p_sampling_from_probs(
        p, 0.9, seed=seeds, offset=offsets, seed_offset_indexing="element0"
    )
    row0 = sampling.top_p_sampling_from_probs(p, 0.9, seed=11, offset=4)
    per_row = sampling.top_p_sampling_from_probs(p, 0.9, seed=seeds, offset=offsets)
    assert torch.equal(legacy, row0)
    assert not torch.equal(legacy, per_row)


def test_negative_int64_seed_equals_uint64_seed() -> None:
    p = probs()
    a = sampling.sampling_from_probs(p, seed=U64, offset=3)
    b = sampling.sampling_from_probs(p, seed=-1, offset=3)
    c = sampling.sampling_from_probs(p, seed=torch.tensor([-1]), offset=torch.tensor([3]))
    assert torch.equal(a, b) and torch.equal(a, c)


def test_length_one_tensors_broadcast() -> None:
    p = probs()
    a = sampling.top_k_sampling_from_probs(p, 4, seed=torch.tensor([9]), offset=torch.tensor([2]))
    b = sampling.top_k_sampling_from_probs(p, 4, seed=9, offset=2)
    assert torch.equal(a, b)


def test_rows_are_independent_of_each_other() -> None:
    p = probs(6, 100, seed=8)
    seeds = torch.arange(6, dtype=torch.int64)
    offsets = torch.zeros(6, dtype=torch.int64)
    before = sampling.top_p_sampling_from_probs(p, 0.7, seed=seeds, offset=offsets)
    changed = p.clone()
    changed[3] = probs(1, 100, seed=99)[0]
    after = sampling.top_p_sampling_from_probs(changed, 0.7, seed=seeds, offset=offsets)
    keep = [0, 1, 2, 4, 5]
    assert torch.equal(before[keep], after[keep])


def test_chain_returns_flashinfer_triple_and_updates_int32_counters() -> None:
    p = probs(2 * 4, 32, seed=1).reshape(2, 4, 32)
    draft, target = p[:, :3].contiguous(), p.flip(2).contiguous()
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    acc = torch.tensor([10, 10], dtype=torch.int32)
    emitted = torch.tensor([1, 1], dtype=torch.int32)
    out, acc_out, emitted_out = sampling.chain_speculative_sampling(
        draft, ids, target, acc, emitted, seed=3, offset=0
    )
    assert out.shape == (2, 4) and out.dtype == torch.int32
    assert acc_out is acc and emitted_out is emitted
    fresh = sampling.chain_speculative_sampling(draft, ids, target, seed=3, offset=0)
    assert torch.equal(acc, fresh[1] + 10) and torch.equal(emitted, fresh[2] + 1)
    assert len(sampling.chain_speculative_sampling(draft, ids, target, seed=3, offset=0,
                                                   return_draws=True)) == 4  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "explicit seed and offset"),
        ({"seed": 1, "offset": torch.tensor([0])}, "both be tensors or both be scalars"),
        ({"seed": torch.tensor([1, 2]), "offset": torch.tensor([0, 0])}, "length must be 1 or 6"),
        ({"seed": torch.tensor([1.0]), "offset": torch.tensor([0])}, "int64/uint64"),
        ({"seed": torch.tensor([[1]]), "offset": torch.tensor([[0]])}, "must be 1D"),
        ({"seed": 1 << 64, "offset": 0}, "does not fit in 64 bits"),
        ({"seed": 1, "offset": 0, "seed_offset_indexing": "row0"}, "seed_offset_indexing"),
    ],
)
def test_bad_arguments_raise_a_typed_value_error(kwargs: dict, message: str) -> None:
    with pytest.raises(SamplingInputError, match=message) as info:
        sampling.sampling_from_probs(probs(), **kwargs)
    assert isinstance(info.value, ValueError) and isinstance(info.value, InputError)


def test_other_bad_inputs() -> None:
    with pytest.raises(SamplingInputError, match="filter_apply_order"):
        sampling.top_k_top_p_sampling_from_probs(
            probs(), 3, 0.5, filter_apply_order="x", seed=1, offset=0
        )
    with pytest.raises(SamplingInputError, match="NaN"):
        bad = probs()
        bad[0, 0] = float("nan")
        sampling.sampling_from_probs(bad, check_nan=True, seed=1, offset=0)
    with pytest.raises(SamplingInputError, match="2D"):
        sampling.sampling_from_probs(probs()[0], seed=1, offset=0)
    with pytest.raises(SamplingInputError, match="target_probs must have shape"):
        p = probs(4, 8).reshape(2, 2, 8)
        sampling.chain_speculative_sampling(
            p, torch.zeros(2, 2, dtype=torch.int64), p, seed=1, offset=0
        )


def test_invalid_rows_are_reported_not_raised() -> None:
    p = probs(3, 16)
    p[1] = 0.0
    tokens, valid = sampling.top_p_sampling_from_probs(p, 0.5, seed=1, offset=0, return_valid=True)
    assert valid.tolist() == [True, False, True] and int(tokens[1]) == 0


def test_top_k_first_matches_joint_free_composition() -> None:
    """top_k_first = top-k renormalisation, then the top-p kernel on the result."""
    p = probs(4, 50, seed=2)
    k = 7
    tokens = sampling.top_k_top_p_sampling_from_probs(p, k, 0.6, seed=5, offset=1)
    threshold = p.sort(dim=1, descending=True).values[:, k - 1 : k]
    kept = torch.where(p >= threshold, p, 0.0)
    renormed = kept / kept.sum(dim=1, keepdim=True)
    assert torch.equal(tokens, sampling.top_p_sampling_from_probs(renormed, 0.6, seed=5, offset=1))


def test_top_k_first_fast_path_for_large_vocabularies() -> None:
    """Vocab >= 65536 and k <= 256: top-p over the k largest values in descending order."""
    vocab, k = 65536, 5
    p = torch.zeros(1, vocab)
    p[0, [1003, 1001, 1004, 1000, 1002]] = torch.tensor([5.0, 4.0, 3.0, 2.0, 1.0]) / 32
    p[0, 2000:2034] = 0.5 / 32
    tokens, draws = sampling.top_k_top_p_sampling_from_probs(
        p, k, 1.0, seed=3, offset=0, return_draws=True
    )
    # Descending order 1003, 1001, 1004, 1000, 1002 with mass 5, 4, 3, 2, 1 (of 15).
    u = float(philox_uniforms(3, 0, 0, 1)[0]) * 15
    expected = [1003, 1001, 1004, 1000, 1002][sum(c <= u for c in (5, 9, 12, 14))]
    assert int(tokens[0]) == expected
    assert draws.tolist() == [1]  # top_p = 1 accepts in the first round
