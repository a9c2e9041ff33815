"""Philox4x32-10 and curand stream semantics: public known answers, carries, reinterpretation.

The comparison against curand itself (recorded on an H200) is in test_curand_groundtruth.py.
"""

from __future__ import annotations

import struct

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specseed.rng import (
    as_int64_bits,
    as_uint64,
    curand_uniform,
    philox4x32_10,
    philox_uniforms,
    philox_words,
    stream_draws,
    words_at_position,
)

U64 = (1 << 64) - 1

# Random123's kat_vectors, "philox4x32 10" lines: counter[4] key[2] -> output[4].
RANDOM123_KAT = [
    ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    (
        [0xFFFFFFFF] * 4,
        [0xFFFFFFFF] * 2,
        [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD],
    ),
    (
        [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
        [0xA4093822, 0x299F31D0],
        [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1],
    ),
]


@pytest.mark.parametrize(("counter", "key", "expected"), RANDOM123_KAT)
def test_random123_known_answers(counter: list[int], key: list[int], expected: list[int]) -> None:
    out = philox4x32_10(torch.tensor(counter), torch.tensor(key))
    assert out.tolist() == expected


def test_block_function_is_vectorised_elementwise() -> None:
    counters = torch.tensor([c for c, _, _ in RANDOM123_KAT])
    keys = torch.tensor([k for _, k, _ in RANDOM123_KAT])
    assert philox4x32_10(counters, keys).tolist() == [e for _, _, e in RANDOM123_KAT]


def test_stream_at_zero_is_the_zero_block() -> None:
    # curand_init(0, 0, 0): key 0, counter 0, lanes in order.
    assert philox_words(0, 0, 0, 4).tolist() == RANDOM123_KAT[0][2]


def _block(seed: int, counter: int) -> list[int]:
    key = torch.tensor([seed & 0xFFFFFFFF, seed >> 32])
    ctr = torch.tensor([(counter >> (32 * w)) & 0xFFFFFFFF for w in range(4)])
    return philox4x32_10(ctr, key).tolist()


@pytest.mark.parametrize(
    ("seed", "subsequence", "offset"),
    [
        (42, 0, 0),
        (42, 3, 13),
        (U64, U64, U64),  # counter high half all ones, low half 2**62 - 1, lane 3
        (1 << 63, 1 << 32, (1 << 34) - 2),  # the low counter word about to carry
        (0xDEADBEEF, 7, (1 << 62) + 1),
    ],
)
def test_words_follow_curand_counter_layout(seed: int, subsequence: int, offset: int) -> None:
    """Word j is lane (offset + j) % 4 of block subsequence * 2**64 + (offset + j) // 4."""
    n = 11
    expected = []
    for j in range(n):
        position = offset + j
        block = (subsequence << 64) + (position >> 2)
        expected.append(_block(seed, block % (1 << 128))[position & 3])
    assert philox_words(seed, subsequence, offset, n).tolist() == expected


def test_counter_wraps_at_2_pow_128() -> None:
    # The block after counter 2**128 - 1 is block 0 (curand increments with full carry).
    words = words_at_position(9, (1 << 130) - 4, 8).tolist()
    assert words[:4] == _block(9, (1 << 128) - 1)
    assert words[4:] == _block(9, 0)


def test_low_half_carries_into_high_half() -> None:
    position = ((5 << 64) + (1 << 64) - 1) * 4 + 2  # subsequence 5, low counter all ones, lane 2
    words = words_at_position(3, position, 4).tolist()
    assert words[:2] == _block(3, (5 << 64) + (1 << 64) - 1)[2:]
    assert words[2:] == _block(3, 6 << 64)[:2]


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(-(1 << 63), U64),
    subsequence=st.integers(0, U64),
    offset=st.integers(0, U64 - 64),
    start=st.integers(0, 40),
)
def test_a_later_offset_is_a_suffix_of_the_stream(
    seed: int, subsequence: int, offset: int, start: int
) -> None:
    full = philox_words(seed, subsequence, offset, 48)
    assert torch.equal(philox_words(seed, subsequence, offset + start, 8), full[start : start + 8])
    assert torch.equal(
        philox_words(seed, subsequence, offset, 8, skip=start), full[start : start + 8]
    )


