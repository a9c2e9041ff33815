"""Float32 kernels whose results do not depend on batch composition.

The audit attributes a divergence to the RNG only if the logits of a request are bit for bit
the same whichever batch it runs in, at whichever row, and however its positions are split
into forward calls (token by token, a chunk of K + 1 drafts, a whole prefill). BLAS matmuls do
not give that: on the CPU, MKL picks a different kernel for small row counts and for the
remainder rows of a tile, so a row's bits depend on how many rows share the call (measured
here in float32 for M < 12, and in float64 for every M that is not a multiple of 4; a float64
pipeline cast to float32 at the end only makes a flip rare, not impossible).

So :func:`linear` never lets the row count reach BLAS: it pads the rows to whole blocks of
:data:`ROW_BLOCK` and makes one ``torch.mm`` call per block, so every call has one shape
(``[ROW_BLOCK, in] x [in, out]``) and MKL runs the same kernel, with the same reduction order
over ``in``, whatever the batch; a row's bits then depend on its own inputs alone (the tests
hold this across batch sizes, row positions and thread counts). The other contractions
(attention) are an elementwise product followed by ``sum`` over the last, contiguous
dimension. torch's CPU sum reduces each output element over that dimension in one
fixed order that depends only on its length (and the machine's vector width), and products,
sums, quotients and square roots are correctly rounded, so each output element is a function
of its own inputs alone. The remaining pieces follow the same rule:

- attention sums over fixed-size blocks of key slots, block after block, the invisible slots
  masked to ``-inf``: ``torch.softmax`` or one ``sum`` over a length that grew with the
  batch's longest request would regroup the same terms, whereas extra blocks here only add
  exact zeros;
- SiLU is ``x / (1 + exp(-x))``: ``torch.sigmoid`` and ``F.silu`` compute the last
  ``numel % 32`` elements of a call with a scalar formula that differs from the vector one in
  the last bit (measured: about 4% of values), whereas ``exp`` goes through the vector math
  library for every element;
- RoPE angles come from a table built once, so a position's cos/sin never depend on the call.

The tests in tests/models/test_model_invariance.py hold this to
``torch.equal`` across batch sizes, rows, chunkings and thread counts.

What this does not give is the same bits on another machine: sums group their terms by SIMD
lanes, so a CPU with another vector width (or another torch build) rounds differently. The
audit compares runs made on one machine, which is where the guarantee holds. The seeded
weights themselves are the same everywhere (see ``seeded``).
"""

from __future__ import annotations

import math
import os

import torch

from specseed.models.config import RopeScaling

PRODUCT_BUDGET = 1 << 20
"""Elements of one broadcast product. Bigger products are computed in row blocks: a fresh
32 MiB temporary costs more in page faults than the arithmetic (measured: 9.5 ms for 256 rows
of a 512 x 64 projection in one block against 0.65 ms in blocks of 32 rows)."""


ATTENTION_BLOCK = 32
"""Key slots per attention block. A forward attends over whole blocks up to its furthest
position instead of the full cache capacity (an 8x saving for short sequences in a 256-slot
cache); see :func:`attention` for why that keeps the bits. 32 rather than 64: the default
audit's sequences end below 64 positions, and most of their steps lie below 32, where a
64-slot block computed twice the products (measured, one torch thread: 8 requests, a
20-token prefill and 10 steps of 4, 27 ms against 41 ms, best of 40); 16 was no faster."""


ROW_BLOCK = 16
"""Rows of every ``torch.mm`` call :func:`linear` makes. Any fixed block keeps the bits; 16
covers a decode step of the default audit (8 requests x up to K + 1 positions) in one or two
calls without padding a single-row call out to much wasted work."""

