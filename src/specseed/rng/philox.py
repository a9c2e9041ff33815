"""Philox4x32-10 with curand's ``(seed, subsequence, offset)`` stream semantics, in pure torch.

curand names a stream by three uint64 numbers (``curand_init(seed, subsequence, offset, &s)``):
the key is the seed's two 32-bit halves, the 128-bit block counter starts at
``subsequence * 2**64 + offset // 4`` and the first word returned is lane ``offset % 4`` of that
block; every fourth word the counter is incremented with a full 128-bit carry. Equivalently, the
``j``-th word of a stream is lane ``p % 4`` of the block at counter ``p // 4 (mod 2**128)``, where
``p = subsequence * 2**66 + offset + j``. That position model is what this module computes,
vectorised over any number of states.

Everything is done in int64 tensors that hold uint32 values (0 .. 2**32 - 1). A 32x32-bit
product does not fit in a signed 64-bit integer, so each multiplier is split into two 16-bit
halves and the 48-bit partial products are recombined (see ``_mulhilo``). Seeds, subsequences and
offsets arrive as Python ints or as int64 tensors holding uint64 bit patterns, so a negative
int64 seed names the same stream as its uint64 reinterpretation. Calls that need only a few
blocks (a sampler's batch of one) run the same rounds on Python integers instead, which avoids
the per-op dispatch cost of ~150 tiny torch ops.
"""

from __future__ import annotations

import functools

import torch

__all__ = [
    "PHILOX_M0",
    "PHILOX_M1",
    "PHILOX_W0",
    "PHILOX_W1",
    "UINT64_MAX",
    "StreamParam",
    "as_int64_bits",
    "as_uint64",
    "curand_uniform",
    "philox4x32_10",
    "philox_uniforms",
    "philox_words",
    "words_at_position",
]

PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
ROUNDS = 10

UINT64_MAX = (1 << 64) - 1
_MASK32 = 0xFFFFFFFF
_INT64_MIN = -(1 << 63)

# Multipliers split into 16-bit halves, one entry per multiplied counter word (ctr.x, ctr.z).
_M_HIGH = torch.tensor([[PHILOX_M0 >> 16], [PHILOX_M1 >> 16]], dtype=torch.int64)
_M_LOW = torch.tensor([[PHILOX_M0 & 0xFFFF], [PHILOX_M1 & 0xFFFF]], dtype=torch.int64)
_ROUND_BUMPS = torch.tensor(
    [[[r * PHILOX_W0 & _MASK32], [r * PHILOX_W1 & _MASK32]] for r in range(ROUNDS)],
    dtype=torch.int64,
)  # (ROUNDS, 2, 1): key schedule offsets, added mod 2**32 to (key.x, key.y)

# Large calls run in pieces of this many blocks (see _philox_rounds).
_CHUNK_BLOCKS = 1 << 14
# Below this many blocks a call is cheaper in Python integers: a torch op costs microseconds of
# dispatch and a block needs about 150 of them, while the integer loop takes ~8 us per block.
_PYTHON_PATH_MAX_BLOCKS = 32

# curand_uniform: (float)x * 2**-32 + 2**-33. The multiply by a power of two is exact, so
# rounding happens in the int->float conversion and once in the add (with or without FMA).
_TWO_POW_M32 = 2.0**-32
_TWO_POW_M33 = 2.0**-33

StreamParam = int | torch.Tensor
"""A seed, subsequence or offset: a Python int or an int64 tensor of uint64 bit patterns."""


def as_uint64(x: int) -> int:
    """Return ``x`` as a uint64 value; a negative int64 maps to its two's-complement bits.

    Raises ``ValueError`` outside ``[-2**63, 2**64 - 1]``.
    """
    x = int(x)
    if not _INT64_MIN <= x <= UINT64_MAX:
        raise ValueError(f"{x} does not fit in 64 bits (allowed: -2**63 .. 2**64-1)")
    return x & UINT64_MAX


def as_int64_bits(x: int) -> int:
    """Return the int64 whose bit pattern equals ``x`` read as uint64 (the inverse view).

    Raises ``ValueError`` outside ``[-2**63, 2**64 - 1]``.
    """
    u = as_uint64(x)
    return u - (1 << 64) if u >> 63 else u


