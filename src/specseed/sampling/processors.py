"""Logits processors: what the sampling knobs beyond temperature, top-k and top-p do to a
row of logits before it is sampled, in vLLM's order and arithmetic.

``logit_bias`` is added first; then the penalties, counted over the context the row is
conditioned on (vLLM's ``apply_penalties``, vllm/model_executor/layers/utils.py): repetition
divides positive logits and multiplies negative ones of every token in the prompt or output,
frequency subtracts ``penalty x count`` of each output token, presence subtracts ``penalty``
once per distinct output token. Temperature follows (``probs_from_logits``), then ``min_p``
(keep tokens whose probability is at least ``min_p`` x the largest, renormalised), then the
kernels' top-k/top-p. A processor that is unset does nothing, not even a renormalisation, so
a request without knobs is sampled bit for bit as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Processors:
    """The knobs of one request that change logits or probabilities (None: unset)."""

    logit_bias: tuple[tuple[int, float], ...] | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    min_p: float | None = None

    @property
    def changes_logits(self) -> bool:
        """Whether any processor before temperature is set (to a value that does something)."""
        return bool(self.logit_bias) or self.penalises

    @property
    def penalises(self) -> bool:
        return (
            bool(self.presence_penalty)
            or bool(self.frequency_penalty)
            or (self.repetition_penalty is not None and self.repetition_penalty != 1.0)
        )

    @property
    def filters(self) -> bool:
        return bool(self.min_p)

    @property
    def active(self) -> bool:
        return self.changes_logits or self.filters


NONE = Processors()


def process_logits(
    logits: torch.Tensor,
    processors: Processors,
    prompt: Sequence[int],
    outputs: Sequence[Sequence[int]],
) -> torch.Tensor:
    """``logits`` [rows, vocab] (float32) after logit_bias and the penalties; row ``i`` is
    conditioned on ``prompt`` + ``outputs[i]`` (the generated tokens before it)."""
    if not processors.changes_logits:
        return logits
    out = logits.float().clone()
    vocab = out.shape[-1]
    if processors.logit_bias:
        ids = torch.tensor([t for t, _ in processors.logit_bias if t < vocab], dtype=torch.long)
        bias = torch.tensor([b for t, b in processors.logit_bias if t < vocab], dtype=torch.float32)
        out[:, ids] += bias
    if not processors.penalises:
        return out
    prompt_mask = torch.zeros(vocab, dtype=torch.bool)
    if prompt:
        prompt_mask[torch.tensor([t for t in prompt if 0 <= t < vocab], dtype=torch.long)] = True
    for i, generated in enumerate(outputs):
        counts = torch.zeros(vocab, dtype=torch.float32)
        if generated:
            counts.index_add_(
                0,
                torch.tensor(list(generated), dtype=torch.long),
                torch.ones(len(generated), dtype=torch.float32),
            )
        row = out[i]
        penalty = processors.repetition_penalty
        if penalty is not None and penalty != 1.0:
            seen = prompt_mask | (counts > 0)
            scaled = torch.where(row > 0, row / penalty, row * penalty)
            row = torch.where(seen, scaled, row)
        if processors.frequency_penalty:
            row = row - processors.frequency_penalty * counts
        if processors.presence_penalty:
            row = row - processors.presence_penalty * (counts > 0).float()
        out[i] = row
    return out


def min_p_filter(probs: torch.Tensor, min_p: float | None) -> torch.Tensor:
    """Probabilities [rows, vocab] with every token below ``min_p`` x its row's largest set
    to 0, renormalised (unchanged when min_p is unset or 0)."""
    if not min_p:
        return probs
    top = probs.max(dim=-1, keepdim=True).values
    kept = torch.where(probs >= min_p * top, probs, torch.zeros_like(probs))
    return kept / kept.sum(dim=-1, keepdim=True)


def top_logprobs(
    probs: torch.Tensor, tokens: Sequence[int], count: int
) -> list[tuple[float, tuple[tuple[int, float], ...]]]:
    """Per row of ``probs`` [rows, vocab]: the natural-log probability of that row's token,
    and the ``count`` most probable tokens with theirs (tokens of probability 0 left out;
    ties by id). One call for all rows: a row at a time cost a default audit 1.5 s."""
    logp = torch.log(probs.double())
    rows = torch.arange(len(tokens))
    chosen = logp[rows, torch.tensor(list(tokens), dtype=torch.long)].tolist()
    if count <= 0:
        return [(c, ()) for c in chosen]
    order = _most_probable(probs, count)
    ids, values = order.tolist(), torch.gather(logp, -1, order).tolist()
    # Most probable first, so a row's tokens of probability 0 are its last ones.
    kept = (torch.gather(probs, -1, order) > 0.0).sum(dim=-1).tolist()
    return [
        (c, tuple(zip(i[:n], vs[:n], strict=True)))
        for c, i, vs, n in zip(chosen, ids, values, kept, strict=True)
    ]


_TIE_SHIFT = 2.0**-50
"""How far :func:`_most_probable` lowers a probability per unit of token id, relatively:
well above a double's rounding (2**-53) and, times any id below :data:`_TIE_VOCAB`, well below
the relative gap between two float32 probabilities (2**-24)."""
_TIE_VOCAB = 1 << 24


def _most_probable(probs: torch.Tensor, count: int) -> torch.Tensor:
    """Per row, the ids of the ``count`` most probable tokens, most probable first and equal
    ones by id: what a stable sort of ``-probs`` puts first (token ids, [rows, count])."""
    vocab = probs.shape[-1]
    if probs.dtype == torch.float32 and vocab < _TIE_VOCAB:
        # p * (1 - id * 2**-50) in float64 orders tokens as (p descending, id ascending), every
        # key distinct but those of probability 0 (which top_logprobs leaves out): a top-k of
        # the keys is the stable sort's head, at a fraction of a full sort's cost.
        shift = 1.0 - torch.arange(vocab, dtype=torch.float64) * _TIE_SHIFT
        top = torch.topk(probs.double() * shift, min(count, vocab), dim=-1)
        # A NaN, which the sort puts last, is the top-k's largest: it shows among the chosen.
        if not bool(torch.isnan(top.values).any()):
            return top.indices
    return torch.sort(-probs.double(), dim=-1, stable=True).indices[:, :count]
