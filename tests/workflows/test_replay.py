"""``Replay`` on the shared workflow base: what it gains by construction (the ``--bundle``
folder's lock, the interrupt guard, the engine log in the bundle), through the object and
through ``specseed replay``."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

from specseed.bundle.format import read_bundle
from specseed.cli.interrupts import InterruptGuard
from specseed.run.results import AuditEvent, AuditFinished, RunStarted
from specseed.workflows.engine_log import ENGINE_LOG
from specseed.workflows.outputs import AuditOutputs
from specseed.workflows.replay import Replay
from tests.bundle.common import SCENARIO, invoke


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle of a passing audit of a small scenario on the reference engine."""
    root = tmp_path_factory.mktemp("recorded")
    (root / "mine.yaml").write_text(SCENARIO)
    model = root / "model.yaml"
    model.write_text("scenarios: [mine.yaml]\n")
    result = invoke("audit", str(model), "--no-progress", "--summary", "--bundle", str(root / "b"))
    assert result.exit_code == 0, result.output
    return root / "b"


def test_replay_bundle_writes_the_engine_log(recorded: Path, tmp_path: Path) -> None:
    out = tmp_path / "replayed"
    result = invoke("replay", str(recorded), "--bundle", str(out))
    assert result.exit_code == 0, result.output
    assert "SAME" in result.output
    assert (out / ENGINE_LOG).is_file()
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"


def test_a_folder_a_replay_holds_refuses_a_second_replay_and_an_audit(
    recorded: Path, tmp_path: Path
) -> None:
    out = tmp_path / "held"
    refused: dict[str, object] = {}

    def meanwhile(event: AuditEvent) -> None:
        if isinstance(event, RunStarted) and not refused:
            # --force passes the check for an earlier bundle: the lock is what refuses them.
            again = invoke("replay", str(recorded), "--bundle", str(out), "--force")
            audit = invoke("audit", str(recorded / "model.yaml"), "--bundle", str(out), "--force")
            refused.update(replay=again, audit=audit)

    outcome = Replay(recorded, AuditOutputs(bundle=out), on_event=meanwhile).run()
    assert outcome.exit_code == 0
    for name in ("replay", "audit"):
        second = refused[name]
        assert second.exit_code == 2, second.output  # type: ignore[attr-defined]
        text = " ".join(second.output.split())  # type: ignore[attr-defined]
        assert "is in use by another audit" in text and "Traceback" not in text
    assert read_bundle(out).complete  # the first replay's bundle, untouched


def test_an_interrupt_during_replay_exits_130_and_the_bundle_says_so(
    recorded: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cut"
    events: list[AuditEvent] = []

    def interrupt(event: AuditEvent) -> None:
        events.append(event)
        if isinstance(event, RunStarted):
            signal.raise_signal(signal.SIGINT)  # as Ctrl-C would, in the first run

    outcome = Replay(recorded, AuditOutputs(bundle=out), on_event=interrupt).run(
        interrupts=InterruptGuard
    )
    assert outcome.exit_code == 130
    assert outcome.result is not None and outcome.result.audit.interrupted == "SIGINT"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "interrupted by SIGINT" and manifest["exit_code"] == 130
    last = events[-1]
    assert isinstance(last, AuditFinished) and last.exit_code == 130


def test_a_replay_exits_with_the_code_its_last_line_prints(tmp_path: Path) -> None:
    """The replay of a failing audit reproduces the recording: the replay's audit fails, so
    the command exits 1 (it exited 0 while printing "(exit 1)"), and its last line says why."""
    (tmp_path / "mine.yaml").write_text(SCENARIO)
    model = tmp_path / "model.yaml"
    model.write_text("engine: {options: {defects: [row0-seed]}}\nscenarios: [mine.yaml]\n")
    failing = tmp_path / "b"
    audit = invoke("audit", str(model), "--no-progress", "--summary", "--bundle", str(failing))
    assert audit.exit_code == 1, audit.output
    result = invoke("replay", str(failing))
    assert result.exit_code == 1, result.output
    printed = re.findall(r"\(exit (\d+)\)", result.output)
    assert printed and {int(code) for code in printed} == {1}, result.output
    last = " ".join(result.output.strip().splitlines()[-1].split())
    assert last.startswith("replay: FAIL"), result.output
    assert "the audit fails" in last and "reproduces the recording" in last


def test_a_passing_replay_that_reproduces_the_recording_exits_0(recorded: Path) -> None:
    result = invoke("replay", str(recorded))
    assert result.exit_code == 0, result.output
    assert set(re.findall(r"\(exit (\d+)\)", result.output)) == {"0"}, result.output
