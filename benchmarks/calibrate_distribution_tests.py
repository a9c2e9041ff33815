"""Calibration of the distribution analysis: its false-alarm rate on exact samples.

    python benchmarks/calibrate_distribution_tests.py [--repeats 1000]

Draws tokens exactly from a known target (a 16-token Markov model: the next token's logits
depend on the previous token; a fresh model per repeat), 200 requests x 12 tokens, half of
the repeats with temperature 0.7, top-k 5 and top-p 0.9, and counts the repeats in which
``analyse`` rejects at alpha = 1e-3 (family-wise over its sub-tests). It also prints the
fraction of single sub-tests with an unadjusted p-value below 0.01 and 0.05 (uniform
p-values give 0.01 and 0.05; the tests are a little conservative where cells are coarse).
This checks the statistics alone, at a scale the engine cannot reach on a CPU in minutes;
``bench_distribution.py --false-alarms`` checks the engine.
"""

from __future__ import annotations

import argparse
import time

import torch

from specseed.distribution.analysis import Sample, analyse
from specseed.distribution.oracle import SamplingSetup, distributions

VOCAB = 16


class MarkovOracle:
    description = "markov"
    vocab_size = VOCAB

    def __init__(self, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.table = torch.randn(VOCAB, VOCAB, generator=generator, dtype=torch.float64) * 1.5

    def logits(self, sequences):  # type: ignore[no-untyped-def]
        return [self.table[torch.tensor([p[-1], *e[:-1]])] for p, e in sequences]


def exact(oracle: MarkovOracle, setup: SamplingSetup, seed: int) -> list[Sample]:
    generator = torch.Generator().manual_seed(10**6 + seed)
    table = distributions(oracle.table, setup)  # row = previous token
    tokens = torch.empty(200, 12, dtype=torch.int64)
    previous = torch.full((200,), 3, dtype=torch.int64)
    for t in range(12):
        previous = torch.multinomial(table[previous], 1, generator=generator).squeeze(1)
        tokens[:, t] = previous
    return [Sample(f"s.{i}", (3,), setup, tuple(row)) for i, row in enumerate(tokens.tolist())]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=1000)
    args = parser.parse_args()
    started = time.perf_counter()
    alarms = 0
    below = {0.01: 0, 0.05: 0}
    tests = 0
    for repeat in range(args.repeats):
        setup = SamplingSetup(1.0, 0, 1.0) if repeat % 2 else SamplingSetup(0.7, 5, 0.9)
        oracle = MarkovOracle(repeat)
        result = analyse(exact(oracle, setup, repeat), oracle, seed_label=str(repeat))
        alarms += bool(result.rejected)
        for test in result.tests:
            if test.name == "impossible":
                continue
            tests += 1
            for level in below:
                below[level] += test.p_value < level
    print(
        f"false alarms: {alarms} of {args.repeats} repeats at alpha 1e-3 "
        f"({time.perf_counter() - started:.0f} s)"
    )
    for level, count in below.items():
        print(f"sub-tests with p < {level}: {count / tests:.4f} of {tests}")


if __name__ == "__main__":
    main()
