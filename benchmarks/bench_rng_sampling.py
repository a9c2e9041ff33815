"""Throughput of specseed's Philox streams and CPU samplers, each beside a reference.

Usage: python benchmarks/bench_rng_sampling.py [--quick]

Prints figures; asserts nothing. References, measured in the same run on the same machine:
numpy's default generator (PCG64 ``random_raw``, counted as two 32-bit words per output) for
raw words, and ``torch.multinomial`` on the same probabilities for the samplers. The samplers do
more than ``torch.multinomial`` (curand-exact streams, flashinfer's rejection rounds), so the
ratio says what exactness costs, not which is better.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch
from perf_page import add_write_docs, docs_section

import specseed.sampling as sampling
from specseed.rng import philox_words


def best_seconds(fn: Callable[[], object], min_time: float, repeats: int = 5) -> float:
    """Best per-call time over ``repeats`` timed batches, each running at least ``min_time``."""
    fn()  # warm-up: first-touch allocations and lazy initialisation
    best = float("inf")
    for _ in range(repeats):
        calls, start = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        best = min(best, elapsed / calls)
    return best


def dyadic_probs(batch: int, vocab: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, vocab, generator=g) * 3
    p = torch.softmax(logits, dim=1)
    counts = torch.floor(p * 65536)
    counts[:, 0] += 65536 - counts.sum(dim=1)
    return counts / 65536


def bench_words(min_time: float, sizes: list[tuple[int, int]]) -> None:
    print(
        "Philox words (specseed.rng.philox_words) vs numpy default_rng().bit_generator.random_raw"
    )
    print(
        f"{'states':>8} {'words/state':>12} {'specseed Mw/s':>14} {'numpy Mw/s':>11} {'ratio':>7}"
    )
    rng = np.random.default_rng(0)
    for states, n in sizes:
        subsequences = torch.arange(states)
        total = states * n
        ours = best_seconds(lambda: philox_words(42, subsequences, 0, n), min_time)  # noqa: B023
        ref = best_seconds(lambda: rng.bit_generator.random_raw((total + 1) // 2), min_time)  # noqa: B023
        print(
            f"{states:>8} {n:>12} {total / ours / 1e6:>14.2f} {total / ref / 1e6:>11.1f} "
            f"{ref / ours:>7.3f}"
        )


def bench_samplers(min_time: float, shapes: list[tuple[int, int]]) -> None:
    print()
    print("CPU samplers, rows/s, vs torch.multinomial(probs, 1) on the same probabilities")
    kernels: dict[str, Callable[..., object]] = {
        "sampling_from_probs": lambda p, s, o: sampling.sampling_from_probs(p, seed=s, offset=o),
        "top_k(50)": lambda p, s, o: sampling.top_k_sampling_from_probs(p, 50, seed=s, offset=o),
        "top_p(0.9)": lambda p, s, o: sampling.top_p_sampling_from_probs(p, 0.9, seed=s, offset=o),
        "top_k_top_p joint": lambda p, s, o: sampling.top_k_top_p_sampling_from_probs(
            p, 50, 0.9, filter_apply_order="joint", seed=s, offset=o
        ),
        "min_p(0.1)": lambda p, s, o: sampling.min_p_sampling_from_probs(p, 0.1, seed=s, offset=o),
    }
    header = f"{'batch':>5} {'vocab':>6} {'multinomial':>12}"
    print(header + "".join(f" {name:>18}" for name in kernels))
    for batch, vocab in shapes:
        probs = dyadic_probs(batch, vocab)
        seeds = torch.arange(batch, dtype=torch.int64) * 7919
        offsets = torch.zeros(batch, dtype=torch.int64)
        ref = best_seconds(lambda: torch.multinomial(probs, 1), min_time)  # noqa: B023
        line = f"{batch:>5} {vocab:>6} {batch / ref:>12.0f}"
        for fn in kernels.values():
            t = best_seconds(lambda fn=fn: fn(probs, seeds, offsets), min_time)  # noqa: B023
            line += f" {batch / t:>10.0f} ({ref / t:>5.2f}x)"
        print(line)

    print()
    print("chain_speculative_sampling, rows/s (K drafts per row)")
    for batch, num_drafts, vocab in [(1, 3, 32000), (16, 3, 32000), (64, 4, 4096), (64, 1, 256)]:
        g = torch.Generator().manual_seed(1)
        target = dyadic_probs(batch * (num_drafts + 1), vocab).reshape(batch, num_drafts + 1, vocab)
        draft = target[:, :num_drafts].roll(1, dims=2).contiguous()
        ids = torch.randint(0, vocab, (batch, num_drafts), generator=g)
        t = best_seconds(
            lambda: sampling.chain_speculative_sampling(
                draft,  # noqa: B023
                ids,  # noqa: B023
                target,  # noqa: B023
                seed=torch.arange(batch, dtype=torch.int64),  # noqa: B023
                offset=torch.zeros(batch, dtype=torch.int64),  # noqa: B023
            ),
            min_time,
        )
        print(f"batch {batch:>3}, K={num_drafts}, vocab {vocab:>6}: {batch / t:>9.0f} rows/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter timings, fewer shapes")
    parser.add_argument(
        "--threads", type=int, default=0, help="torch intra-op threads (0: default)"
    )
    add_write_docs(parser)
    opts = parser.parse_args()
    if opts.threads:
        # On a shared machine one thread gives steadier figures than a contended thread pool.
        torch.set_num_threads(opts.threads)
    min_time = 0.05 if opts.quick else 0.2
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, numpy {np.__version__}")
    print()
    bench_words(
        min_time,
        [(64, 4), (4096, 256)]
        if opts.quick
        else [(1, 4), (64, 4), (64, 64), (4096, 256), (65536, 64)],
    )
    shapes = (
        [(1, 32000), (64, 4096)]
        if opts.quick
        else [(1, 256), (1, 32000), (16, 32000), (64, 256), (64, 4096), (64, 32000)]
    )
    bench_samplers(min_time, shapes)


if __name__ == "__main__":
    with docs_section(__file__):
        main()
