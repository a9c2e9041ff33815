"""The reference engine's decode loop, scheduler and traces (the model is tested beside)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from specseed.core.contracts import UNSEEDED_SEED_BASE
from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
from specseed.engine_adapters.reference.adapter import ReferenceEngine
from specseed.engine_adapters.reference.options import ReferenceOptions
from specseed.traces.records import RunTrace, TraceRecorder, TraceWriter, load_trace


@pytest.fixture(scope="module")
def engine() -> ReferenceEngine:
    return ReferenceEngine(EngineSettings())


def request(rid: str, seed: int | None = 1, **kw: object) -> RequestPlan:
    fields: dict[str, object] = {
        "prompt": (10, 20, 30, 40),
        "temperature": 1.0,
        "top_k": 0,
        "top_p": 1.0,
        "max_tokens": 24,
    }
    fields.update(kw)
    return RequestPlan(request_id=rid, seed=seed, **fields)  # type: ignore[arg-type]


def run(
    engine: ReferenceEngine,
    requests: list[RequestPlan],
    writer: TraceWriter | None = None,
    warmup: tuple[int, ...] = (),
    **settings: object,
) -> RunTrace:
    defects = settings.pop("defects", ())
    plan_settings = replace(
        EngineSettings(options=ReferenceOptions(defects=list(defects))),  # type: ignore[call-overload]
        **settings,  # type: ignore[arg-type]
    )
    plan = RunPlan("test", "run", plan_settings, tuple(requests), warmup_batches=warmup)
    return engine.run(plan, TraceRecorder(writer))


def rows(trace: RunTrace, phase: str = "scenario"):  # type: ignore[no-untyped-def]
    return [r for s in trace.steps for r in s.rows if r.phase == phase]


def test_every_request_gets_its_tokens_and_acceptance_varies(engine: ReferenceEngine) -> None:
    requests = [request(f"s{i}", seed=i, prompt=(5 + i, 9, 13)) for i in range(4)]
    requests += [request(f"g{i}", seed=None, temperature=0.0, prompt=(7 + i, 3)) for i in range(4)]
    trace = run(engine, requests)
    assert not trace.failed
    for r in requests:
        assert len(trace.end.outputs[r.request_id]) == r.max_tokens
    for prefix in ("s", "g"):
        accepted = {
            row.accepted
            for row in rows(trace)
            if row.request_id.startswith(prefix) and row.drafts_verified and not row.discarded
        }
        # zero, partial and full acceptance all occur, greedy and sampled
        assert 0 in accepted and 3 in accepted and accepted & {1, 2}, (prefix, accepted)


def test_emitted_tokens_reassemble_the_output(engine: ReferenceEngine) -> None:
    trace = run(engine, [request("a", seed=5), request("b", seed=None, top_k=5)])
    for rid, tokens in trace.end.outputs.items():
        emitted = [t for _, row in trace.rows_of(rid) for t in row.emitted]
        assert tuple(emitted) == tokens
        positions = [row.first_position for _, row in trace.rows_of(rid) if row.emitted]
        assert positions == sorted(positions) and positions[0] == 0


def test_kernel_draw_counts(engine: ReferenceEngine) -> None:
    trace = run(engine, [request("a", seed=3), request("b", seed=4, top_k=4, top_p=0.9)])
    for row in rows(trace):
        for event in row.events:
            if event.kernel == "chain_speculative_sampling":
                full = row.accepted == 3
                assert event.draws == (4 if full else 5), (row, event)
            elif event.kernel == "sampling_from_probs":
                assert event.draws == 1
            else:
                assert event.kernel == "top_k_top_p_sampling_from_probs"
                assert event.draws >= 1


def test_no_speculation_has_no_drafts(engine: ReferenceEngine) -> None:
    trace = run(engine, [request("a"), request("g", seed=None, temperature=0.0)], max_draft_len=0)
    for row in rows(trace):
        assert row.drafts_proposed == () and row.drafts_verified == ()
        assert all(e.kind == "target" for e in row.events)
        assert len(row.emitted) == 1


def test_strict_verification_samples_every_target_row(engine: ReferenceEngine) -> None:
    trace = run(engine, [request("a", seed=8)], verification="strict")
    decode = [r for r in rows(trace) if r.drafts_verified]
    assert decode
    for row in decode:
        assert sorted(e.index for e in row.events if e.kind == "target") == [0, 1, 2, 3]
        assert not any(e.kind == "accept" for e in row.events)


def test_trace_streams_to_jsonl_and_reads_back(engine: ReferenceEngine, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    trace = run(engine, [request("a"), request("u", seed=None)], TraceWriter(path))
    assert load_trace(path) == trace


def test_continuous_batching_reuses_slots_under_the_limit(engine: ReferenceEngine) -> None:
    requests = [
        replace(request(f"r{i}", seed=i, max_tokens=6 + 2 * i), arrival_step=i) for i in range(5)
    ]
    trace = run(engine, requests, max_num_requests=2)
    assert not trace.failed
    assert max(len(s.rows) for s in trace.steps) <= 2
    assert {row.slot for row in rows(trace)} == {0, 1}
    for r in requests:
        first = next(s.step for s, row in trace.rows_of(r.request_id))
        assert first >= r.arrival_step


def test_warmup_above_max_num_requests_runs_and_its_overflow_crashes(
    engine: ReferenceEngine, tmp_path: Path
) -> None:
    ok = run(engine, [request("a")], max_num_requests=2, warmup=(5,))
    assert not ok.failed
    assert max(len(s.rows) for s in ok.steps if s.phase == "warmup") == 5

    path = tmp_path / "crash.jsonl"
    crashed = run(
        engine,
        [request("a")],
        TraceWriter(path),
        max_num_requests=2,
        defects=("warmup-overflow",),
        warmup=(5,),
    )
    assert crashed.failed
    failure = crashed.end.failure
    assert failure is not None
    assert (failure.phase, failure.batch_size, failure.exception) == ("warmup", 5, "IndexError")
    assert load_trace(path).end.failure == failure  # the crash left its evidence on disk


def test_overlap_scheduler_runs_finished_rows_once_more_and_keeps_tokens(
    engine: ReferenceEngine,
) -> None:
    requests = [
        request("a", seed=1, max_tokens=8),
        replace(request("b", seed=2, max_tokens=20), arrival_step=2),
        request("g", seed=None, temperature=0.0, max_tokens=12),
    ]
    off = run(engine, requests)
    on = run(engine, requests, overlap_scheduler=True)
    assert on.end.outputs == off.end.outputs
    assert any(row.discarded for row in rows(on))
    assert not any(row.discarded for row in rows(off))


def test_unseeded_requests_get_seeds_of_their_own_under_ideal(engine: ReferenceEngine) -> None:
    trace = run(engine, [request("u1", seed=None), request("u2", seed=None)])
    seeds = {row.request_id: {e.seed for e in row.events} for row in rows(trace) if row.events}
    assert seeds["u1"] == {UNSEEDED_SEED_BASE} and seeds["u2"] == {UNSEEDED_SEED_BASE + 1}


def test_negative_seed_is_its_uint64_bit_pattern(engine: ReferenceEngine) -> None:
    negative = run(engine, [request("a", seed=-4)])
    unsigned = run(engine, [request("a", seed=(1 << 64) - 4)])
    assert negative.end.outputs == unsigned.end.outputs
    assert {e.seed for r in rows(negative) for e in r.events} == {(1 << 64) - 4}


def test_prompt_outside_the_vocabulary_is_refused_before_running(engine: ReferenceEngine) -> None:
    bad = request("a", prompt=(1, 10**6))
    plan = RunPlan("test", "run", EngineSettings(), (request("ok"), bad))
    (problem,) = engine.validate(plan)
    assert "test/run: request a: prompt token ids [1000000]" in problem
    assert "outside the vocabulary (size 512)" in problem
    # Served anyway (the runner never does), it is a recorded failure, not an exception.
    trace = engine.run(plan, TraceRecorder())
    assert trace.end.failure is not None and "outside the vocabulary" in trace.end.failure.message
