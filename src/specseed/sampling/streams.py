"""Per-row Philox streams of one sampling call, resolved the way flashinfer's kernels do it.

A flashinfer sampling kernel runs one CUDA block per output row ``bx`` and calls
``curand_init(seed_arr[bx * seed_stride], bx, offset_arr[bx * offset_stride])`` (or the scalar
seed/offset): the subsequence is the output row index. ``RowStreams`` holds those three
numbers per row, hands out ``curand_uniform`` draws in order (the rejection kernels need a
data-dependent number of them) and counts how many each row consumed.
"""

from __future__ import annotations

from typing import Literal

import torch

from specseed.core.errors import InputError
from specseed.rng.philox import StreamParam, as_int64_bits, philox_uniforms

__all__ = ["RowStreams", "SamplingInputError", "SeedOffsetIndexing", "resolve_row_streams"]

SeedOffsetIndexing = Literal["per_row", "element0"]
"""``per_row``: flashinfer >= 0.7.2 (stride 1 for per-row tensors). ``element0``: flashinfer
0.6.4 .. 0.7.1, whose kernels read only element 0 of the seed and offset tensors."""

# Draws fetched per row up front; one Philox block when the offset is a multiple of 4.
_PREFETCH = 4


class SamplingInputError(InputError, ValueError):
    """Bad arguments to a CPU sampler. A ``ValueError`` too, as flashinfer raises for these."""


class RowStreams:
    """The Philox streams of the output rows of one kernel launch, read in draw order.

    ``uniforms(draw_index, rows)`` returns the ``draw_index``-th ``curand_uniform`` of each
    listed row (a kernel's first draw is index 0) and records that the row consumed it.
    """

    def __init__(
        self,
        seed: torch.Tensor,
        subsequence: torch.Tensor,
        offset: torch.Tensor,
        prefetch: int = _PREFETCH,
    ):
        self.seed = seed
        self.prefetch = prefetch
        self.subsequence = subsequence
        self.offset = offset
        self.draws = torch.zeros(seed.shape[0], dtype=torch.int64)
        self._cache = torch.empty(seed.shape[0], 0, dtype=torch.float32)

    @property
    def num_rows(self) -> int:
        return int(self.seed.shape[0])

    def _ensure(self, count: int) -> None:
        have = self._cache.shape[1]
        if count <= have:
            return
        want = max(count, 2 * have, self.prefetch)
        more = philox_uniforms(self.seed, self.subsequence, self.offset, want - have, skip=have)
        self._cache = torch.cat((self._cache, more), dim=1)

    def first(self, count: int) -> torch.Tensor:
        """Draws ``0 .. count-1`` of every row, (rows, count); nothing is marked consumed."""
        self._ensure(count)
        return self._cache[:, :count]

    def uniforms(self, draw_index: int, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Draw ``draw_index`` of each row in ``rows`` (all rows if None), marked consumed."""
        self._ensure(draw_index + 1)
        if rows is None:
            self.draws.clamp_(min=draw_index + 1)
            return self._cache[:, draw_index]
        self.draws[rows] = torch.clamp(self.draws[rows], min=draw_index + 1)
        return self._cache[rows, draw_index]

    def consume(self, counts: torch.Tensor) -> None:
        """Record per-row draw counts decided after the fact (e.g. chain speculative sampling)."""
        self.draws = torch.maximum(self.draws, counts.to(torch.int64))


def _rng_tensor(
    value: torch.Tensor, name: str, batch_size: int, indexing: SeedOffsetIndexing
) -> torch.Tensor:
    """Validate a seed/offset tensor as flashinfer does and expand it to one entry per row."""
    if value.dtype == torch.uint64:
        value = value.view(torch.int64)
    if value.dtype != torch.int64:
        raise SamplingInputError(f"{name} tensor must be int64/uint64")
    if value.ndim != 1:
        raise SamplingInputError(f"{name} tensor must be 1D")
    if value.device.type != "cpu":
        raise SamplingInputError(f"{name} tensor must be on cpu")
    if value.shape[0] not in (1, batch_size):
        raise SamplingInputError(f"{name} tensor length must be 1 or {batch_size}")
    if indexing == "element0" or value.shape[0] == 1:
        return value[:1].expand(batch_size).clone()
    return value.clone()


def _rng_scalar(value: int, name: str, batch_size: int) -> torch.Tensor:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SamplingInputError(f"{name} must be an int or a 1D int64 tensor")
    try:
        bits = as_int64_bits(value)
    except ValueError as exc:
        raise SamplingInputError(f"{name}: {exc}") from None
    return torch.full((batch_size,), bits, dtype=torch.int64)


def resolve_row_streams(
    batch_size: int,
    seed: StreamParam | None,
    offset: StreamParam | None,
    subsequence: torch.Tensor | int | None,
    seed_offset_indexing: SeedOffsetIndexing,
    generator: object | None = None,
    *,
    prefetch: int = _PREFETCH,
) -> RowStreams:
    """Per-row ``(seed, subsequence, offset)`` of a launch with ``batch_size`` output rows;
    ``prefetch``: draws computed per row at the first fetch (1 for a kernel that takes one
    draw per row: at an offset that is not a multiple of 4, four draws cost two Philox blocks
    where one costs one)."""
    if seed_offset_indexing not in ("per_row", "element0"):
        raise SamplingInputError(
            f"seed_offset_indexing must be 'per_row' or 'element0', got {seed_offset_indexing!r}"
        )
    if seed is None or offset is None:
        # flashinfer would take (seed, offset) from the CUDA generator's Philox state; a CPU
        # generator has no such state, so silently inventing one would hide a missing seed.
        raise SamplingInputError(
            "the CPU samplers need explicit seed and offset (generator-based sampling "
            f"is not emulated; generator={generator!r})"
        )
    if isinstance(seed, torch.Tensor) != isinstance(offset, torch.Tensor):
        raise SamplingInputError("seed and offset must both be tensors or both be scalars")
    if isinstance(seed, torch.Tensor):
        assert isinstance(offset, torch.Tensor)
        seed_rows = _rng_tensor(seed, "seed", batch_size, seed_offset_indexing)
        offset_rows = _rng_tensor(offset, "offset", batch_size, seed_offset_indexing)
    else:
        assert not isinstance(offset, torch.Tensor)
        seed_rows = _rng_scalar(seed, "seed", batch_size)
        offset_rows = _rng_scalar(offset, "offset", batch_size)
    if subsequence is None:
        subseq_rows = torch.arange(batch_size, dtype=torch.int64)
    elif isinstance(subsequence, torch.Tensor):
        if subsequence.dtype == torch.uint64:
            subsequence = subsequence.view(torch.int64)
        if subsequence.dtype not in (torch.int64, torch.int32) or subsequence.ndim != 1:
            raise SamplingInputError("subsequence must be a 1D int64 tensor")
        if subsequence.shape[0] not in (1, batch_size):
            raise SamplingInputError(f"subsequence tensor length must be 1 or {batch_size}")
        subseq_rows = subsequence.to(torch.int64).cpu().expand(batch_size).clone()
    else:
        subseq_rows = _rng_scalar(subsequence, "subsequence", batch_size)
    return RowStreams(seed_rows, subseq_rows, offset_rows, prefetch)
