"""rng-contract and draw-ranges-disjoint under a sequential contract (``vllm-generators``).

Synthetic traces, no engine: a seeded request's events on its own generator, one after the
other, pass; a draw from another generator, a rewind, or a skipped stretch fails, each on the
field it breaks (the checks must be able to fail on the defects they target).
"""

from __future__ import annotations

from specseed.run.execute import evaluate
from specseed.scenarios.loader import parse_scenario
from specseed.traces.records import (
    EngineConfigRecord,
    Observability,
    RequestInfo,
    RowRecord,
    RunEnd,
    RunHeader,
    RunTrace,
    SamplingEvent,
    StepRecord,
)

SCENARIO = parse_scenario(
    """\
name: sequential
description: one seeded request
covers: []
requests:
  s: {prompt: [1, 2, 3], seed: 77, temperature: 1.0, max_tokens: 3}
runs:
  - name: run
    requests: [s]
""",
    "sequential.yaml",
)


def _trace(events_per_step: list[list[tuple[str, int, int, int]]]) -> RunTrace:
    """events: (kind, seed, offset, draws) per step, one row of request ``s``."""
    steps = []
    for step, events in enumerate(events_per_step):
        row = RowRecord(
            request_id="s",
            row=0,
            slot=0,
            phase="scenario",
            decoding_iter=step,
            drafts_verified=(),
            accepted=0,
            emitted=(step,),
            first_position=step,
            logits_fingerprints=(),
            drafts_proposed=(),
            events=tuple(
                SamplingEvent(kind, 0, "f", 0, seed, 0, offset, draws)  # type: ignore[arg-type]
                for kind, seed, offset, draws in events
            ),
        )
        steps.append(StepRecord(step=step, phase="scenario", rows=(row,)))
    header = RunHeader(
        scenario="sequential",
        run="run",
        engine="test",
        engine_config=EngineConfigRecord(max_draft_len=3),
        contract="vllm-generators",
        requests=(RequestInfo("s", "scenario", (1, 2, 3), 77, 1.0, 0, 1.0, 3, 0),),
        observability=Observability(steps=True, rng_state="generator", drafts=True, logits=False),
    )
    outputs = {"s": tuple(range(len(events_per_step)))}
    return RunTrace(header=header, steps=tuple(steps), end=RunEnd(outputs=outputs))


def _status(trace: RunTrace, check: str) -> tuple[str, set[str]]:
    (finding,) = [
        f for f in evaluate(SCENARIO, {"run": trace}, "vllm-generators") if f.check == check
    ]
    fields = {m for row in finding.offsets for m in row.mismatch}
    return finding.status, fields


GOOD = [
    [("target", 77, 0, 2)],
    [("target", 77, 2, 2), ("accept", 77, 4, 6), ("accept", 77, 10, 1024)],
    [("target", 77, 1034, 2)],
]


def test_sequential_draws_on_the_request_generator_pass() -> None:
    assert _status(_trace(GOOD), "rng-contract") == ("pass", set())
    assert _status(_trace(GOOD), "draw-ranges-disjoint")[0] == "pass"


def test_a_draw_from_the_global_generator_fails_on_its_seed_only() -> None:
    events = [GOOD[0], [("draft", 0, 5000, 1024), *GOOD[1]], GOOD[2]]
    assert _status(_trace(events), "rng-contract") == ("fail", {"seed"})


def test_a_rewind_fails_on_the_offset_and_on_overlapping_draws() -> None:
    events = [GOOD[0], [("target", 77, 0, 2), ("accept", 77, 2, 6)]]
    assert _status(_trace(events), "rng-contract") == ("fail", {"offset"})
    assert _status(_trace(events), "draw-ranges-disjoint")[0] == "fail"


def test_draws_outside_the_observed_calls_fail_on_the_offset() -> None:
    events = [GOOD[0], [("target", 77, 6, 2)]]  # 4 words consumed somewhere unobserved
    assert _status(_trace(events), "rng-contract") == ("fail", {"offset"})
