"""The inverse-CDF step every flashinfer sampling kernel shares, vectorised over rows.

flashinfer's ``DeviceSamplingFromProb`` scans a row with a predicate (``p > 0``, ``p > low``,
``p >= pivot``): masked-out entries count as zero, the token is the first one that passes the
predicate and whose running sum exceeds ``u``; when rounding leaves ``u`` at or above the total,
the last entry that passes the predicate is taken, and a row with no such entry is invalid.
Where the prefix sums are exact in float32 (for example probabilities that are multiples of
2**-16) the order of summation does not matter and this reproduces the kernel's choice.
"""

from __future__ import annotations

import torch

__all__ = ["last_true_index", "sample_masked"]


def last_true_index(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, the index of the last True entry and whether there is one."""
    width = mask.shape[1]
    any_true = mask.any(dim=1)
    last = (width - 1) - mask.flip(1).to(torch.uint8).argmax(dim=1)
    return last, any_true


def sample_masked(
    probs: torch.Tensor, mask: torch.Tensor, u: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(token, valid)`` per row of ``probs`` (R, V) restricted to ``mask``, at threshold ``u``.

    ``token`` is int64; for an invalid row (nothing passes the mask) it is 0, as the kernels
    write it.
    """
    masked = torch.where(mask, probs, 0.0)
    cdf = masked.cumsum(dim=1)
    # The masked values are >= 0, so the CDF is non-decreasing and the first index whose CDF
    # exceeds u is a searchsorted; that entry's CDF jumped there, so it passes the mask.
    token = torch.searchsorted(cdf, u.contiguous().unsqueeze(1), right=True).squeeze(1)
    missed = token >= probs.shape[1]
    valid = torch.ones_like(missed)
    if bool(missed.any()):
        rows = missed.nonzero().squeeze(1)
        last, has_any = last_true_index(mask[rows])
        token[rows] = torch.where(has_any, last, 0)
        valid[rows] = has_any
    return token, valid