LINEAR_KERNEL = os.environ.get("SPECSEED_LINEAR", "blocked")
"""``blocked`` (the default, :func:`blocked_linear`) or ``broadcast``
(:func:`broadcast_linear`, the earlier kernel). Both are batch-invariant but round
differently, so runs compare only under one kernel; ``broadcast`` is kept for
benchmarks/bench_default_audit.py, which times the two side by side."""


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weight.T + bias`` for ``x [rows, in]`` and ``weight [out, in]``, row-invariant."""
    if LINEAR_KERNEL == "broadcast":
        return broadcast_linear(x, weight, bias)
    return blocked_linear(x, weight, bias)


def blocked_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """:func:`linear` as one fixed-shape ``torch.mm`` per block of :data:`ROW_BLOCK` rows."""
    rows = x.shape[0]
    padded_rows = -(-rows // ROW_BLOCK) * ROW_BLOCK
    if rows == padded_rows and x.is_contiguous():
        padded = x  # already whole blocks in the one layout the copy would give
    else:
        padded = x.new_zeros(padded_rows, x.shape[1])
        padded[:rows] = x  # a copy, so every call also sees one memory layout
    weight_t = weight.t()
    # Fewer ops per call than writing into slices of one output (the tiny model's calls are
    # dominated by per-op overhead); each mm is still one [ROW_BLOCK, in] x [in, out] call.
    if padded_rows == ROW_BLOCK:
        out = torch.mm(padded, weight_t)
    elif padded_rows == 0:
        out = x.new_zeros(0, weight.shape[0])
    else:
        out = torch.cat(
            [
                torch.mm(padded[start : start + ROW_BLOCK], weight_t)
                for start in range(0, padded_rows, ROW_BLOCK)
            ]
        )
    if rows != padded_rows:
        out = out[:rows]
    return out if bias is None else out + bias


def broadcast_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """:func:`linear` as an elementwise product and ``sum`` over ``in`` (no BLAS at all)."""
    if x.stride(-1) != 1:
        x = x.contiguous()
    rows = x.shape[0]
    width = weight.shape[0] * weight.shape[1]
    if rows * width <= PRODUCT_BUDGET:
        out = (x.unsqueeze(1) * weight).sum(-1)
    else:
        step = max(1, PRODUCT_BUDGET // width)
        out = torch.cat([(part.unsqueeze(1) * weight).sum(-1) for part in x.split(step)])
    return out if bias is None else out + bias


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Llama RMSNorm, in the same operation order as transformers' ``LlamaRMSNorm``."""
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def silu(x: torch.Tensor) -> torch.Tensor:
    """``x * sigmoid(x)`` written so every element takes the same path (see module doc)."""
    return x / (1.0 + torch.exp(-x))


