"""Forward latency of the built-in tiny target and draft head, and how peaked the target is.

    python benchmarks/bench_model_forward.py [--repeats N]

Prints milliseconds per forward (best of several rounds: the machine may be shared) for
batches of 1 and 16 requests, one token each (a decode or later draft step) and K + 1 = 4
tokens each (a verify chunk or first draft step), after a 16-token prefill. Then the target's
next-token entropy along sampled sequences.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import torch
from perf_page import add_write_docs, docs_section

from specseed.models.model import (
    TINY_MODEL,
    Eagle3DraftHead,
    KVCache,
    LlamaTarget,
)

PREFILL = list(range(3, 19))


def best_ms(run: Callable[[], None], repeats: int, rounds: int = 5) -> float:
    best = math.inf
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeats):
            run()
        best = min(best, (time.perf_counter() - start) / repeats * 1e3)
    return best


def step_and_rewind(
    model: LlamaTarget | Eagle3DraftHead,
    caches: list[KVCache],
    chunk: list[int],
    state: torch.Tensor | None,
) -> Callable[[], None]:
    """One forward of ``chunk`` for every cache, then back to the prefill length."""

    def run() -> None:
        if isinstance(model, LlamaTarget):
            model.forward([(c, chunk) for c in caches])
        else:
            assert state is not None
            model.forward([(c, chunk, state) for c in caches])
        for c in caches:
            c.truncate(len(PREFILL))

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    add_write_docs(parser)
    args = parser.parse_args()
    target, draft = TINY_MODEL.build(model_seed=0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'model':<8}{'batch':>6}{'tokens':>8}{'ms':>9}{'us/row':>9}")
    for batch in (1, 16):
        target_caches = [target.new_cache() for _ in range(batch)]
        prefill = target.forward([(c, PREFILL) for c in target_caches])
        draft_caches = [draft.new_cache() for _ in range(batch)]
        draft.forward(
            [(c, PREFILL, o.aux_hidden) for c, o in zip(draft_caches, prefill, strict=True)]
        )
        for tokens in (1, 4):
            chunk = list(range(20, 20 + tokens))
            # A 4-token draft chunk is a first step (captured states, fc); 1 token a later step.
            state = prefill[0].aux_hidden[:4] if tokens == 4 else torch.zeros(1, draft.hidden_size)
            runs = (
                ("target", step_and_rewind(target, target_caches, chunk, None)),
                ("draft", step_and_rewind(draft, draft_caches, chunk, state)),
            )
            for name, run in runs:
                ms = best_ms(run, args.repeats)
                print(
                    f"{name:<8}{batch:>6}{tokens:>8}{ms:>9.2f}{ms * 1e3 / (batch * tokens):>9.0f}"
                )

    report_entropy(target)


def report_entropy(target: LlamaTarget) -> None:
    """Entropy of the next-token distribution along sampled sequences (temperature 1)."""
    generator = torch.Generator().manual_seed(0)
    entropies: list[float] = []
    top1: list[float] = []
    for _ in range(16):
        prompt = torch.randint(3, TINY_MODEL.config.vocab_size, (4,), generator=generator).tolist()
        cache = target.new_cache()
        logits = target.forward([(cache, prompt)])[0].logits[-1]
        for _ in range(48):
            probs = torch.softmax(logits, dim=-1)
            entropies.append(float(-(probs * probs.clamp_min(1e-30).log()).sum()))
            top1.append(float(probs.max()))
            token = int(torch.multinomial(probs, 1, generator=generator))
            logits = target.forward([(cache, [token])])[0].logits[-1]
    mean_entropy = sum(entropies) / len(entropies)
    print(
        f"target entropy at T=1: mean {mean_entropy:.2f} nats "
        f"(uniform over {TINY_MODEL.config.vocab_size}: {math.log(TINY_MODEL.config.vocab_size):.2f}), "
        f"perplexity {math.exp(mean_entropy):.1f}, mean top-1 probability {sum(top1) / len(top1):.2f}"
    )


if __name__ == "__main__":
    with docs_section(__file__):
        main()
