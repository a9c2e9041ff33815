"""An engine that does not take a knob (issue 37 on main's knobs): a knob it refuses outright
(``TrafficLimits.refused_knobs``) is never drawn for it, and a run it refuses at serve time
(``KnobRefused``) makes the case refused: not judged, never a pass, noted at the end.

The engine is the reference engine with one knob refused each way, as an engine that lacks
them would (TensorRT-LLM refuses stop strings; a server answers 400 to a field it lacks)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specseed.engine_adapters.base import KnobRefused, RunPlan, TrafficLimits
from specseed.engine_adapters.reference.adapter import ReferenceEngine
from specseed.plan.planning import base_settings
from specseed.plan.resolve import resolve_audit
from specseed.scenarios.schema import AuditConfig
from specseed.traces.records import TraceRecorder
from specseed.workflows.outputs import AuditOutputs
from specseed.workflows.search import Search

CASES = 12


class RefusingEngine(ReferenceEngine):
    """Says it takes no stop strings; refuses a run that asks for log-probabilities."""

    def traffic_limits(self) -> TrafficLimits:
        limits = super().traffic_limits()
        return TrafficLimits(
            limits.vocab_size, limits.context_length, refused_knobs=frozenset({"stop"})
        )

    def serves_side_by_side(self) -> bool:
        return False

    def serve(self, plan: RunPlan, recorder: TraceRecorder) -> dict[str, tuple[int, ...]]:
        if any(r.logprobs is not None for r in plan.requests):
            raise KnobRefused("logprobs: this engine reports no log-probabilities")
        return super().serve(plan, recorder)


@pytest.fixture(scope="module")
def engine() -> Iterator[RefusingEngine]:
    adapter = RefusingEngine(base_settings(AuditConfig(), Path.cwd()))
    yield adapter
    adapter.close()


def test_refused_knobs_are_neither_drawn_nor_judged(engine: RefusingEngine) -> None:
    resolved = resolve_audit({}, scenarios=False)
    outcome = Search(
        resolved,
        AuditOutputs(),
        budget=3600,
        seed=1,
        max_scenarios=CASES,
        max_tokens=4,
        statistical=False,
        adapter=engine,
    ).run()
    result = outcome.result
    assert outcome.exit_code == 0 and not result.candidates
    assert result.scenarios_run == CASES
    # Cases that asked for log-probabilities were refused, and the refusal is noted.
    assert result.refused >= 1
    assert any("refused a sampling knob" in note for note in result.notes), result.notes
    knobs = result.coverage.counts["knobs"]
    # Judged cases: none sent stop strings (never drawn) nor logprobs (refused).
    assert "stop" not in knobs and "logprobs" not in knobs, knobs
    assert {"min_p", "n"} & set(knobs), knobs  # the knobs it takes were drawn
