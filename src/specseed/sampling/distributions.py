"""The distributions the sampling kernels draw from, as probabilities: softmax at a
temperature, and flashinfer's joint top-k/top-p filter. The reference engine's rejection
sampling needs them explicitly, and the distribution oracle judges every engine against them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def probs_from_logits(logits: torch.Tensor, temperatures: Sequence[float]) -> torch.Tensor:
    """Softmax of ``logits / T`` per row, in float32 (T > 0)."""
    scale = torch.tensor(list(temperatures), dtype=torch.float32).unsqueeze(-1)
    return torch.softmax(logits.float() / scale, dim=-1)


def filter_probs(probs: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """The distribution flashinfer's joint top-k/top-p kernel samples from, renormalised.

    The kernel accepts token t when fewer than k tokens are strictly more probable than t
    and their mass is below top_p; ties at the boundary are all kept. Rejection sampling
    needs this distribution explicitly, for the target and for the draft.
    """
    vocab = probs.shape[-1]
    if (top_k <= 0 or top_k >= vocab) and top_p >= 1.0:
        return probs
    sorted_desc, _ = torch.sort(probs, dim=-1, descending=True)
    ascending_neg = (-sorted_desc).contiguous()
    # Tokens strictly more probable than each token: the first index of its value in the
    # descending order.
    greater_count = torch.searchsorted(ascending_neg, (-probs).contiguous(), right=False)
    mass_prefix = torch.cumsum(sorted_desc, dim=-1) - sorted_desc
    greater_mass = torch.gather(mass_prefix, -1, greater_count.clamp(max=vocab - 1))
    keep = torch.ones_like(probs, dtype=torch.bool)
    if 0 < top_k < vocab:
        keep &= greater_count < top_k
    if top_p < 1.0:
        keep &= greater_mass < top_p
    filtered = torch.where(keep, probs, torch.zeros_like(probs))
    return filtered / filtered.sum(dim=-1, keepdim=True)
