"""Argument handling shared by the CPU samplers: flashinfer's conventions, checked once.

flashinfer's wrappers cast probabilities to float32, map output rows to probability rows
through ``indices``, read per-row thresholds by probability row (``top_k_arr[row_idx]``), return
int32 tokens (or ``indices.dtype``), and append ``valid`` when asked. specseed adds the draws
each row consumed as the last element when ``return_draws`` is set.
"""

from __future__ import annotations

import torch

from specseed.sampling.streams import SamplingInputError

__all__ = ["ProbsRows", "pack_result", "per_row_param", "prepare_probs"]

SamplerResult = torch.Tensor | tuple[torch.Tensor, ...]


class ProbsRows:
    """The probability row each output row reads, and the output dtype."""

    def __init__(self, probs: torch.Tensor, indices: torch.Tensor | None):
        self.probs = probs
        self.indices = indices
        self.out_dtype = indices.dtype if indices is not None else torch.int32
        self.batch_size = int(indices.shape[0]) if indices is not None else int(probs.shape[0])

    def rows(self) -> torch.Tensor:
        """(batch_size, vocab) float32: the row each output row samples from."""
        if self.indices is None:
            return self.probs
        return self.probs.index_select(0, self.indices.to(torch.int64))

    def gather_param(self, values: torch.Tensor) -> torch.Tensor:
        """A per-probability-row parameter, read by output row as the kernels do (row_idx)."""
        if self.indices is None:
            return values[: self.batch_size]
        return values.index_select(0, self.indices.to(torch.int64))


def prepare_probs(
    probs: torch.Tensor, indices: torch.Tensor | None, check_nan: bool = False
) -> ProbsRows:
    """Validate ``probs`` (2-D, CPU) and ``indices``; cast to float32 as flashinfer does."""
    if not isinstance(probs, torch.Tensor) or probs.ndim != 2:
        raise SamplingInputError("probs must be a 2D tensor (batch_size, vocab_size)")
    if probs.device.type != "cpu":
        raise SamplingInputError(
            "the specseed samplers run on the CPU; use flashinfer itself for CUDA tensors"
        )
    if check_nan and bool(torch.isnan(probs).any()):
        raise SamplingInputError("Input probs contains NaN.")
    if indices is not None:
        if indices.ndim != 1 or indices.dtype not in (torch.int32, torch.int64):
            raise SamplingInputError("indices must be a 1D int32 or int64 tensor")
        if indices.numel() and (int(indices.min()) < 0 or int(indices.max()) >= probs.shape[0]):
            raise SamplingInputError("indices must be in [0, probs.size(0))")
    return ProbsRows(probs.float().contiguous(), indices)


def per_row_param(
    value: torch.Tensor | float | int, rows: ProbsRows, dtype: torch.dtype, name: str
) -> torch.Tensor:
    """A scalar or per-probability-row threshold, as one value per output row."""
    if isinstance(value, torch.Tensor):
        flat = value.reshape(-1).to(dtype)
        needed = rows.probs.shape[0] if rows.indices is not None else rows.batch_size
        if flat.shape[0] < needed:
            raise SamplingInputError(
                f"{name} tensor has {flat.shape[0]} entries; the kernel reads {needed}"
            )
        return rows.gather_param(flat)
    return torch.full((rows.batch_size,), value, dtype=dtype)


def pack_result(
    samples: torch.Tensor,
    valid: torch.Tensor | None,
    draws: torch.Tensor,
    out_dtype: torch.dtype,
    return_draws: bool,
) -> SamplerResult:
    """``samples``, then ``valid`` if requested, then ``draws`` if requested."""
    parts = [samples.to(out_dtype)]
    if valid is not None:
        parts.append(valid)
    if return_draws:
        parts.append(draws)
    return parts[0] if len(parts) == 1 else tuple(parts)
