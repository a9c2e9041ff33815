"""The adapter lifecycle owned by the base class, the runner's guard, and what a trace says
about what the engine exposed."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from typer.testing import CliRunner

from specseed.cli.app import app
from specseed.engine_adapters.base import EngineAdapter, EngineSettings, RequestPlan, RunPlan
from specseed.run.execute import evaluate, run_guarded
from specseed.scenarios.loader import load_library_scenario
from specseed.traces.records import (
    FULL_OBSERVABILITY,
    TOKENS_ONLY,
    EngineConfigRecord,
    RowRecord,
    StepRecord,
    TraceRecorder,
    TraceWriter,
    load_trace,
)


class Crashing(EngineAdapter):
    """Serves one step, then raises: the base class must record it, not propagate it."""

    name = "crashing"
    observability = FULL_OBSERVABILITY

    def encode(self, prompt: tuple[int, ...] | str) -> tuple[int, ...]:
        return tuple(prompt) if not isinstance(prompt, str) else (1,)

    def environment(self) -> dict[str, str]:
        return {"engine": self.name}

    def serve(self, plan: RunPlan, recorder: TraceRecorder) -> Mapping[str, tuple[int, ...]]:
        recorder.at(0, "scenario", 2)
        rows = tuple(
            RowRecord(r.request_id, i, i, "scenario", 0, (), 0, (5, 6), 0, ("f", "f"), (), ())
            for i, r in enumerate(plan.requests)
        )
        recorder.step(StepRecord(0, "scenario", rows))
        recorder.at(1, "scenario", 2)
        raise RuntimeError("device lost")


class RaisesAnyway(Crashing):
    """An adapter that bypasses the lifecycle and raises out of ``run``."""

    def run(self, plan: RunPlan, recorder: TraceRecorder):  # type: ignore[no-untyped-def]
        from specseed.traces.records import RunHeader

        recorder.header(
            RunHeader(plan.scenario, plan.run, self.name, EngineConfigRecord(), "ideal", ())
        )
        recorder.at(3, "warmup", 9)
        raise MemoryError("out of memory")


class ClaimsRngButRecordsNone(Crashing):
    name = "claims-rng"

    def serve(self, plan: RunPlan, recorder: TraceRecorder) -> Mapping[str, tuple[int, ...]]:
        return {r.request_id: tuple(range(r.max_tokens)) for r in plan.requests}


def _plan(warmup: tuple[int, ...] = ()) -> RunPlan:
    requests = tuple(RequestPlan(f"r{i}", (1, 2), i + 1, 1.0, 0, 1.0, 4) for i in range(2))
    return RunPlan("s", "run", EngineSettings(), requests, warmup_batches=warmup)


def test_an_exception_in_serve_becomes_the_recorded_failure(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    trace = Crashing(EngineSettings()).run(_plan(), TraceRecorder(TraceWriter(path)))
    failure = trace.end.failure
    assert failure is not None
    assert (failure.step, failure.phase, failure.batch_size) == (1, "scenario", 2)
    assert (failure.exception, failure.message) == ("RuntimeError", "device lost")
    assert trace.end.outputs == {"r0": (5, 6), "r1": (5, 6)}  # what was emitted before it
    assert load_trace(path) == trace  # header, step and end are on disk


def test_the_runner_guards_an_adapter_that_raises_anyway(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    trace = run_guarded(RaisesAnyway(EngineSettings()), _plan(), TraceRecorder(TraceWriter(path)))
    assert trace.end.failure is not None
    assert (trace.end.failure.step, trace.end.failure.exception) == (3, "MemoryError")
    assert load_trace(path).end == trace.end  # the file was ended and closed


def test_the_header_types_warmup_traffic_and_says_what_was_observed(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    Crashing(EngineSettings()).run(_plan(warmup=(3, 1)), TraceRecorder(TraceWriter(path)))
    header = load_trace(path).header
    assert header.observability == FULL_OBSERVABILITY and header.fresh_engine
    assert header.warmup_batches == (3, 1)
    warmup = [r for r in header.requests if r.phase == "warmup"]
    assert [r.warmup_batch for r in warmup] == [0, 0, 0, 1]


def test_rng_checks_never_pass_without_recorded_events() -> None:
    scenario = load_library_scenario("distinct-seeds").scenario
    traces = {}
    for run in scenario.runs:
        requests = tuple(
            RequestPlan(name, (1, 2), scenario.resolved_request(name).seed, 1.0, 0, 1.0, 8)
            for name in run.requests
        )
        plan = RunPlan(scenario.name, run.name, EngineSettings(), requests)
        traces[run.name] = ClaimsRngButRecordsNone(EngineSettings()).run(plan, TraceRecorder())
    findings = evaluate(scenario, traces, "ideal")
    by_check = {f.check: f for f in findings}
    assert by_check["rng-contract"].status == "error"
    assert "observation is broken" in by_check["rng-contract"].message
    for check in ("draw-ranges-disjoint", "distinct-seeds"):
        assert by_check[check].status == "skip", by_check[check]
    assert not [f for f in findings if f.status == "pass" and f.check != "runs-complete"]


def test_tokens_only_engines_skip_rng_checks_with_the_reason() -> None:
    assert TOKENS_ONLY.missing(("steps", "rng-state")) == ["steps", "rng-state"]
    assert FULL_OBSERVABILITY.missing(("steps", "rng-state", "logits")) == []


def test_input_the_engine_refuses_is_exit_2_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(
        "name: s\ndescription: d\nrequests:\n  a: {prompt: [1, 2], seed: 1}\n"
        "  b: {prompt: [1, 1000000], seed: 2}\nruns:\n  - {name: one, requests: [a]}\n"
        "  - {name: two, requests: [a, b]}\n"
    )
    (tmp_path / "model.yaml").write_text("scenarios: [s.yaml]\n")
    traces = tmp_path / "traces"
    result = CliRunner().invoke(
        app, ["audit", str(tmp_path / "model.yaml"), "--trace-dir", str(traces)]
    )
    assert result.exit_code == 2, result.output
    assert (
        "s/two: request b: prompt token ids [1000000] are outside the vocabulary" in result.output
    )
    assert not list(traces.rglob("*.jsonl"))  # run "one" did not run either


def test_diffs_never_blame_the_sampler_on_evidence_the_engine_hid() -> None:
    from dataclasses import replace

    from specseed.checks.trace_evidence import stream_diff

    plan = _plan()
    left = ClaimsRngButRecordsNone(EngineSettings()).run(plan, TraceRecorder())
    changed = replace(left.end, outputs={**left.end.outputs, "r0": (0, 1, 9, 3)})
    right = replace(left, end=changed)
    # The engine claims everything but recorded nothing: equal (empty) evidence on both sides
    # reads as "sampler" ...
    assert stream_diff(left, right, "r0").attribution == "sampler"  # type: ignore[union-attr]
    # ... but an engine that exposes neither RNG state nor logits gets no such verdict.
    hidden = replace(left.header, observability=TOKENS_ONLY)
    diff = stream_diff(replace(left, header=hidden), replace(right, header=hidden), "r0")
    assert diff is not None and diff.attribution == "tokens-only" and diff.position == 2


def test_a_request_keeps_its_fields_from_scenario_to_trace() -> None:
    from dataclasses import fields

    from specseed.scenarios.schema import ResolvedRequest
    from specseed.traces.records import REQUEST_SAMPLING, RequestInfo

    # One chain: the trace's request is the plan's with its prompt encoded, and the plan's
    # sampling fields are the scenario's, by name.
    planned = {f.name for f in fields(RequestPlan)}
    assert {f.name for f in fields(RequestInfo)} - {"prompt_ids"} <= planned
    assert set(REQUEST_SAMPLING) <= planned & set(ResolvedRequest.model_fields)
    request = RequestPlan("r", "text", 7, 0.5, 3, 0.9, 4, arrival_step=2, phase="prior")
    assert request.received((1, 2)) == RequestInfo("r", "prior", (1, 2), 7, 0.5, 3, 0.9, 4, 2)
