"""The ``Audit`` object run directly, without the CLI: the events it emits (the last one
``AuditFinished``), its exit decision, and its refusals before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from specseed.core.errors import InputError
from specseed.plan.resolve import resolve_audit
from specseed.run.results import (
    AuditEvent,
    AuditFinished,
    AuditSkipped,
    AuditStarted,
    OutputFailed,
    RunFinished,
    RunStarted,
    ScenarioChecked,
)
from specseed.scenarios.schema import AuditConfig, EngineConfig
from specseed.workflows.audit import Audit, AuditOutcome
from specseed.workflows.exit_codes import EXIT_OK, EXIT_OUTPUT, EXIT_VIOLATION
from specseed.workflows.outputs import AuditOutputs

SCENARIO = "batch-position"


def config(defects: list[str] | None = None) -> AuditConfig:
    return AuditConfig(
        engine=EngineConfig(options={"defects": defects or []}), scenarios=[SCENARIO]
    )


def run(
    audit_config: AuditConfig, outputs: AuditOutputs | None = None
) -> tuple[AuditOutcome, list[AuditEvent]]:
    events: list[AuditEvent] = []
    audit = Audit(resolve_audit(audit_config, base_dir=Path.cwd()), outputs, on_event=events.append)
    return audit.run(), events


def test_a_passing_audit_emits_its_progress_and_ends_with_its_result() -> None:
    outcome, events = run(config())
    assert outcome.exit_code == EXIT_OK
    assert outcome.result is not None and outcome.result.verdict == "pass"
    assert isinstance(events[0], AuditStarted) and events[0].scenarios == 1
    kinds = [type(e) for e in events]
    assert RunStarted in kinds and RunFinished in kinds
    assert kinds[-2:] == [ScenarioChecked, AuditFinished]
    last = events[-1]
    assert isinstance(last, AuditFinished)
    assert last.result is outcome.result and last.exit_code == EXIT_OK and last.bundle is None


def test_an_injected_defect_is_a_violation() -> None:
    outcome, events = run(config(["row0-seed"]))
    assert outcome.exit_code == EXIT_VIOLATION
    assert outcome.result is not None and outcome.result.verdict == "fail"
    last = events[-1]
    assert isinstance(last, AuditFinished) and last.exit_code == EXIT_VIOLATION
    assert not any(isinstance(e, OutputFailed) for e in events)


def test_an_unwritable_report_is_an_event_and_exit_5(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    report = folder / "r.json"
    events: list[AuditEvent] = []

    def on_event(event: AuditEvent) -> None:
        events.append(event)
        if isinstance(event, ScenarioChecked):  # the folder checked at the start goes away
            folder.rmdir()
            folder.write_text("")

    audit = Audit(
        resolve_audit(config(), base_dir=Path.cwd()), AuditOutputs(json=report), on_event=on_event
    )
    outcome = audit.run()
    assert outcome.exit_code == EXIT_OUTPUT
    assert outcome.result is not None and outcome.result.verdict == "pass"
    failed = [e for e in events if isinstance(e, OutputFailed)]
    assert len(failed) == 1 and f"cannot write the JSON report to {report}" in failed[0].message
    assert [type(e) for e in events[-2:]] == [OutputFailed, AuditFinished]
    last = events[-1]
    assert isinstance(last, AuditFinished) and last.exit_code == EXIT_OUTPUT


def test_an_unwritable_report_is_refused_before_anything_runs(tmp_path: Path) -> None:
    events: list[AuditEvent] = []
    folder = tmp_path / "a-file"
    folder.write_text("")
    audit = Audit(
        resolve_audit(config(), base_dir=Path.cwd()),
        AuditOutputs(json=folder / "r.json"),
        on_event=events.append,
    )
    with pytest.raises(InputError, match=r"cannot write the JSON report .* is not a folder"):
        audit.run()
    assert events == []


def test_an_unknown_scenario_is_refused_with_the_cli_text() -> None:
    audit = Audit(resolve_audit(config(), base_dir=Path.cwd()), AuditOutputs(scenarios=("nope",)))
    with pytest.raises(
        InputError, match="--scenario nope: no such scenario in this audit or the built-in library"
    ):
        audit.run()


def test_an_empty_shard_runs_nothing_and_says_so() -> None:
    events: list[AuditEvent] = []
    audit = Audit(
        resolve_audit(config(), base_dir=Path.cwd()),
        AuditOutputs(shard=(2, 2)),
        on_event=events.append,
    )
    outcome = audit.run()
    assert outcome == AuditOutcome(None, EXIT_OK)
    assert [type(e) for e in events] == [AuditSkipped, AuditFinished]


def test_a_given_engine_is_used_instead_of_loading_one() -> None:
    from specseed.plan.planning import base_settings
    from specseed.run.execute import create_adapter

    audit_config = config()
    adapter = create_adapter(base_settings(audit_config, Path.cwd()))
    served: list[str] = []
    start_run = adapter.start_run  # every run starts here, alone or side by side

    def counting(plan):  # type: ignore[no-untyped-def]
        served.append(plan.run)
        return start_run(plan)

    adapter.start_run = counting  # type: ignore[method-assign]
    audit = Audit(resolve_audit(audit_config, base_dir=Path.cwd()), adapter=adapter)
    assert audit.run().exit_code == EXIT_OK
    assert served


def test_an_engine_given_serves_one_process() -> None:
    with pytest.raises(InputError, match="one process"):
        Audit(resolve_audit(config(), base_dir=Path.cwd()), AuditOutputs(jobs=2), adapter=object())  # type: ignore[arg-type]
