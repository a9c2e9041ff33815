"""Calibration of the distribution analysis: its false-alarm rate on exact samples.

    python benchmarks/calibrate_distribution_tests.py [--repeats 1000] [--step-repeats 500]
        [--coupled 50]

Draws tokens exactly from a known target (a 16-token Markov model: the next token's logits
depend on the previous token; a fresh model per repeat), 200 requests x 12 tokens, half of
the repeats with temperature 0.7, top-k 5 and top-p 0.9, and counts the repeats in which
``analyse`` rejects at alpha = 1e-3 (family-wise over its sub-tests). It also prints the
fraction of single sub-tests with an unadjusted p-value below 0.01 and 0.05 (uniform
p-values give 0.01 and 0.05; the tests are a little conservative where cells are coarse).
This checks the statistics alone, at a scale the engine cannot reach on a CPU in minutes;
``bench_distribution.py --false-alarms`` checks the engine.

The step-aware sub-tests (``distribution/steps.py``) need step records: each repeat also
serves 200 requests x 12 tokens of a fresh Markov target through the pure-Python speculative
sampler (``distribution/simulation.py``; K = 1 and K = 3 alternately), with a trace laid out
in one-draw slots (the overlaps of ``trtllm-pr17599``, so every shared class is selected) but
fresh draws for every event (lossless), and runs the whole analysis on it: the false alarms
of the full family, step-aware tests included, and the p-value fractions of the step-aware
sub-tests alone. ``--coupled N`` adds N repeats with the draws shared as the layout says
(the coupling): the fraction rejected is the power at that size.
"""

from __future__ import annotations

import argparse
import math
import random
import time

import torch

from specseed.distribution.analysis import Sample, analyse
from specseed.distribution.oracle import SamplingSetup, distributions
from specseed.distribution.simulation import markov_tables, simulate_group

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


class TableOracle:
    """Next-token logits = log of a probability table row per previous token."""

    description = "markov table"
    vocab_size = VOCAB

    def __init__(self, table: list[list[float]]) -> None:
        self.table = torch.tensor([[math.log(p) for p in row] for row in table])

    def logits(self, sequences):  # type: ignore[no-untyped-def]
        return [self.table[torch.tensor([p[-1], *e[:-1]])] for p, e in sequences]


def speculative(repeat: int, share: bool) -> tuple[list[Sample], TableOracle]:
    rng = random.Random(2 * 10**6 + repeat)
    target, draft = markov_tables(VOCAB, rng)
    tokens, _, rows = simulate_group(
        target,
        draft,
        requests=200,
        length=12,
        k=1 if repeat % 2 else 3,
        rng=rng,
        layout="one-draw-slots",
        share=share,
    )
    setup = SamplingSetup(1.0, 0, 1.0)
    samples = [
        Sample(f"s.{i}", (3,), setup, t, r)
        for i, (t, r) in enumerate(zip(tokens, rows, strict=True))
    ]
    return samples, TableOracle(target)


def calibrate_steps(repeats: int, coupled: int) -> None:
    started = time.perf_counter()
    alarms = 0
    below = {0.01: 0, 0.05: 0}
    tests = 0
    smallest = 1.0
    for repeat in range(repeats):
        samples, oracle = speculative(repeat, share=False)
        result = analyse(samples, oracle, seed_label=f"steps/{repeat}")
        alarms += bool(result.rejected)
        smallest = min(smallest, min(t.adjusted_p for t in result.tests))
        for test in result.tests:
            if not test.name.startswith("steps["):
                continue
            tests += 1
            for level in below:
                below[level] += test.p_value < level
    print(
        f"step structures (lossless speculative sampler, one-draw-slot trace): false alarms "
        f"{alarms} of {repeats} repeats at alpha 1e-3, smallest adjusted p {smallest:.2g} "
        f"({time.perf_counter() - started:.0f} s)"
    )
    for level, count in below.items():
        print(f"step-aware sub-tests with p < {level}: {count / max(1, tests):.4f} of {tests}")
    if coupled:
        found = 0
        by_step = 0
        for repeat in range(coupled):
            samples, oracle = speculative(repeat, share=True)
            result = analyse(samples, oracle, seed_label=f"coupled/{repeat}")
            found += bool(result.rejected)
            by_step += any(t.name.startswith("steps[") for _, t in result.rejected)
        print(
            f"shared draws (K = 1 and 3 alternately): rejected in {found} of {coupled}, by a "
            f"step-aware sub-test in {by_step}"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=1000)
    parser.add_argument("--step-repeats", type=int, default=500)
    parser.add_argument("--coupled", type=int, default=50)
    args = parser.parse_args()
    calibrate_steps(args.step_repeats, args.coupled)
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
        print(f"sub-tests with p < {level}: {count / max(1, tests):.4f} of {tests}")


if __name__ == "__main__":
    main()