def rope_inv_freq(head_dim: int, theta: float, scaling: RopeScaling | None) -> torch.Tensor:
    """Inverse frequencies of RoPE, computed as transformers computes them (float32)."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim
    inv_freq = 1.0 / (theta**exponents)
    if scaling is None:
        return inv_freq
    # Llama 3.1 scaling: keep high frequencies, divide low ones by `factor`, blend between.
    low_wavelen = scaling.original_max_position_embeddings / scaling.low_freq_factor
    high_wavelen = scaling.original_max_position_embeddings / scaling.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / scaling.factor, inv_freq)
    smooth = (scaling.original_max_position_embeddings / wavelen - scaling.low_freq_factor) / (
        scaling.high_freq_factor - scaling.low_freq_factor
    )
    smoothed = (1 - smooth) * scaled / scaling.factor + smooth * scaled
    is_medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(is_medium, smoothed, scaled)


def rope_table(inv_freq: torch.Tensor, positions: int) -> torch.Tensor:
    """``[positions, 2, head_dim]``: cos, and sin with its first half negated.

    With the sign folded into the table, ``rotate_half(x) * sin`` becomes
    ``swap_halves(x) * signed_sin``, which is bit-identical (negation is exact).
    """
    angles = torch.arange(positions, dtype=torch.float32)[:, None] * inv_freq[None, :]
    doubled = torch.cat((angles, angles), dim=-1)
    half = inv_freq.shape[0]
    sin = doubled.sin()
    signed_sin = torch.cat((-sin[:, :half], sin[:, half:]), dim=-1)
    return torch.stack((doubled.cos(), signed_sin), dim=1).contiguous()


def apply_rope(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate ``x [rows, heads, head_dim]`` by ``angles [rows, 2, head_dim]`` (from the table)."""
    swapped = x.roll(x.shape[-1] // 2, dims=-1)  # the two halves exchanged (a copy)
    return x * angles[:, 0:1] + swapped * angles[:, 1:2]


def key_span(max_position: int) -> int:
    """Key slots a forward attends over: whole blocks up to the batch's furthest position."""
    return ATTENTION_BLOCK * (max_position // ATTENTION_BLOCK + 1)


def attention(
    q: torch.Tensor,
    keys: torch.Tensor,
    values_t: torch.Tensor,
    hidden_mask: torch.Tensor,
    scale: float,
    *,
    chunk_rows: int = 1,
) -> torch.Tensor:
    """Grouped-query attention of each row over its own request's key slots.

    ``q [rows, kv_heads, group, head_dim]``; ``keys [rows, kv_heads, span, head_dim]`` and
    ``values_t [rows, kv_heads, head_dim, span]`` are each row's request cache (values
    transposed so the weighted sum runs over the last, contiguous dimension);
    ``hidden_mask [rows, span]`` is true for the slots a row must not see. ``span`` is a whole
    number of :data:`ATTENTION_BLOCK` blocks. Returns ``[rows, kv_heads * group * head_dim]``.
    With ``chunk_rows`` R > 1, ``keys`` and ``values_t`` hold one cache per R consecutive rows
    (``[rows / R, ...]``): each row is broadcast against its chunk's cache, so every product
    and sum is the one the per-row layout computes.

    The softmax is spelled out so that the span can follow the batch's longest request without
    changing any row's bits: the max is exact in any order, and both sums (the softmax
    denominator and the weighted sum of values) add fixed-size blocks one after the other.
    A block beyond a row's position contributes exact zeros, and ``x + 0 == x``, so the span
    only decides how many zeros get added (up to the sign of an exact-zero result).
    """
    rows, kv_heads, group, head_dim = q.shape
    span = keys.shape[2]
    per_row = kv_heads * group * span * head_dim
    chunks = rows // chunk_rows
    if chunk_rows < 1 or chunks * chunk_rows != rows or keys.shape[0] != chunks:
        raise ValueError(
            f"attention: {rows} rows do not make {keys.shape[0]} chunks of {chunk_rows}"
        )
    step = max(1, PRODUCT_BUDGET // (per_row * chunk_rows))  # in chunks
    # [chunks, R, kv_heads, group, ...]: a row's products broadcast against its chunk's cache.
    q_chunked = q.view(chunks, chunk_rows, kv_heads, group, head_dim)
    mask = hidden_mask.view(chunks, chunk_rows, 1, 1, span)
    outputs = []
    for start in range(0, max(chunks, 1), step):  # one (empty) block when rows == 0
        sl = slice(start, start + step)
        scores = (q_chunked[sl].unsqueeze(4) * keys[sl, None, :, None]).sum(-1) * scale
        scores = scores.masked_fill(mask[sl], float("-inf"))
        weights = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
        total = _blockwise_sum(weights)
        weighted = _blockwise_sum(weights.unsqueeze(4) * values_t[sl, None, :, None])
        outputs.append(weighted / total.unsqueeze(-1))
    out = outputs[0] if len(outputs) == 1 else torch.cat(outputs)
    return out.reshape(rows, kv_heads * group * head_dim)


def _blockwise_sum(x: torch.Tensor) -> torch.Tensor:
    """Sum over the last dimension: within each block, then block after block in order."""
    if x.shape[-1] == ATTENTION_BLOCK:
        return x.sum(-1)  # one block: the same sum as through the blocked view, in fewer ops
    per_block = x.unflatten(-1, (-1, ATTENTION_BLOCK)).sum(-1)
    total = per_block[..., 0]
    for index in range(1, per_block.shape[-1]):
        total = total + per_block[..., index]
    return total
