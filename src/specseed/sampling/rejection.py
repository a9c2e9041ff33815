"""The rejection-sampling kernels: top-k, top-p and joint top-k/top-p, one draw per round.

flashinfer samples top-k / top-p without sorting. Each round draws ``u = curand_uniform * q``,
picks the first token above ``low`` whose running sum exceeds ``u`` (the last one above ``low``
if rounding leaves ``u`` beyond the total), and tests two pivots: ``pivot_0`` = that token's
probability and ``pivot_1 = (pivot_0 + high) * 0.5``. If the tokens strictly above ``pivot_0``
pass the filter (fewer than k of them / mass below top_p / both), the token is accepted.
Otherwise the search range narrows (``low, high, q = pivot_0, pivot_1, mass above pivot_0`` if
the ``pivot_1`` set passes, else ``low, q = pivot_1, mass above pivot_1``) and the next round
draws again, until a token is accepted or ``low >= high``, which keeps the last round's token.

Rows finish after different numbers of rounds; the loop below runs all unfinished rows of a
round together and records, per row, how many draws (rounds) it consumed. On the H200 flashinfer
0.7.4 runs large vocabularies through a split-row (thread-block cluster) variant with the same
rounds, draws, pivots and accept rules; only its summation order differs, which cannot matter
where the sums are exact.
"""

from __future__ import annotations

import torch

from specseed.rng.philox import StreamParam
from specseed.sampling.args import (
    ProbsRows,
    SamplerResult,
    pack_result,
    per_row_param,
    prepare_probs,
)
from specseed.sampling.inverse_cdf import sample_masked
from specseed.sampling.streams import (
    RowStreams,
    SamplingInputError,
    SeedOffsetIndexing,
    resolve_row_streams,
)

__all__ = [
    "top_k_sampling_from_probs",
    "top_k_top_p_sampling_from_probs",
    "top_p_sampling_from_probs",
]

# A float32 search range narrows in every round, so a real row ends long before this; the cap
# only turns a bug into an error instead of a hang.
_MAX_ROUNDS = 100_000

# flashinfer's "top_k_first" path switches to a radix top-k + compact top-p above this vocab.
_TOP_K_FIRST_FAST_PATH_MAX_K = 256
_TOP_K_FIRST_FAST_PATH_MIN_VOCAB = 65536


