"""``chain_speculative_sampling``: flashinfer's accept/reject kernel for a chain of K drafts.

Draw order of one row (read from the 0.7.4 kernel), with ``q`` the target's and ``p`` the
draft's probability of draft token ``i``:

1. Accept pass: for ``i = 0, 1, ...`` draw ``u`` and accept while ``u * p < q``; stop at the
   first rejection ``pos`` (or ``pos = K``). That is ``pos + 1`` draws after a rejection, K if
   every draft is accepted.
2. Counting pass: for ``i = pos .. K-1`` draw again; the draws at ``i > pos`` that pass the same
   test are added to ``accepted_token_num`` (the draw at ``pos`` itself is consumed and ignored).
   That is ``K - pos`` more draws after a rejection, none otherwise.
3. One draw, scaled by the residual mass, picks the token at ``pos`` from
   ``relu(target[pos] - draft[pos])`` (just ``target[K]`` for the bonus token).

So a row consumes K + 1 draws when all K drafts are accepted and K + 2 after a rejection.
"""

from __future__ import annotations

import torch

from specseed.rng.philox import StreamParam
from specseed.sampling.inverse_cdf import sample_masked
from specseed.sampling.streams import (
    SamplingInputError,
    SeedOffsetIndexing,
    resolve_row_streams,
)

__all__ = ["chain_speculative_sampling"]


def _validate(
    draft_probs: torch.Tensor, draft_token_ids: torch.Tensor, target_probs: torch.Tensor
) -> tuple[int, int, int]:
    for name, t in (("draft_probs", draft_probs), ("target_probs", target_probs)):
        if t.ndim != 3:
            raise SamplingInputError(f"{name} must be 3D (batch, positions, vocab)")
        if t.device.type != "cpu":
            raise SamplingInputError("the specseed samplers run on the CPU")
    batch, num_drafts, vocab = draft_probs.shape
    if draft_token_ids.shape != (batch, num_drafts):
        raise SamplingInputError(
            f"draft_token_ids must have shape ({batch}, {num_drafts}), "
            f"got {tuple(draft_token_ids.shape)}"
        )
    if target_probs.shape != (batch, num_drafts + 1, vocab):
        raise SamplingInputError(
            f"target_probs must have shape ({batch}, {num_drafts + 1}, {vocab}), "
            f"got {tuple(target_probs.shape)}"
        )
    if draft_token_ids.numel() and (
        int(draft_token_ids.min()) < 0 or int(draft_token_ids.max()) >= vocab
    ):
        raise SamplingInputError("draft_token_ids must be in [0, vocab_size)")
    return batch, num_drafts, vocab


def chain_speculative_sampling(
    draft_probs: torch.Tensor,
    draft_token_ids: torch.Tensor,
    target_probs: torch.Tensor,
    maybe_output_accepted_token_num: torch.Tensor | None = None,
    maybe_output_emitted_draft_token_num: torch.Tensor | None = None,
    deterministic: bool = True,
    generator: torch.Generator | None = None,
    seed: StreamParam | None = None,
    offset: StreamParam | None = None,
    *,
    return_draws: bool = False,
    subsequence: torch.Tensor | None = None,
    seed_offset_indexing: SeedOffsetIndexing = "per_row",
) -> tuple[torch.Tensor, ...]:
    """CPU twin of ``flashinfer.sampling.chain_speculative_sampling`` (0.7.4).

    Returns ``(output_token_ids, output_accepted_token_num, output_emitted_draft_token_num)``:
    tokens (batch, K + 1) int32 padded with -1 after the first rejected position; the counts
    are added in place to the given tensors when they are int32 (flashinfer casts with
    ``.int()``, so another dtype is returned unchanged), else to fresh int32 zeros. With
    ``return_draws`` a fourth element holds the draws per row: K + 1 if every draft was
    accepted, K + 2 after a rejection.
    """
    batch, num_drafts, _ = _validate(draft_probs, draft_token_ids, target_probs)
    streams = resolve_row_streams(batch, seed, offset, subsequence, seed_offset_indexing, generator)
    draft = draft_probs.float()
    target = target_probs.float()
    ids = draft_token_ids.to(torch.int64)
    uniforms = streams.first(num_drafts + 2)

    p_draft = draft.gather(2, ids.unsqueeze(2)).squeeze(2)  # (batch, K)
    q_target = target[:, :num_drafts].gather(2, ids.unsqueeze(2)).squeeze(2)
    rejected = ~(uniforms[:, :num_drafts] * p_draft < q_target)  # draw i tests position i
    any_rejected = rejected.any(dim=1)
    first_rejected = (
        rejected.to(torch.uint8).argmax(dim=1)
        if num_drafts
        else torch.zeros(batch, dtype=torch.int64)
    )
    pos = torch.where(any_rejected, first_rejected, num_drafts)

    # Counting pass: position i >= pos is tested again with draw i + 1.
    position = torch.arange(num_drafts)
    later_pass = uniforms[:, 1 : num_drafts + 1] * p_draft < q_target
    accepted = pos + (later_pass & (position > pos.unsqueeze(1))).sum(dim=1)

    # Residual (or bonus) token at pos, drawn with the row's last draw.
    residual_draw = torch.where(any_rejected, num_drafts + 1, num_drafts)
    vocab_index = pos.view(batch, 1, 1).expand(batch, 1, target.shape[2])
    target_at_pos = target.gather(1, vocab_index).squeeze(1)
    if num_drafts:
        draft_at_pos = draft.gather(1, vocab_index.clamp(max=num_drafts - 1)).squeeze(1)
        draft_at_pos = torch.where(any_rejected.unsqueeze(1), draft_at_pos, 0.0)
    else:
        draft_at_pos = torch.zeros_like(target_at_pos)
    residual = (target_at_pos - draft_at_pos).clamp(min=0.0)
    u = uniforms.gather(1, residual_draw.unsqueeze(1)).squeeze(1) * residual.sum(dim=1)
    token, valid = sample_masked(residual, residual > 0, u)
    token = torch.where(valid, token, -1)

    output = torch.full((batch, num_drafts + 1), -1, dtype=torch.int64)
    output[:, :num_drafts] = torch.where(position < pos.unsqueeze(1), ids, -1)
    output.scatter_(1, pos.unsqueeze(1), token.unsqueeze(1))
    draws = residual_draw + 1
    streams.consume(draws)

    accepted_out = (
        torch.zeros(batch, dtype=torch.int32)
        if maybe_output_accepted_token_num is None
        else maybe_output_accepted_token_num
    )
    emitted_out = (
        torch.zeros(batch, dtype=torch.int32)
        if maybe_output_emitted_draft_token_num is None
        else maybe_output_emitted_draft_token_num
    )
    accepted_out.int().add_(accepted.to(torch.int32))
    emitted_out.int().add_(pos.to(torch.int32))
    result: tuple[torch.Tensor, ...] = (output.to(torch.int32), accepted_out, emitted_out)
    if return_draws:
        result += (streams.draws,)
    return result
