"""The ``sampler-params`` check (issue 19): what the sampler received against what was asked.

Inputs are a recorded reference trace with each row's ``applied`` record set: as the vLLM
adapter writes it (the vLLM end-to-end path is exercised in tests/engine_adapters/vllm).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from specseed.checks.context import CheckContext
from specseed.checks.sampler_params import sampler_params
from specseed.engine_adapters.contracts import get_contract
from specseed.scenarios.schema import Scenario
from specseed.traces.records import AppliedSampling, RunTrace, load_trace, read_trace

TRACE = Path(__file__).parents[1] / "data" / "traces" / "overlap-window-reuse" / "overlap-on.jsonl"


def _with_applied(trace: RunTrace, temperature: float | None) -> RunTrace:
    steps = []
    for step in trace.steps:
        rows = []
        for row in step.rows:
            info = trace.request(row.request_id)
            # vLLM expands a greedy row's temperature 0 to 1 (replace_to) before dividing.
            t = (info.temperature or 1.0) if temperature is None else temperature
            rows.append(replace(row, applied=AppliedSampling("apply_sampling_constraints", (t, t))))
        steps.append(replace(step, rows=tuple(rows)))
    return replace(trace, steps=tuple(steps))


def _run(trace: RunTrace) -> list:
    ctx = CheckContext(
        Scenario.model_construct(name="s"), {trace.name: trace}, get_contract("ideal")
    )
    return list(sampler_params(ctx, trace))


def test_parameters_as_asked_pass_and_corrupted_ones_fail_naming_them() -> None:
    trace = load_trace(TRACE)
    sampled = [r for r in trace.header.requests if r.phase == "scenario" and r.temperature > 0]
    assert sampled
    [ok] = _run(_with_applied(trace, None))
    assert ok.status == "pass"
    [bad] = _run(_with_applied(trace, 2.7e-36))
    assert bad.status == "fail"
    assert "asked temperature 1, the sampler applied 2.7e-36" in bad.message
    assert not bad.suspects  # no catalogue defect is stretched onto it


def test_an_engine_that_does_not_expose_the_sampler_inputs_gets_no_finding() -> None:
    assert _run(load_trace(TRACE)) == []


def test_the_applied_record_round_trips_and_old_lines_stay_as_they_were() -> None:
    from specseed.traces.records import _record_line

    trace = load_trace(TRACE)
    assert '"applied"' not in _record_line("step", trace.steps[0])
    changed = _with_applied(trace, 0.5)
    line = _record_line("step", changed.steps[0])
    header = _record_line("header", trace.header)
    end = _record_line("end", trace.end)
    again = read_trace([header, line, end])
    assert again.steps[0].rows[0].applied == changed.steps[0].rows[0].applied
