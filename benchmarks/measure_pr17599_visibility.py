"""Is the trtllm-pr17599 layout's draw sharing visible in the output distribution?

    python benchmarks/measure_pr17599_visibility.py [--copies 150 300 512] [--draft-lens 1 3]
        [--slots N]

Serves N seeded copies of one request (temperature 1, 16 tokens) on the reference engine
following ``trtllm-pr17599`` (and, as the control, ``ideal``), in a single batch (or through
``--slots`` slots: continuous batching), then runs the distribution analysis on the tokens
and their recorded steps and prints the three smallest Holm-adjusted p-values with their
sub-tests, and the smallest of the step-aware sub-tests (``distribution/steps.py``: the
pairs the trace says shared a draw). One batch keeps each request on the same kernel row in
the accept and draft calls (subsequence = kernel row), where the layout's shared draws land
on the same Philox stream; with continuous batching, prefill rows shift the draft call's
rows and part of the sharing disappears (the trace shows which pairs still share).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from specseed.distribution.analysis import Sample, analyse
from specseed.distribution.oracle import SamplingSetup, oracle_for
from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
from specseed.engine_adapters.reference.adapter import ReferenceEngine
from specseed.engine_adapters.reference.options import ReferenceOptions
from specseed.traces.records import TraceRecorder

PROMPT = (31, 7, 88, 14)


def measure(profile: str, draft_len: int, copies: int, slots: int | None) -> None:
    settings = replace(
        EngineSettings(options=ReferenceOptions(rng_profile=profile)),
        max_draft_len=draft_len,
        max_num_requests=slots or copies,
    )
    engine = ReferenceEngine(settings)
    requests = tuple(RequestPlan(f"s.{i}", PROMPT, 11 + i, 1.0, 0, 1.0, 16) for i in range(copies))
    started = time.perf_counter()
    trace = engine.run(RunPlan("pr17599", "one-batch", settings, requests), TraceRecorder(None))
    iterations = [r.accepted for s in trace.steps for r in s.rows if r.drafts_verified]
    all_accepted = sum(a == draft_len for a in iterations) / max(1, len(iterations))
    samples = [
        Sample(
            r.request_id,
            PROMPT,
            SamplingSetup(1.0, 0, 1.0),
            trace.end.outputs[r.request_id],
            tuple(row for _, row in trace.rows_of(r.request_id)),
        )
        for r in trace.header.requests
    ]
    result = analyse(samples, oracle_for(trace.header.engine_config), seed_label=profile)
    worst = sorted(result.tests, key=lambda t: t.adjusted_p)[:3]
    step = [t for t in result.tests if t.name.startswith("steps[")]
    if step:
        worst.append(min(step, key=lambda t: t.adjusted_p))
    verdict = "REJECT" if result.rejected else "pass"
    print(
        f"{profile:15s} K={draft_len} copies={copies} slots={slots or copies}: {verdict}; "
        f"{len(result.tests)} sub-tests ({len(step)} step-aware); all-accepted iterations "
        f"{all_accepted:.2f}; {time.perf_counter() - started:.0f} s"
    )
    for test in worst:
        print(f"    {test.name}: adjusted p {test.adjusted_p:.2g} ({test.note})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, nargs="+", default=[150, 300, 512])
    parser.add_argument("--draft-lens", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--slots", type=int, default=None, help="max_num_requests")
    args = parser.parse_args()
    for draft_len in args.draft_lens:
        for copies in args.copies:
            for profile in ("trtllm-pr17599", "ideal"):
                measure(profile, draft_len, copies, args.slots)


if __name__ == "__main__":
    main()
