"""The built-in draft head agrees with the built-in target often enough, and not too often.

The audit only exercises the accept paths it sees: a run needs iterations where no draft is
accepted, some are, and all K are, in greedy runs and in sampled runs alike. This module holds
a minimal one-model speculative loop (argmax / ``torch.multinomial`` stand in for the real
samplers; it is a measuring device, not the engine) and checks all three outcomes occur.

``python -m tests.engine_adapters.reference.test_draft_acceptance`` prints the full table
quoted in tiny.py.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from specseed.models.draft import Eagle3DraftHead
from specseed.models.target import LlamaTarget
from specseed.models.tiny import TINY_MODEL

K = 3


def choose(logits: torch.Tensor, temperature: float, generator: torch.Generator) -> int:
    if temperature == 0.0:
        return int(logits.argmax())
    probs = torch.softmax(logits / temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


def speculate(
    target: LlamaTarget,
    draft: Eagle3DraftHead,
    prompt: list[int],
    *,
    new_tokens: int,
    temperature: float,
    generator: torch.Generator,
) -> list[int]:
    """Decode ``new_tokens`` with K drafts per iteration; the accepted count per iteration.

    Layout as in TRT-LLM's one-model EAGLE3: the verify chunk is the last emitted token and the
    K drafts; the first draft step re-reads the verified positions (state at p, token at
    p + 1); later steps feed back ``hidden_out``. Sampled runs accept with min(1, p/q) and
    resample from the normalised residual max(0, p - q).
    """
    target_cache, draft_cache = target.new_cache(), draft.new_cache()
    prefill = target.forward([(target_cache, prompt)])[0]
    current = choose(prefill.logits[-1], temperature, generator)
    first = draft.forward([(draft_cache, [*prompt[1:], current], prefill.aux_hidden)])[0]
    committed, emitted, accepted_counts = len(prompt), 1, []
    while emitted < new_tokens:
        drafts: list[int] = []
        proposals: list[torch.Tensor] = []
        logits, hidden = first.logits[-1], first.hidden_out[-1:]
        for step in range(K):
            proposals.append(torch.softmax(logits / max(temperature, 1e-6), dim=-1))
            drafts.append(choose(logits, temperature, generator))
            if step < K - 1:
                later = draft.forward([(draft_cache, [drafts[-1]], hidden)])[0]
                logits, hidden = later.logits[-1], later.hidden_out
        verify = target.forward([(target_cache, [current, *drafts])])[0]
        accepted, correction = 0, None
        for i, token in enumerate(drafts):
            if temperature == 0.0:
                best = int(verify.logits[i].argmax())
                if best != token:
                    correction = best
                    break
            else:
                p = torch.softmax(verify.logits[i] / temperature, dim=-1)
                q = proposals[i]
                if float(torch.rand(1, generator=generator)) >= min(
                    1.0, float(p[token] / q[token])
                ):
                    residual = (p - q).clamp(min=0)
                    correction = int(
                        torch.multinomial(residual / residual.sum(), 1, generator=generator)
                    )
                    break
            accepted += 1
        if correction is None:
            correction = choose(verify.logits[K], temperature, generator)
        accepted_counts.append(accepted)
        target_cache.truncate(committed + accepted + 1)
        draft_cache.truncate(committed)
        first = draft.forward(
            [(draft_cache, [*drafts[:accepted], correction], verify.aux_hidden[: accepted + 1])]
        )[0]
        committed += accepted + 1
        emitted += accepted + 1
        current = correction
    return accepted_counts


def outcome_fractions(
    temperature: float, seeds: tuple[int, ...], requests: int, new_tokens: int
) -> dict[str, float]:
    counts: Counter[str] = Counter()
    for seed in seeds:
        target, draft = TINY_MODEL.build(seed)
        generator = torch.Generator().manual_seed(1000 + seed)
        for _ in range(requests):
            prompt = torch.randint(
                3, TINY_MODEL.config.vocab_size, (8,), generator=generator
            ).tolist()
            for accepted in speculate(
                target,
                draft,
                prompt,
                new_tokens=new_tokens,
                temperature=temperature,
                generator=generator,
            ):
                counts["zero" if accepted == 0 else "full" if accepted == K else "partial"] += 1
    total = sum(counts.values())
    return {name: counts[name] / total for name in ("zero", "partial", "full")}


@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_zero_partial_and_full_acceptance_all_occur(temperature: float) -> None:
    fractions = outcome_fractions(temperature, seeds=(0, 1), requests=4, new_tokens=24)
    # Measured: about 0.5 / 0.4 / 0.1 greedy and 0.4 / 0.4 / 0.2 sampled (see tiny.py).
    assert fractions["zero"] > 0.15, fractions
    assert fractions["partial"] > 0.15, fractions
    assert fractions["full"] > 0.04, fractions
    assert fractions["zero"] < 0.8, fractions


if __name__ == "__main__":
    for t in (0.0, 0.8, 1.0):
        f = outcome_fractions(t, seeds=(0, 1, 2, 3), requests=8, new_tokens=32)
        print(f"temperature {t}: " + ", ".join(f"{k} {v:.2f}" for k, v in f.items()))
