"""A scenario's runs served side by side (``lockstep``) record exactly what each records
alone, in fewer forward calls, and a run that fails side by side fails alone."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
from specseed.engine_adapters.reference.adapter import ReferenceEngine
from specseed.engine_adapters.reference.options import ReferenceOptions
from specseed.plan.planning import plan_audit
from specseed.scenarios.schema import AuditConfig, EngineConfig
from specseed.traces.records import RunTrace, TraceRecorder


@pytest.fixture(scope="module")
def engine() -> ReferenceEngine:
    return ReferenceEngine(EngineSettings())


@pytest.fixture
def forwards(engine: ReferenceEngine, monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Forward calls per model while the test runs."""
    calls: Counter[str] = Counter()
    for name, model in (("target", engine.target), ("draft", engine.draft)):
        real = model.forward

        def counted(chunks, real=real, name=name):  # type: ignore[no-untyped-def]
            calls[name] += 1
            return real(chunks)

        monkeypatch.setattr(model, "forward", counted)
    yield calls


def _plans(scenario: str, defects: list[str] | None = None) -> list[RunPlan]:
    config = AuditConfig(
        engine=EngineConfig(options={"defects": defects or []}), scenarios=[scenario]
    )
    [planned] = plan_audit(config, Path.cwd())
    return list(planned.plans)


def _alone(engine: ReferenceEngine, plans: list[RunPlan]) -> list[RunTrace]:
    return [engine.run(plan, TraceRecorder()) for plan in plans]


def _together(engine: ReferenceEngine, plans: list[RunPlan]) -> list[RunTrace]:
    return engine.run_all([(plan, TraceRecorder()) for plan in plans])


def _failure(trace: RunTrace) -> object:
    failure = trace.end.failure
    return None if failure is None else replace(failure, traceback="")  # frames differ


def _same_runs(a: RunTrace, b: RunTrace) -> None:
    assert a.header == b.header
    assert a.steps == b.steps  # every row, token, logits fingerprint and RNG event
    assert (a.end.outputs, _failure(a)) == (b.end.outputs, _failure(b))


@pytest.mark.parametrize(
    ("scenario", "defects"),
    [
        ("continuous-batching", None),  # arrivals, two slot counts, strict verification
        ("overlap-scheduler", ["overlap-window-reuse"]),  # results applied a step late
        ("uptime", None),  # prior traffic before the scenario's requests
        ("greedy-speculation", None),  # K = 0 beside K = 3, 72 tokens
    ],
)
def test_runs_side_by_side_record_what_they_record_alone_in_fewer_forwards(
    engine: ReferenceEngine, forwards: Counter[str], scenario: str, defects: list[str] | None
) -> None:
    plans = _plans(scenario, defects)
    alone = _alone(engine, plans)
    calls_alone = sum(forwards.values())
    forwards.clear()
    together = _together(engine, plans)
    assert sum(forwards.values()) < calls_alone
    for a, b in zip(alone, together, strict=True):
        _same_runs(a, b)


def test_a_run_that_crashes_side_by_side_crashes_alone(engine: ReferenceEngine) -> None:
    # warmup-overflow: the warmup batch above max_num_requests overruns the RNG buffers.
    plans = _plans("warmup", ["warmup-overflow"])
    alone, together = _alone(engine, plans), _together(engine, plans)
    assert [t.failed for t in together] == [False, True]
    for a, b in zip(alone, together, strict=True):
        _same_runs(a, b)


def test_a_forward_that_raises_reaches_only_the_run_whose_chunk_raised_it(
    engine: ReferenceEngine,
) -> None:
    # The second run's prompt outgrows the KV capacity: the merged prefill raises, and is
    # answered again call by call so that the first run never notices.
    settings = EngineSettings(options=ReferenceOptions())
    capacity = engine.target.max_seq_len
    fits = RequestPlan("a", (10, 20, 30), 3, 1.0, 0, 1.0, 24)
    outgrows = replace(fits, request_id="b", prompt=(7,) * (capacity + 1))
    plans = [
        RunPlan("lockstep", "fits", settings, (fits,)),
        RunPlan("lockstep", "outgrows", settings, (outgrows,)),
    ]
    alone, together = _alone(engine, plans), _together(engine, plans)
    failure = together[1].end.failure
    assert failure is not None and "exceed the KV capacity" in failure.message
    assert not together[0].failed
    _same_runs(alone[0], together[0])
    assert together[1].steps == alone[1].steps


def test_runs_side_by_side_hold_no_more_requests_at_once_than_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Three runs of 4 requests in 4 slots under a budget of 8 requests: two side by side,
    # then the third, so no more than 8 KV caches are live at once (the pool starts with 8
    # slots and doubles when a ninth is asked for). 256 runs of 4,096-request warmup batches
    # would otherwise all be held together.
    from specseed.engine_adapters.reference import adapter as engine_module

    monkeypatch.setattr(engine_module, "SIDE_BY_SIDE_REQUESTS", 8)
    fresh = ReferenceEngine(EngineSettings())
    settings = EngineSettings(max_num_requests=4, options=ReferenceOptions())
    requests = tuple(RequestPlan(f"r{i}", (10 + i, 20), i, 1.0, 0, 1.0, 6) for i in range(4))
    plans = [RunPlan("budget", f"run{n}", settings, requests) for n in range(3)]
    assert engine_module.side_by_side_groups(plans) == [[0, 1], [2]]
    together = _together(fresh, plans)
    assert fresh.target._pool.num_slots == 8
    for a, b in zip(_alone(fresh, plans), together, strict=True):
        _same_runs(a, b)
