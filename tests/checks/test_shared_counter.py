"""Shared-counter contracts (TensorRT-LLM PRs 19505/19601 and the slot-span layout): the
reference engine follows them, and rng-contract fails when the counter hands a window out
twice even though every offset has the stated form."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
from specseed.engine_adapters.contracts import get_contract
from specseed.engine_adapters.reference.adapter import ReferenceEngine
from specseed.engine_adapters.reference.options import ReferenceOptions
from specseed.engine_adapters.trtllm.contracts import TRTLLM_UNSEEDED_OFFSET_BASE
from specseed.run.execute import evaluate
from specseed.scenarios.loader import load_library_scenario
from specseed.traces.records import RunTrace, TraceRecorder

BASE = TRTLLM_UNSEEDED_OFFSET_BASE


@pytest.fixture(scope="module")
def engine() -> ReferenceEngine:
    return ReferenceEngine(EngineSettings())


def _traces(engine: ReferenceEngine, contract: str) -> dict[str, RunTrace]:
    """The library's unseeded scenario, served two at a time after a warmup burst of 3, so
    slots are reused and the warmup advances the shared counter before the scenario."""
    scenario = load_library_scenario("unseeded").scenario
    settings = replace(EngineSettings(), contract=contract, max_num_requests=2)
    traces = {}
    for run in scenario.runs:
        requests = tuple(
            RequestPlan(name, (120, 121, 122), None, 1.3, 0, 1.0, 10) for name in run.requests
        )
        plan = RunPlan(scenario.name, run.name, settings, requests, warmup_batches=(3,))
        traces[run.name] = engine.run(plan, TraceRecorder())
    return traces


@pytest.mark.parametrize("contract", ["trtllm-pr19601", "trtllm-slot-span"])
def test_reference_engine_follows_the_shared_counter(
    engine: ReferenceEngine, contract: str
) -> None:
    traces = _traces(engine, contract)
    layout = get_contract(contract)
    window = layout.window_size(3)
    base = layout.unseeded_offset_base
    first = next(iter(traces.values()))
    # Hand-worked: the warmup burst of 3 unseeded requests runs first, each taking one window
    # per forward pass in batch order; the scenario's first request then starts past them.
    warmup_rows = [r for s in first.steps for r in s.rows if r.phase == "warmup"]
    scenario_rows = [r for s in first.steps for r in s.rows if r.phase == "scenario"]
    first_scenario = scenario_rows[0]
    target = next(e for e in first_scenario.events if e.kind == "target")
    assert target.seed == 42
    assert target.offset == base + len(warmup_rows) * window
    windows = [
        (e.offset - layout.offset(0, e.kind, e.index, 3)) for r in scenario_rows for e in r.events
    ]
    per_row = {(r.request_id, r.decoding_iter) for r in scenario_rows if r.events}
    assert len({w for w in windows}) == len(per_row)  # one window per (request, iteration)
    findings = evaluate(load_library_scenario("unseeded").scenario, traces, contract)
    by_check = {(f.check, f.status) for f in findings}
    assert ("rng-contract", "pass") in by_check
    # What fails is only an upstream bug the layout carries (its authors did not state it),
    # each suspect naming upstream's report or fix: trtllm-pr19601's one-draw slots.
    failing = [f for f in findings if f.status in ("fail", "error")]
    for finding in failing:
        departures = [layout.departure_for(s.defect) for s in finding.suspects]
        assert departures and all(
            d is not None and d.upstream in s.why
            for d, s in zip(departures, finding.suspects, strict=True)
        ), finding
    assert {f.check for f in failing} <= {"draw-ranges-disjoint"}, failing
    assert bool(failing) == bool(layout.departures), failing


def test_a_window_handed_out_twice_fails_rng_contract(engine: ReferenceEngine) -> None:
    traces = _traces(engine, "trtllm-slot-span")
    name, trace = next(iter(traces.items()))
    # Give u2's rows the offsets u1 had at the same iteration: every offset still has the
    # form BASE + k * window + slot, but two requests now share windows.
    u1 = {
        (r.decoding_iter, e.kind, e.index): e.offset
        for _, r in trace.rows_of("u1")
        for e in r.events
    }
    steps = []
    for step in trace.steps:
        rows = tuple(
            replace(
                row,
                events=tuple(
                    replace(e, offset=u1.get((row.decoding_iter, e.kind, e.index), e.offset))
                    for e in row.events
                ),
            )
            if row.request_id == "u2"
            else row
            for row in step.rows
        )
        steps.append(replace(step, rows=rows))
    doctored = replace(trace, steps=tuple(steps))
    findings = evaluate(
        load_library_scenario("unseeded").scenario, {**traces, name: doctored}, "trtllm-slot-span"
    )
    failing = [f for f in findings if f.check == "rng-contract" and f.status == "fail"]
    assert failing and failing[0].runs == (name,)
    assert {"u1", "u2"} <= set(failing[0].requests)
    assert any("handed out more than once" in line for line in failing[0].details)
    assert failing[0].suspects[0].defect == "unseeded-shared-stream"
    assert all(o >= BASE for f in failing for o in (r.offset for r in f.offsets))


def test_unseeded_requests_off_the_shared_counter_are_named(engine: ReferenceEngine) -> None:
    # The defect TensorRT-LLM issue 19487 describes: unseeded requests count their own
    # windows instead of drawing from the shared counter, so they start at offset 0 (below
    # the slot-span base) and share streams.
    scenario = load_library_scenario("unseeded").scenario
    settings = replace(
        EngineSettings(options=ReferenceOptions(defects=["unseeded-shared-stream"])),
        contract="trtllm-slot-span",
    )
    traces = {}
    for run in scenario.runs:
        requests = tuple(
            RequestPlan(name, (120, 121, 122), None, 1.3, 0, 1.0, 6) for name in run.requests
        )
        traces[run.name] = engine.run(
            RunPlan(scenario.name, run.name, settings, requests), TraceRecorder()
        )
    findings = evaluate(scenario, traces, "trtllm-slot-span")
    rng = [f for f in findings if f.check == "rng-contract" and f.status == "fail"]
    assert rng and rng[0].suspects[0].defect == "unseeded-shared-stream"
    assert "no window of the counter" in rng[0].suspects[0].why