def _rejection_sample(
    probs: torch.Tensor,
    streams: RowStreams,
    top_k: torch.Tensor | None,
    top_p: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the rejection rounds of every row; returns (token int64, valid bool)."""
    num_rows = probs.shape[0]
    token = torch.zeros(num_rows, dtype=torch.int64)
    valid = torch.ones(num_rows, dtype=torch.bool)
    low = torch.zeros(num_rows, dtype=torch.float32)
    high = torch.ones(num_rows, dtype=torch.float32)
    q = torch.ones(num_rows, dtype=torch.float32)
    active = torch.arange(num_rows)
    for round_index in range(_MAX_ROUNDS):
        if active.numel() == 0:
            return token, valid
        p = probs if active.numel() == num_rows else probs.index_select(0, active)
        row_low, row_high = low[active], high[active]
        u = streams.uniforms(round_index, active) * q[active]
        sampled, ok = sample_masked(p, p > row_low.unsqueeze(1), u)
        token[active] = torch.where(ok, sampled, 0)
        valid[active] = ok

        pivot_0 = p.gather(1, sampled.unsqueeze(1)).squeeze(1)
        pivot_1 = (pivot_0 + row_high) * 0.5
        above_0 = p > pivot_0.unsqueeze(1)
        above_1 = p > pivot_1.unsqueeze(1)
        mass_0 = torch.where(above_0, p, 0.0).sum(dim=1)
        mass_1 = torch.where(above_1, p, 0.0).sum(dim=1)
        accept_0 = torch.ones_like(ok)
        accept_1 = torch.ones_like(ok)
        if top_k is not None:
            k = top_k[active]
            accept_0 &= above_0.sum(dim=1) < k
            accept_1 &= above_1.sum(dim=1) < k
        if top_p is not None:
            p_row = top_p[active]
            accept_0 &= mass_0 < p_row
            accept_1 &= mass_1 < p_row

        narrow = torch.where(accept_1, pivot_0, pivot_1)
        new_high = torch.where(accept_1, pivot_1, row_high)
        new_q = torch.where(accept_1, mass_0, mass_1)
        low[active], high[active], q[active] = narrow, new_high, new_q
        # A row stops when invalid, when pivot_0 is accepted, or when the range is empty.
        keep_going = ok & ~accept_0 & (narrow < new_high)
        active = active[keep_going]
    raise RuntimeError(f"rejection sampling did not finish within {_MAX_ROUNDS} rounds")


def _top_k_u32(top_k: torch.Tensor | int, rows: ProbsRows) -> torch.Tensor:
    """k as the kernels hold it: a uint32 (so a negative k means 'no limit' in effect)."""
    if isinstance(top_k, torch.Tensor):
        k = per_row_param(top_k, rows, torch.int64, "top_k")
    else:
        k = torch.full((rows.batch_size,), int(top_k), dtype=torch.int64)
    return k & 0xFFFFFFFF


def _run(
    probs: torch.Tensor,
    indices: torch.Tensor | None,
    check_nan: bool,
    top_k: torch.Tensor | int | None,
    top_p: torch.Tensor | float | None,
    generator: torch.Generator | None,
    seed: StreamParam | None,
    offset: StreamParam | None,
    return_valid: bool,
    return_draws: bool,
    subsequence: torch.Tensor | None,
    seed_offset_indexing: SeedOffsetIndexing,
) -> SamplerResult:
    rows = prepare_probs(probs, indices, check_nan)
    streams = resolve_row_streams(
        rows.batch_size, seed, offset, subsequence, seed_offset_indexing, generator
    )
    k = _top_k_u32(top_k, rows) if top_k is not None else None
    p = per_row_param(top_p, rows, torch.float32, "top_p") if top_p is not None else None
    token, valid = _rejection_sample(rows.rows(), streams, k, p)
    return pack_result(
        token, valid if return_valid else None, streams.draws, rows.out_dtype, return_draws
    )


def top_k_sampling_from_probs(
    probs: torch.Tensor,
    top_k: torch.Tensor | int,
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
    """CPU twin of ``flashinfer.sampling.top_k_sampling_from_probs`` (0.7.4).

    Draws per row: one per rejection round (at least 1; data-dependent).
    """
    return _run(
        probs, indices, check_nan, top_k, None, generator, seed, offset,
        return_valid, return_draws, subsequence, seed_offset_indexing,
    )  # fmt: skip


def top_p_sampling_from_probs(
    probs: torch.Tensor,
    top_p: torch.Tensor | float,
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
    """CPU twin of ``flashinfer.sampling.top_p_sampling_from_probs`` (0.7.4).

    Draws per row: one per rejection round (at least 1; data-dependent). ``top_p`` is
    compared in float32, as the kernel holds it.
    """
    return _run(
        probs, indices, check_nan, None, top_p, generator, seed, offset,
        return_valid, return_draws, subsequence, seed_offset_indexing,
    )  # fmt: skip


def _top_k_renorm(probs: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Keep each row's k largest probabilities (ties at the k-th value kept), renormalise."""
    vocab = probs.shape[1]
    kk = k.clamp(min=1, max=max(vocab, 1))
    sorted_desc = probs.sort(dim=1, descending=True).values
    threshold = sorted_desc.gather(1, (kk - 1).unsqueeze(1))
    kept = torch.where(probs >= threshold, probs, 0.0)
    return kept / kept.sum(dim=1, keepdim=True)


def top_k_top_p_sampling_from_probs(
    probs: torch.Tensor,
    top_k: torch.Tensor | int,
    top_p: torch.Tensor | float,
    indices: torch.Tensor | None = None,
    filter_apply_order: str = "top_k_first",
    deterministic: bool = True,
    generator: torch.Generator | None = None,
    check_nan: bool = False,
    seed: StreamParam | None = None,
    offset: StreamParam | None = None,
    return_valid: bool = False,
    top_k_max: int | None = None,
    *,
    return_draws: bool = False,
    subsequence: torch.Tensor | None = None,
    seed_offset_indexing: SeedOffsetIndexing = "per_row",
) -> SamplerResult:
    """CPU twin of ``flashinfer.sampling.top_k_top_p_sampling_from_probs`` (0.7.4).

    ``filter_apply_order="joint"`` reproduces the joint rejection kernel (accept when fewer
    than k tokens lie above the pivot and their mass is below top_p); draws per row: one per
    round. ``"top_k_first"`` follows flashinfer's Python path: top-k renormalisation (ties at
    the k-th value kept, exact division) and then ``top_p_sampling_from_probs`` on the result;
    for vocabularies of 65536 or more and ``0 < k <= 256`` it samples top-p over the k largest
    values in descending order, as flashinfer's fast path does. ``top_k_first`` matches the GPU
    only where the renormalised values are exact (for example a kept mass that is a power of
    two); draws per row are those of the top-p kernel.
    """
    if filter_apply_order == "joint":
        return _run(
            probs, indices, check_nan, top_k, top_p, generator, seed, offset,
            return_valid, return_draws, subsequence, seed_offset_indexing,
        )  # fmt: skip
    if filter_apply_order != "top_k_first":
        raise SamplingInputError(f"Invalid filter_apply_order: {filter_apply_order}")
    if check_nan and bool(torch.isnan(probs).any()):
        raise SamplingInputError("Input probs contains NaN.")
    base = prepare_probs(probs, None)
    k_rows = _top_k_u32(top_k, ProbsRows(base.probs, None))
    # flashinfer reads k as a signed value here (k < 0: no top-k; k == 0: greedy).
    k_signed = torch.where(k_rows >= 1 << 31, k_rows - (1 << 32), k_rows)
    vocab = base.probs.shape[1]
    select_k = top_k if isinstance(top_k, int) else top_k_max
    fast = (
        vocab >= _TOP_K_FIRST_FAST_PATH_MIN_VOCAB
        and select_k is not None
        and 0 < select_k <= _TOP_K_FIRST_FAST_PATH_MAX_K
        and select_k < vocab
        and (isinstance(top_k, int) or top_k.shape == (base.probs.shape[0],))
    )
    if not fast:
        renormed = _top_k_renorm(base.probs, torch.where(k_signed < 0, vocab, k_signed))
        return top_p_sampling_from_probs(
            renormed, top_p, indices, deterministic, generator, False, seed, offset,
            return_valid, return_draws=return_draws, subsequence=subsequence,
            seed_offset_indexing=seed_offset_indexing,
        )  # fmt: skip
    assert select_k is not None
    values, columns = base.probs.topk(select_k, dim=1, largest=True, sorted=True)
    row_k = torch.where(k_signed < 0, select_k, k_signed.clamp(min=1)).unsqueeze(1)
    values = values.masked_fill(torch.arange(select_k) >= row_k, 0.0)
    compact = values / values.sum(dim=1, keepdim=True)
    result = top_p_sampling_from_probs(
        compact, top_p, indices, deterministic, generator, False, seed, offset,
        return_valid, return_draws=return_draws, subsequence=subsequence,
        seed_offset_indexing=seed_offset_indexing,
    )  # fmt: skip
    parts = list(result) if isinstance(result, tuple) else [result]
    local = parts[0].to(torch.int64)
    source_rows = indices.to(torch.int64) if indices is not None else torch.arange(local.shape[0])
    parts[0] = columns[source_rows, local].to(parts[0].dtype)
    return parts[0] if len(parts) == 1 else tuple(parts)