def _as_bits_tensor(x: StreamParam, name: str) -> torch.Tensor:
    """An int64 CPU tensor holding the uint64 bit pattern(s) of ``x``."""
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.uint64:
            x = x.view(torch.int64)
        if x.dtype != torch.int64:
            raise TypeError(f"{name} tensor must be int64 (uint64 bit patterns), got {x.dtype}")
        return x.cpu()
    if isinstance(x, bool) or not isinstance(x, int):
        raise TypeError(f"{name} must be an int or an int64 tensor, got {type(x).__name__}")
    try:
        return torch.tensor(as_int64_bits(x), dtype=torch.int64)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _lo32(x: torch.Tensor) -> torch.Tensor:
    return x & _MASK32


def _hi32(x: torch.Tensor) -> torch.Tensor:
    # Arithmetic shift of a negative int64 copies the sign bit; masking keeps the true bits.
    return (x >> 32) & _MASK32


def _mulhilo(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(hi, lo)`` of ``M * x`` for the two Philox multipliers, rows of ``x`` = (ctr.x, ctr.z).

    ``M * x`` needs 64 unsigned bits, so it is built from two 48-bit partials that int64 holds:
    ``M * x = a * 2**16 + b`` with ``a = (M >> 16) * x`` and ``b = (M & 0xFFFF) * x``.
    """
    a = x * _M_HIGH
    b = x * _M_LOW
    t = b + ((a & 0xFFFF) << 16)
    lo = t & _MASK32
    hi = (a >> 16) + (t >> 32)
    return hi, lo


def _philox_rounds(ctr: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Ten Philox rounds on ``ctr`` (4, N) with ``key`` (2, N) or (2, 1); returns (4, N)."""
    width = ctr.shape[1]
    if width > _CHUNK_BLOCKS:
        # Cache-sized pieces: every round allocates a dozen temporaries of the input's size.
        return torch.cat(
            [
                _philox_rounds(
                    ctr[:, i : i + _CHUNK_BLOCKS],
                    key if key.shape[1] == 1 else key[:, i : i + _CHUNK_BLOCKS],
                )
                for i in range(0, width, _CHUNK_BLOCKS)
            ],
            dim=1,
        )
    keys = (key.unsqueeze(0) + _ROUND_BUMPS) & _MASK32  # (ROUNDS, 2, N)
    x = ctr
    for r in range(ROUNDS):
        hi, lo = _mulhilo(x[0::2])  # products of ctr.x (by M0) and ctr.z (by M1)
        # new ctr = (hi1 ^ ctr.y ^ k.x, lo1, hi0 ^ ctr.w ^ k.y, lo0)
        mixed = hi.flip(0) ^ x[1::2] ^ keys[r]
        x = torch.stack((mixed, lo.flip(0)), dim=1).reshape(4, -1)
    return x


def philox4x32_10(counter: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """The raw Philox4x32-10 block function (Random123's ``philox4x32``, 10 rounds).

    ``counter`` is (..., 4) and ``key`` (..., 2), int64 tensors of uint32 values, word 0 first
    (curand's ``ctr.x, ctr.y, ctr.z, ctr.w`` and ``key.x, key.y``). Returns (..., 4) int64.
    """
    counter = torch.as_tensor(counter, dtype=torch.int64)
    key = torch.as_tensor(key, dtype=torch.int64)
    if counter.shape[-1:] != (4,) or key.shape[-1:] != (2,):
        raise ValueError("counter must have last dimension 4 and key last dimension 2")
    shape = _broadcast_shape(counter.shape[:-1], key.shape[:-1])
    ctr = counter.expand(*shape, 4).reshape(-1, 4).T.contiguous() & _MASK32
    k = key.expand(*shape, 2).reshape(-1, 2).T.contiguous() & _MASK32
    return _philox_rounds(ctr, k).T.reshape(*shape, 4)


def _stream_blocks(
    key: torch.Tensor, counter: torch.Tensor, lane: torch.Tensor | int, n: int
) -> torch.Tensor:
    """Words ``0 .. n-1`` of streams whose first word is lane ``lane`` of block ``counter``.

    ``key`` (2, S), ``counter`` (4, S) hold uint32 limbs (word 0 = least significant);
    ``lane`` is an int or an (S,) tensor in 0..3. Returns (S, n).
    """
    num_states = counter.shape[1]
    uniform_lane = isinstance(lane, int)
    first_lane = lane if isinstance(lane, int) else 3
    num_blocks = (first_lane + n + 3) // 4
    # Counter of every block: counter + b for b < num_blocks, with carries through all limbs.
    steps = torch.arange(num_blocks, dtype=torch.int64)
    limbs = []
    carry: torch.Tensor = steps.unsqueeze(0)
    for w in range(4):
        total = counter[w].unsqueeze(1) + carry
        limbs.append(total & _MASK32)
        carry = total >> 32
    blocks = torch.stack(limbs).reshape(4, -1)  # (4, S * num_blocks)
    block_keys = key.repeat_interleave(num_blocks, dim=1) if num_blocks > 1 else key
    out = _philox_rounds(blocks, block_keys)  # (4, S * num_blocks)
    words = out.T.reshape(num_states, num_blocks * 4)
    if uniform_lane:
        return words[:, first_lane : first_lane + n]
    assert isinstance(lane, torch.Tensor)
    cols = lane.unsqueeze(1) + torch.arange(n, dtype=torch.int64)
    return words.gather(1, cols)


def _stream_coordinates(
    seed_t: torch.Tensor, subseq_t: torch.Tensor, offset_t: torch.Tensor, skip: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | int]:
    """Flat (S,) parameters -> (key (2,S), counter of the first block (4,S), lane)."""
    key = torch.stack((_lo32(seed_t), _hi32(seed_t)))
    # Word position within the high-64-bit block range: offset + skip; its block part is
    # (offset >> 2) + ((offset & 3) + skip) >> 2, its lane ((offset & 3) + skip) & 3.
    lane_sum = (offset_t & 3) + skip
    block_low = ((offset_t >> 2) & 0x3FFFFFFFFFFFFFFF) + (lane_sum >> 2)  # < 2**63: no overflow
    lanes = lane_sum & 3
    counter_low = torch.stack((_lo32(block_low), _hi32(block_low)))
    counter = torch.cat((counter_low, torch.stack((_lo32(subseq_t), _hi32(subseq_t)))))
    # A single lane for every state (the common case) lets the caller slice instead of gather.
    lane: torch.Tensor | int = lanes
    if lanes.numel() == 0:
        lane = 0
    elif bool((lanes == lanes[0]).all()):
        lane = int(lanes[0])
    return key, counter, lane


@functools.lru_cache(maxsize=4096)
def _key_schedule(seed: int) -> tuple[tuple[int, int], ...]:
    """The round keys of a uint64 key: (k0, k1) of each of the ROUNDS rounds. A request's
    draws share its seed, so the schedule is made once per seed, not once per block."""
    k0, k1 = seed & _MASK32, seed >> 32
    keys = []
    for _ in range(ROUNDS):
        keys.append((k0, k1))
        k0, k1 = (k0 + PHILOX_W0) & _MASK32, (k1 + PHILOX_W1) & _MASK32
    return tuple(keys)


def _block_python(counter: int, seed: int) -> tuple[int, int, int, int]:
    """One Philox4x32-10 block in Python integers (no overflow to work around)."""
    c0, c1, c2, c3 = (
        counter & _MASK32,
        counter >> 32 & _MASK32,
        counter >> 64 & _MASK32,
        counter >> 96 & _MASK32,
    )
    for k0, k1 in _key_schedule(seed):
        p0, p1 = PHILOX_M0 * c0, PHILOX_M1 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & _MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & _MASK32
    return c0, c1, c2, c3


def _words_python(seed: int, position: int, n: int) -> list[int]:
    """``n`` words of key ``seed`` (uint64) from word ``position`` (taken mod 2**130)."""
    words: list[int] = []
    block_index, block = -1, (0, 0, 0, 0)
    for j in range(n):
        p = (position + j) & ((1 << 130) - 1)
        if p >> 2 != block_index:
            block_index = p >> 2
            block = _block_python(block_index, seed)
        words.append(block[p & 3])
    return words


def philox_words(
    seed: StreamParam,
    subsequence: StreamParam,
    offset: StreamParam,
    n: int,
    *,
    skip: int = 0,
) -> torch.Tensor:
    """The 32-bit words ``curand()`` returns after ``curand_init(seed, subsequence, offset)``.

    ``seed``, ``subsequence`` and ``offset`` are Python ints or int64 tensors of uint64 bit
    patterns; they broadcast together. ``skip`` starts ``skip`` words further into each stream
    (the draws a kernel already consumed). Returns an int64 tensor of uint32 values with shape
    ``broadcast(seed, subsequence, offset) + (n,)``.
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    if not 0 <= skip <= (1 << 62):
        raise ValueError("skip must be in 0 .. 2**62")
    seed_t = _as_bits_tensor(seed, "seed")
    subseq_t = _as_bits_tensor(subsequence, "subsequence")
    offset_t = _as_bits_tensor(offset, "offset")
    shape = _broadcast_shape(seed_t.shape, subseq_t.shape, offset_t.shape)
    seed_t, subseq_t, offset_t = (t.expand(shape).reshape(-1) for t in (seed_t, subseq_t, offset_t))
    num_states = seed_t.shape[0]
    if n == 0 or num_states == 0:
        return torch.zeros(*shape, n, dtype=torch.int64)
    if num_states * ((n + 6) // 4) <= _PYTHON_PATH_MAX_BLOCKS:
        rows = [
            _words_python(s & UINT64_MAX, ((q & UINT64_MAX) << 66) + (o & UINT64_MAX) + skip, n)
            for s, q, o in zip(seed_t.tolist(), subseq_t.tolist(), offset_t.tolist(), strict=True)
        ]
        return torch.tensor(rows, dtype=torch.int64).reshape(*shape, n)
    key, counter, lane = _stream_coordinates(seed_t, subseq_t, offset_t, skip)
    return _stream_blocks(key, counter, lane, n).reshape(*shape, n)


def _broadcast_shape(*shapes: tuple[int, ...] | torch.Size) -> tuple[int, ...]:
    """``torch.broadcast_shapes`` without its cost: that function imports torch's symbolic
    shapes and sympy on first use (measured: 1.5 s of an audit's start on the 2-core machine,
    4 s under load)."""
    ndim = max((len(shape) for shape in shapes), default=0)
    result = [1] * ndim
    for shape in shapes:
        for axis, size in enumerate(shape, start=ndim - len(shape)):
            if size != 1:
                if result[axis] not in (1, size):
                    raise ValueError(f"shapes {[tuple(s) for s in shapes]} do not broadcast")
                result[axis] = size
    return tuple(result)


def curand_uniform(words: torch.Tensor) -> torch.Tensor:
    """curand's uint32 -> float32 map: ``(float)x * 2**-32 + 2**-33``, in (0, 1]."""
    return words.to(torch.float32) * _TWO_POW_M32 + _TWO_POW_M33


def philox_uniforms(
    seed: StreamParam,
    subsequence: StreamParam,
    offset: StreamParam,
    n: int,
    *,
    skip: int = 0,
) -> torch.Tensor:
    """``curand_uniform`` draws of the stream; float32 with the shape of ``philox_words``."""
    return curand_uniform(philox_words(seed, subsequence, offset, n, skip=skip))


def words_at_position(seed: int, position: int, n: int) -> torch.Tensor:
    """``n`` words of key ``seed`` starting at a raw word position (Python ints).

    ``position`` is the stream position in words, ``subsequence * 2**66 + offset + skip``
    taken mod 2**130, so tests can reach counter values (for example a low 64-bit half of
    all ones, which then carries into the high half) that ``curand_init`` alone cannot.
    """
    seed_u = as_uint64(seed)
    position %= 1 << 130
    block = position >> 2
    key = torch.tensor([[seed_u & _MASK32], [seed_u >> 32]], dtype=torch.int64)
    counter = torch.tensor([[(block >> (32 * w)) & _MASK32] for w in range(4)], dtype=torch.int64)
    return _stream_blocks(key, counter, position & 3, n)[0]
