"""Audits served side by side on one engine (the detection matrix in one process): each
audit's result is the one it gets alone, and each hears only its own events."""

from __future__ import annotations

from pathlib import Path

import pytest

from specseed.core.errors import AuditInterrupted
from specseed.plan.planning import PlannedScenario, base_settings, plan_audit
from specseed.run.execute import create_adapter, run_audit, run_audits_side_by_side
from specseed.run.matrix import SIDE_BY_SIDE_AUDITS, matrix_groups
from specseed.run.results import AuditEvent, AuditStarted, RunStarted, ScenarioChecked
from specseed.scenarios.schema import AuditConfig, EngineConfig

pytestmark = pytest.mark.slow

SCENARIOS = ["distinct-seeds", "greedy-speculation", "uptime"]
DEFECTS: list[list[str]] = [[], ["row0-seed"], ["greedy-drift"], ["engine-counter"]]


def _audit(defects: list[str]) -> tuple[AuditConfig, list[PlannedScenario]]:
    config = AuditConfig(engine=EngineConfig(options={"defects": defects}), scenarios=SCENARIOS)
    return config, plan_audit(config, Path.cwd())


def test_each_audit_gets_the_result_it_gets_alone() -> None:
    audits = [_audit(defects) for defects in DEFECTS]
    engine = create_adapter(base_settings(audits[0][0], Path.cwd()))
    heard: list[list[AuditEvent]] = [[] for _ in audits]
    try:
        together = run_audits_side_by_side(
            audits, engine, on_event=[events.append for events in heard]
        )
        alone = [
            run_audit(config, planned, Path.cwd(), adapter=engine) for config, planned in audits
        ]
    finally:
        engine.close()
    verdicts = []
    for (config, planned), mine, reference, events in zip(
        audits, together, alone, heard, strict=True
    ):
        assert mine.config == config
        assert mine.findings == reference.findings
        for a, b in zip(mine.scenarios, reference.scenarios, strict=True):
            for name, trace in a.traces.items():
                assert trace.header == b.traces[name].header
                assert trace.end.outputs == b.traces[name].end.outputs
        # Its own events only, in the order an audit alone emits them.
        assert isinstance(events[0], AuditStarted)
        runs = [(e.scenario, e.run) for e in events if isinstance(e, RunStarted)]
        assert runs == [(p.scenario, p.run) for item in planned for p in item.plans]
        checked = [e.result for e in events if isinstance(e, ScenarioChecked)]
        assert [r.scenario.name for r in checked] == SCENARIOS
        assert [r.findings for r in checked] == [r.findings for r in mine.scenarios]
        verdicts.append(mine.verdict)
    assert verdicts == ["pass", "fail", "fail", "fail"]  # each defect shows in its own audit


def test_audits_of_other_scenarios_or_an_engine_that_cannot_are_refused() -> None:
    config, planned = _audit([])
    engine = create_adapter(base_settings(config, Path.cwd()))
    try:
        with pytest.raises(ValueError, match="same scenarios"):
            run_audits_side_by_side([(config, planned), (config, planned[:1])], engine)
        engine.serves_side_by_side = lambda: False  # type: ignore[method-assign]
        with pytest.raises(ValueError, match="side by side"):
            run_audits_side_by_side([(config, planned)], engine)
    finally:
        engine.close()


def test_an_interrupt_goes_on_up_as_audit_interrupted() -> None:
    config, planned = _audit([])

    def interrupt(event: AuditEvent) -> None:
        if isinstance(event, RunStarted) and event.scenario == "greedy-speculation":
            raise KeyboardInterrupt

    engine = create_adapter(base_settings(config, Path.cwd()))
    try:
        with pytest.raises(AuditInterrupted):
            run_audits_side_by_side([(config, planned)], engine, on_event=[interrupt])
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("count", "workers", "sizes"),
    [
        (14, 1, [5, 5, 4]),
        (14, 2, [4, 4, 3, 3]),
        (14, 4, [4, 4, 3, 3]),
        (14, 8, [2, 2, 2, 2, 2, 2, 1, 1]),
        (3, 2, [2, 1]),
        (1, 4, [1]),
        (0, 2, []),
    ],
)
def test_matrix_groups_cut_the_audits_in_order_evenly_per_worker(
    count: int, workers: int, sizes: list[int]
) -> None:
    audits: list[str | None] = [None, *(f"d{i}" for i in range(1, count))][:count]
    groups = matrix_groups(audits, workers)
    assert [len(g) for g in groups] == sizes
    assert [a for g in groups for a in g] == audits  # all, in order, none twice
    assert all(len(g) <= SIDE_BY_SIDE_AUDITS for g in groups)


def test_audits_whose_runs_hold_many_requests_are_served_one_at_a_time() -> None:
    # Memory: the 300-request distribution run of each audit goes alone (as in one audit),
    # while the small scenarios of several audits go together.
    from specseed.run.execute import AUDITS_HELD_TOGETHER, _held_together, _ScenarioServing

    def servings(scenario: str) -> list[_ScenarioServing]:
        config = AuditConfig(scenarios=[scenario])
        item = plan_audit(config, Path.cwd())[0]
        return [_ScenarioServing(item, None, lambda _e: None, None) for _ in range(5)]

    assert [len(g) for g in _held_together(servings("distribution"))] == [1, 1, 1, 1, 1]
    assert [len(g) for g in _held_together(servings("losslessness"))] == [5]
    assert AUDITS_HELD_TOGETHER < 2 * 300
