"""The bundle stage under signals and read-only folders: SIGHUP ends an audit (``--jobs``
workers included) as SIGINT and SIGTERM do, in the recorded interrupted state; a signal while
the bundle is created leaves a bundle ``check`` reads (interrupted), never a half-made one;
``report`` on a read-only bundle still writes its report, carrying the minimal scenario it
could not store."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from specseed.bundle import format as bundle_format
from specseed.cli.interrupts import InterruptGuard
from specseed.plan.resolve import resolve_audit
from specseed.run.results import AuditEvent, RunStarted
from specseed.workflows.audit import Audit
from specseed.workflows.outputs import AuditOutputs
from tests.bundle.common import SCENARIO, invoke

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")


@pytest.fixture
def model(tmp_path: Path) -> Path:
    (tmp_path / "mine.yaml").write_text(SCENARIO)
    path = tmp_path / "model.yaml"
    path.write_text("engine: {options: {defects: [row0-seed]}}\nscenarios: [mine.yaml]\n")
    return path


def _status(bundle: Path) -> str:
    return str(json.loads((bundle / "manifest.json").read_text())["status"])


def test_sighup_ends_an_audit_as_an_interrupt_the_bundle_records(
    model: Path, tmp_path: Path
) -> None:
    bundle = tmp_path / "b"

    def hang_up(event: AuditEvent) -> None:
        if isinstance(event, RunStarted):
            signal.raise_signal(signal.SIGHUP)  # the terminal went away

    outcome = Audit(resolve_audit(model), AuditOutputs(bundle=bundle), on_event=hang_up).run(
        interrupts=InterruptGuard
    )
    assert outcome.exit_code == 129
    assert _status(bundle) == "interrupted by SIGHUP"
    check = invoke("check", str(bundle))
    assert check.exit_code == 129 and "interrupted by SIGHUP" in check.output


def test_sighup_to_jobs_workers_and_parent_ends_in_the_recorded_state(
    model: Path, tmp_path: Path
) -> None:
    bundle = tmp_path / "b"
    sent: list[int] = []

    def hang_up(event: AuditEvent) -> None:
        if isinstance(event, RunStarted) and not sent:
            # A hangup reaches the whole process group: every worker, then the parent.
            for child in multiprocessing.active_children():
                if child.pid is not None:
                    os.kill(child.pid, signal.SIGHUP)
                    sent.append(child.pid)
            signal.raise_signal(signal.SIGHUP)

    (tmp_path / "again.yaml").write_text(SCENARIO.replace("name: mine", "name: again"))
    model.write_text(model.read_text().replace("[mine.yaml]", "[mine.yaml, again.yaml]"))
    outputs = AuditOutputs(bundle=bundle, jobs=2)
    outcome = Audit(resolve_audit(model), outputs, on_event=hang_up).run(interrupts=InterruptGuard)
    assert sent, "no worker to hang up on"
    assert outcome.exit_code == 129
    assert _status(bundle) == "interrupted by SIGHUP"  # not "running", read as a crash


def test_a_signal_while_the_bundle_is_created_leaves_an_interrupted_bundle(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "b"
    environment = bundle_format.host_environment

    def terminated() -> dict[str, str]:
        # Between the manifest and the last file the bundle starts with.
        signal.raise_signal(signal.SIGTERM)
        return environment()

    monkeypatch.setattr(bundle_format, "host_environment", terminated)
    outcome = Audit(resolve_audit(model), AuditOutputs(bundle=bundle)).run(
        interrupts=InterruptGuard
    )
    assert outcome.exit_code == 143
    assert _status(bundle) == "interrupted by SIGTERM"
    monkeypatch.undo()
    check = invoke("check", str(bundle))
    assert check.exit_code == 143, check.output  # read, and not judged: never refused
    assert "interrupted by SIGTERM" in check.output


@contextmanager
def read_only_copy(bundle: Path, where: Path) -> Iterator[Path]:
    """``bundle`` copied onto a small tmpfs mounted read-only (skipped where no mount)."""
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        shutil.copytree(bundle, where / "b")
        subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
        yield where / "b"
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_report_on_a_read_only_bundle_writes_the_report_with_its_minimal_scenario(
    model: Path, tmp_path: Path
) -> None:
    recorded = tmp_path / "b"
    audit = invoke("audit", str(model), "--no-progress", "--summary", "--bundle", str(recorded))
    assert audit.exit_code == 1, audit.output
    with read_only_copy(recorded, tmp_path / "ro") as bundle:
        report = invoke("report", str(bundle))
        assert report.exit_code == 0, report.output
        text = " ".join(report.output.split())
        assert "is read-only: the minimal scenario of mine" in text
        assert "Minimized by `specseed minimize`" in report.output  # in the body
        assert not (bundle / "mine" / "minimal.yaml").exists()
        minimize = invoke("minimize", str(bundle))
        assert minimize.exit_code == 2 and "read-only" in minimize.output
