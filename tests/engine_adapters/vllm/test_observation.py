"""The wraps observe without changing what vLLM does, and what they record is consistent."""

from __future__ import annotations

import dataclasses

import pytest

from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
from specseed.traces.records import TraceRecorder

pytestmark = pytest.mark.vllm


def _requests() -> tuple[RequestPlan, ...]:
    def request(rid: str, prompt: tuple[int, ...], seed: int | None, temperature: float):  # type: ignore[no-untyped-def]
        return RequestPlan(rid, prompt, seed, temperature, top_k=0, top_p=1.0, max_tokens=10)

    return (
        request("s1", (12, 40, 7), 11, 0.9),
        request("g", (5, 60, 61, 2), None, 0.0),
        request("s2", (12, 40, 7), 12, 1.2),
    )


def test_wraps_on_and_off_give_the_same_tokens(engine, settings: EngineSettings) -> None:  # type: ignore[no-untyped-def]
    # No speculation: vLLM 0.32.0's CPU rejection sampler reads uninitialised sampling
    # parameters (see test_audit.py), so only this path is deterministic enough to compare.
    # One engine object: vLLM keeps process-wide state, two live LLMs in one process clash.
    from specseed.engine_adapters.vllm.options import VllmOptions

    outputs = {}
    for observe in (True, False):
        options = VllmOptions(observe_rng=observe, reuse_engine=False)
        plain = dataclasses.replace(settings, max_draft_len=0, options=options)
        trace = engine.run(RunPlan("observation", "run", plain, _requests()), TraceRecorder())
        assert not trace.failed, trace.end.failure
        assert trace.header.fresh_engine is True
        assert (trace.header.observability.rng_state is not None) == observe
        events = [e for step in trace.steps for row in step.rows for e in row.events]
        assert bool(events) == observe
        outputs[observe] = trace.end.outputs
    assert outputs[True] == outputs[False]


def test_rows_steps_and_fresh_engine_flags(engine, settings: EngineSettings) -> None:  # type: ignore[no-untyped-def]
    plan = RunPlan("observation", "batch", settings, _requests())
    first = engine.run(plan, TraceRecorder())
    second = engine.run(dataclasses.replace(plan, run="again"), TraceRecorder())
    for trace in (first, second):
        assert not trace.failed, trace.end.failure
        for rid, tokens in trace.end.outputs.items():
            emitted = [t for _s, row in trace.rows_of(rid) for t in row.emitted]
            assert tuple(emitted) == tokens, rid
            assert len(tokens) == 10
        greedy_events = [e for _s, row in trace.rows_of("g") for e in row.events]
        assert greedy_events == []  # greedy rows draw nothing of their own
        seeded = [e for _s, row in trace.rows_of("s1") for e in row.events]
        assert {e.seed for e in seeded} == {11}
    # All requests are seeded or greedy: the second run reuses the engine, and says so.
    assert second.header.fresh_engine is False
    # No token equality is asserted here: in this mixed batch vLLM 0.32.0's CPU build reads
    # uninitialised sampling parameters (docs/vllm.md), greedy rows
    # included, so tokens vary from run to run; the audit tests hold vLLM to that.


def test_unseeded_request_gets_a_fresh_engine_and_the_global_generator(engine, settings) -> None:  # type: ignore[no-untyped-def]
    unseeded = RequestPlan("u", (120, 121, 122), None, 1.0, top_k=0, top_p=1.0, max_tokens=6)
    plan = RunPlan("observation", "unseeded", dataclasses.replace(settings, max_draft_len=0),
                   (unseeded,))  # fmt: skip
    trace = engine.run(plan, TraceRecorder())
    assert not trace.failed, trace.end.failure
    assert trace.header.fresh_engine is True
    events = [e for _s, row in trace.rows_of("u") for e in row.events]
    # Every unseeded event reads the global generator, seeded with the engine seed (0).
    assert events and {e.seed for e in events} == {0}
    offsets = [e.offset for e in events]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
