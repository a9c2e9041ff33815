"""The reference engine's sampling calls: probabilities in, tokens, draws and Philox states out.

Every random choice goes through a sampling backend (``specseed.sampling.backend``: the
flashinfer-exact CPU twins by default, or flashinfer's CUDA kernels), one call per engine kernel
call, with the seed/offset/subsequence tensors the engine filled. Greedy rows never reach a
kernel: they take the argmax.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from specseed.engine_adapters.reference.rng_assignment import AssignedState, int64_bits
from specseed.sampling.backend import CpuBackend, SamplingBackend
from specseed.sampling.distributions import filter_probs, probs_from_logits

CPU_BACKEND = CpuBackend()

__all__ = ["filter_probs", "probs_from_logits"]  # the engine reaches them through this module


@dataclass(frozen=True)
class KernelResult:
    """What one kernel call did for each of its rows."""

    kernel: str
    tokens: list[list[int]]
    """Per row: the sampled token, or for ``chain_speculative_sampling`` the emitted tokens."""
    draws: list[int]
    subsequences: list[int]
    """The Philox subsequence each row used (explicit, or the kernel row)."""


def _state_tensors(
    states: Sequence[AssignedState],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    seeds = torch.tensor([int64_bits(s.seed) for s in states], dtype=torch.int64)
    offsets = torch.tensor([int64_bits(s.offset) for s in states], dtype=torch.int64)
    if all(s.subsequence is None for s in states):
        return seeds, offsets, None
    subsequences = torch.tensor(
        [row if s.subsequence is None else s.subsequence for row, s in enumerate(states)],
        dtype=torch.int64,
    )
    return seeds, offsets, subsequences


def sample(
    probs: torch.Tensor,
    top_k: Sequence[int],
    top_p: Sequence[float],
    states: Sequence[AssignedState],
    *,
    element0: bool,
    backend: SamplingBackend = CPU_BACKEND,
) -> KernelResult:
    """One sampling call over the rows of ``probs`` (unfiltered, temperature applied)."""
    seeds, offsets, subsequences = _state_tensors(states)
    vocab = probs.shape[-1]
    filtering = any(0 < k < vocab for k in top_k) or any(p < 1.0 for p in top_p)
    if filtering:
        kernel = "top_k_top_p_sampling_from_probs"
        k_arr = torch.tensor([k if 0 < k < vocab else vocab for k in top_k], dtype=torch.int32)
        p_arr = torch.tensor(list(top_p), dtype=torch.float32)
        result = backend.top_k_top_p_sampling_from_probs(
            probs, k_arr, p_arr, seeds, offsets, subsequences, element0=element0
        )
    else:
        kernel = "sampling_from_probs"
        result = backend.sampling_from_probs(probs, seeds, offsets, subsequences, element0=element0)
    return KernelResult(
        kernel,
        [[int(t)] for t in result.tokens.tolist()],
        [int(d) for d in result.draws.tolist()],
        list(result.subsequences),
    )


def verify(
    draft_probs: torch.Tensor,
    draft_ids: torch.Tensor,
    target_probs: torch.Tensor,
    states: Sequence[AssignedState],
    *,
    element0: bool,
    backend: SamplingBackend = CPU_BACKEND,
) -> KernelResult:
    """One rejection-sampling call: accepted drafts plus the residual or bonus token per row."""
    seeds, offsets, subsequences = _state_tensors(states)
    result = backend.chain_speculative_sampling(
        draft_probs, draft_ids, target_probs, seeds, offsets, subsequences, element0=element0
    )
    assert result.emitted is not None
    tokens = [
        [int(t) for t in row[: int(n) + 1]]
        for row, n in zip(result.tokens.tolist(), result.emitted.tolist(), strict=True)
    ]
    return KernelResult(
        "chain_speculative_sampling",
        tokens,
        [int(d) for d in result.draws.tolist()],
        list(result.subsequences),
    )


def resample_residual_unnormalised(
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    tokens: Sequence[Sequence[int]],
    states: Sequence[AssignedState],
    *,
    element0: bool,
    backend: SamplingBackend = CPU_BACKEND,
) -> list[list[int]]:
    """The ``biased-acceptance`` defect: after a rejection, the engine samples its own residual
    ``max(p - q, 0)`` with ``sampling_from_probs`` but forgets to normalise it, so a uniform
    above the residual's mass falls through to the last token with mass.

    Uses the draw the accept kernel would have used for the residual (its last, K + 1).
    """
    num_drafts = draft_probs.shape[1]
    rejected = [i for i, row in enumerate(tokens) if len(row) <= num_drafts]
    if not rejected:
        return [list(row) for row in tokens]
    residuals = []
    for i in rejected:
        pos = len(tokens[i]) - 1
        residuals.append((target_probs[i, pos] - draft_probs[i, pos]).clamp(min=0.0))
    moved = [
        AssignedState(states[i].seed, states[i].offset + num_drafts + 1, states[i].subsequence)
        for i in rejected
    ]
    seeds, offsets, subsequences = _state_tensors(moved)
    if subsequences is None:
        # Keep each row's own kernel row as its subsequence, as in the accept kernel.
        subsequences = torch.tensor(rejected, dtype=torch.int64)
    resampled = backend.sampling_from_probs(
        torch.stack(residuals), seeds, offsets, subsequences, element0=element0
    ).tokens
    out = [list(row) for row in tokens]
    for k, i in enumerate(rejected):
        out[i][-1] = int(resampled[k])
    return out
