"""The one-draw kernels: ``sampling_from_probs`` and ``min_p_sampling_from_probs``.

Both take exactly one ``curand_uniform`` per output row (draw 0 of the row's stream):
``sampling_from_probs`` compares it with the running sum of the positive probabilities;
``min_p`` first keeps the tokens with ``p >= max(p) * min_p`` and scales the draw by their mass.
"""

from __future__ import annotations

import torch

from specseed.rng.philox import StreamParam
from specseed.sampling.args import SamplerResult, pack_result, per_row_param, prepare_probs
from specseed.sampling.inverse_cdf import sample_masked
from specseed.sampling.streams import SeedOffsetIndexing, resolve_row_streams

__all__ = ["min_p_sampling_from_probs", "sampling_from_probs"]


def sampling_from_probs(
    probs: torch.Tensor,
    indices: torch.Tensor | None = None,
    deterministic: bool = True,
    generator: torch.Generator | None = None,
    check_nan: bool = False,
    seed: StreamParam | None = None,
    offset: StreamParam | None = None,
    return_valid: bool = False,
    *,
    return_draws: bool = False,
    subsequence: torch.Tensor | None = None,
    seed_offset_indexing: SeedOffsetIndexing = "per_row",
) -> SamplerResult:
    """CPU twin of ``flashinfer.sampling.sampling_from_probs`` (0.7.4). Draws per row: 1.

    Returns the sampled tokens (int32, or ``indices.dtype``), then ``valid`` if
    ``return_valid``, then the draws per row (int64) if ``return_draws``. ``deterministic``
    is accepted and ignored (the CPU result does not depend on it).
    """
    rows = prepare_probs(probs, indices, check_nan)
    streams = resolve_row_streams(
        rows.batch_size, seed, offset, subsequence, seed_offset_indexing, generator, prefetch=1
    )
    p = rows.rows()
    u = streams.uniforms(0)
    token, valid = sample_masked(p, p > 0, u)
    return pack_result(
        token, valid if return_valid else None, streams.draws, rows.out_dtype, return_draws
    )


def min_p_sampling_from_probs(
    probs: torch.Tensor,
    min_p: torch.Tensor | float,
    indices: torch.Tensor | None = None,
    deterministic: bool = True,
    generator: torch.Generator | None = None,
    check_nan: bool = False,
    seed: StreamParam | None = None,
    offset: StreamParam | None = None,
    return_valid: bool = False,
    *,
    return_draws: bool = False,
    subsequence: torch.Tensor | None = None,
    seed_offset_indexing: SeedOffsetIndexing = "per_row",
) -> SamplerResult:
    """CPU twin of ``flashinfer.sampling.min_p_sampling_from_probs`` (0.7.4). Draws per row: 1.

    The kernel keeps tokens with ``p >= max(0, max(p)) * min_p`` (float32 product), scales the
    row's draw by their total mass and scans them in index order.
    """
    rows = prepare_probs(probs, indices, check_nan)
    streams = resolve_row_streams(
        rows.batch_size, seed, offset, subsequence, seed_offset_indexing, generator, prefetch=1
    )
    p = rows.rows()
    min_p_rows = per_row_param(min_p, rows, torch.float32, "min_p")
    # The kernel's block max starts from 0, so an all-negative row still gets pivot 0 * min_p.
    max_val = p.amax(dim=1).clamp(min=0.0) if p.shape[1] else torch.zeros(p.shape[0])
    pivot = max_val * min_p_rows
    keep = p >= pivot.unsqueeze(1)
    mass = torch.where(keep, p, 0.0).sum(dim=1)
    u = streams.uniforms(0) * mass
    token, valid = sample_masked(p, keep, u)
    return pack_result(
        token, valid if return_valid else None, streams.draws, rows.out_dtype, return_draws
    )
