"""Reference engine throughput and audit wall time on the CPU, measured side by side.

    python benchmarks/bench_engine.py [--rounds N] [--matrix]

Prints, for the built-in tiny model:

1. generated tokens per second at batch 1 and batch 16, K = 3 (rejection sampling, sampled
   requests at temperature 0.8 and greedy ones) beside the same engine with max_draft_len 0,
   and the ratio;
2. the wall time of the full built-in audit (every scenario, every check) and, with
   ``--matrix``, of the detection matrix (one audit per defect class).

Figures are the best of ``--rounds`` (the machine may be shared); nothing is asserted.
"""

from __future__ import annotations

import argparse
import platform
import time
from dataclasses import replace
from pathlib import Path

import torch
from perf_page import add_write_docs, docs_section

from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
from specseed.engine_adapters.reference.adapter import ReferenceEngine
from specseed.plan.planning import plan_audit
from specseed.run.execute import run_audit
from specseed.scenarios.schema import AuditConfig
from specseed.traces.records import TraceRecorder
from specseed.workflows.matrix import run_matrix

MAX_TOKENS = 64


def requests(batch: int, greedy: bool) -> tuple[RequestPlan, ...]:
    return tuple(
        RequestPlan(
            request_id=f"r{i}",
            prompt=tuple((7 * i + j) % 500 + 1 for j in range(12)),
            seed=None if greedy else 1000 + i,
            temperature=0.0 if greedy else 0.8,
            top_k=0,
            top_p=1.0,
            max_tokens=MAX_TOKENS,
        )
        for i in range(batch)
    )


def tokens_per_second(
    engine: ReferenceEngine, batch: int, draft_len: int, greedy: bool, rounds: int
) -> tuple[float, float]:
    """Best tokens/s over ``rounds`` runs, and the mean tokens per iteration."""
    settings = replace(EngineSettings(), max_draft_len=draft_len, max_num_requests=max(batch, 1))
    plan = RunPlan("bench", "bench", settings, requests(batch, greedy))
    best = 0.0
    per_iteration = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        trace = engine.run(plan, TraceRecorder())
        elapsed = time.perf_counter() - start
        tokens = sum(len(t) for t in trace.end.outputs.values())
        best = max(best, tokens / elapsed)
        rows = [r for s in trace.steps for r in s.rows if not r.discarded and r.emitted]
        per_iteration = tokens / len(rows)
    return best, per_iteration


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--matrix", action="store_true", help="also time the detection matrix")
    add_write_docs(parser)
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, torch {torch.__version__}"
    )
    engine = ReferenceEngine(EngineSettings())

    print(f"\ntokens/s, {MAX_TOKENS} tokens per request (best of {args.rounds})")
    header = f"{'requests':>10} {'batch':>6} {'K=3 tok/s':>10} {'tok/iter':>9} {'K=0 tok/s':>10} {'K=3 / K=0':>10}"
    print(header)
    for greedy in (False, True):
        for batch in (1, 16):
            spec, per_iter = tokens_per_second(engine, batch, 3, greedy, args.rounds)
            plain, _ = tokens_per_second(engine, batch, 0, greedy, args.rounds)
            kind = "greedy" if greedy else "sampled"
            print(
                f"{kind:>10} {batch:>6} {spec:>10.0f} {per_iter:>9.2f} {plain:>10.0f} {spec / plain:>10.2f}"
            )

    config = AuditConfig()
    planned = plan_audit(config, Path.cwd())
    runs = sum(len(p.plans) for p in planned)
    best = float("inf")
    for _ in range(args.rounds):
        start = time.perf_counter()
        result = run_audit(config, planned, Path.cwd(), adapter=engine)
        best = min(best, time.perf_counter() - start)
    tokens = sum(
        len(t)
        for s in result.scenarios
        for trace in s.traces.values()
        for t in trace.end.outputs.values()
    )
    print(
        f"\nfull built-in audit: {len(planned)} scenarios, {runs} runs, {tokens} scenario tokens, "
        f"{len(result.findings)} findings, verdict {result.verdict}: {best:.2f} s (best of {args.rounds})"
    )
    if args.matrix:
        start = time.perf_counter()
        matrix = run_matrix(config, Path.cwd())
        elapsed = time.perf_counter() - start
        caught = sum(row.caught for row in matrix.rows[1:])
        print(
            f"detection matrix: {len(matrix.rows)} audits ({caught} of {len(matrix.rows) - 1} "
            f"defects caught): {elapsed:.2f} s, {elapsed / len(matrix.rows):.2f} s per audit"
        )


if __name__ == "__main__":
    with docs_section(__file__):
        main()
