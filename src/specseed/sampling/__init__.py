"""CPU samplers that pick the same tokens as flashinfer 0.7.4's CUDA kernels.

Each function has flashinfer's name, arguments and return values and reproduces its kernel's
algorithm and draw order: row ``bx`` of a launch draws from
``curand_init(seed_row, subsequence=bx, offset_row)``, and the top-k / top-p kernels draw once
per rejection round. Where a row's prefix sums are exact in float32 (probabilities that are
multiples of 2**-16, say) the token is the GPU's, bit for bit. Inputs are float32 tensors on the
CPU and ``seed``/``offset`` must be given (ints, or 1-D int64 tensors of length 1 or one per
output row).

specseed's keyword-only extensions, on every function:

- ``return_draws``: append an int64 tensor with the Philox draws each output row consumed;
- ``subsequence``: per-row Philox subsequence (default: the output row index, as ``blockIdx.x``);
- ``seed_offset_indexing="element0"``: emulate flashinfer 0.6.4 .. 0.7.1, whose kernels read
  only element 0 of the seed and offset tensors (every row draws from row 0's seed and offset,
  still on its own subsequence). Only the seed/offset reading is emulated; those releases'
  other kernel differences (e.g. double-precision pivots) are not.
"""

from __future__ import annotations

from specseed.sampling.rejection import (
    top_k_sampling_from_probs,
    top_k_top_p_sampling_from_probs,
    top_p_sampling_from_probs,
)
from specseed.sampling.single_draw import min_p_sampling_from_probs, sampling_from_probs
from specseed.sampling.speculative import chain_speculative_sampling
from specseed.sampling.streams import (
    RowStreams,
    SamplingInputError,
    SeedOffsetIndexing,
    resolve_row_streams,
)

DRAW_COUNT_DOC: dict[str, str] = {
    "sampling_from_probs": "1 draw per row",
    "min_p_sampling_from_probs": "1 draw per row",
    "top_k_sampling_from_probs": "1 draw per rejection round: >= 1, data-dependent",
    "top_p_sampling_from_probs": "1 draw per rejection round: >= 1, data-dependent",
    "top_k_top_p_sampling_from_probs": (
        "1 draw per rejection round of the joint kernel (filter_apply_order='joint'), or of "
        "the top-p kernel on the top-k-renormalised row ('top_k_first'): >= 1, data-dependent"
    ),
    "chain_speculative_sampling": (
        "K + 1 draws per row when all K drafts are accepted; K + 2 after a rejection (the "
        "accept tests keep drawing past the rejected position, then one draw picks the "
        "residual or bonus token)"
    ),
}
"""Philox draws each kernel consumes per output row and call (flashinfer 0.7.4)."""

__all__ = [
    "DRAW_COUNT_DOC",
    "RowStreams",
    "SamplingInputError",
    "SeedOffsetIndexing",
    "chain_speculative_sampling",
    "min_p_sampling_from_probs",
    "resolve_row_streams",
    "sampling_from_probs",
    "top_k_sampling_from_probs",
    "top_k_top_p_sampling_from_probs",
    "top_p_sampling_from_probs",
]