def test_negative_int64_seed_is_its_uint64_reinterpretation() -> None:
    for seed in (-1, -42, -(1 << 63)):
        same = philox_words(as_uint64(seed), 2, 5, 6)
        assert torch.equal(philox_words(seed, 2, 5, 6), same)
        assert torch.equal(philox_words(torch.tensor(seed), 2, 5, 6), same)
    assert not torch.equal(philox_words(1, 0, 0, 4), philox_words(2, 0, 0, 4))


def test_tensor_parameters_broadcast_and_match_scalars() -> None:
    seeds = torch.tensor([as_int64_bits(U64), 7, as_int64_bits(1 << 63)])
    offsets = torch.tensor([[0], [3], [as_int64_bits(U64 - 1)]])
    words = philox_words(seeds, 4, offsets, 5)
    assert words.shape == (3, 3, 5)
    for i, off in enumerate([0, 3, U64 - 1]):
        for j, s in enumerate([U64, 7, 1 << 63]):
            assert torch.equal(words[i, j], philox_words(s, 4, off, 5))


def test_uint64_tensors_are_accepted() -> None:
    seeds = torch.tensor([U64 >> 1, 5], dtype=torch.int64).to(torch.uint64)
    assert torch.equal(
        philox_words(seeds, 0, 0, 3), philox_words(torch.tensor([U64 >> 1, 5]), 0, 0, 3)
    )


@pytest.mark.parametrize("bad", [U64 + 1, -(1 << 63) - 1])
def test_out_of_range_values_are_rejected(bad: int) -> None:
    with pytest.raises(ValueError):
        as_uint64(bad)
    with pytest.raises(ValueError):
        philox_words(bad, 0, 0, 1)


def test_reinterpretation_helpers_round_trip() -> None:
    for v in (0, 1, (1 << 63) - 1, 1 << 63, U64):
        assert as_uint64(as_int64_bits(v)) == v
    assert as_int64_bits(U64) == -1
    assert as_uint64(-1) == U64


def _float32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def test_curand_uniform_rounding_model() -> None:
    """(float)x rounds to nearest; x * 2**-32 is exact; + 2**-33 rounds once."""
    words = [0, 1, 2, 0x7FFFFFFF, 0x80000000, 0xFFFFFF7F, 0xFFFFFF80, 0xFFFFFFFE, 0xFFFFFFFF]
    words += torch.randint(0, 1 << 32, (500,), generator=torch.Generator().manual_seed(1)).tolist()
    got = curand_uniform(torch.tensor(words)).tolist()
    for x, g in zip(words, got, strict=True):
        as_float = struct.unpack("<f", struct.pack("<f", float(x)))[0]  # round to float32
        exact = as_float * 2.0**-32 + 2.0**-33  # exact in double
        assert _float32_bits(g) == _float32_bits(exact), hex(x)
    assert got[8] == 1.0 and got[0] == 2.0**-33  # 0xFFFFFFFF rounds up to exactly 1


def test_uniforms_lie_in_the_half_open_unit_interval() -> None:
    u = philox_uniforms(123, torch.arange(64), 0, 64)
    assert u.dtype == torch.float32
    assert bool((u > 0).all()) and bool((u <= 1).all())


def test_stream_draws_lists_counter_and_lane() -> None:
    draws = stream_draws(-1, 3, 14, 3)
    assert [d.offset for d in draws] == [14, 15, 16]
    assert [d.lane for d in draws] == [2, 3, 0]
    assert draws[0].counter == (3 << 64) + 3 and draws[2].counter == (3 << 64) + 4
    assert [d.word for d in draws] == philox_words(U64, 3, 14, 3).tolist()


def test_large_batches_equal_small_ones() -> None:
    """Big calls are computed in chunks of Philox blocks; the chunk seams must not show."""
    subsequences = torch.arange(20_000)
    whole = philox_words(5, subsequences, 3, 9)  # 3 blocks per state: several chunks
    pieces = torch.cat(
        [philox_words(5, subsequences[i : i + 2000], 3, 9) for i in range(0, 20_000, 2000)]
    )
    assert torch.equal(whole, pieces)
