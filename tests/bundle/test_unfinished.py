"""A bundle whose audit did not finish is never a pass: ``check`` does not exit 0 and says
first what it could not judge; ``report`` says the audit was interrupted, by the manifest's
signal, and vouches for nothing it did not judge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specseed.plan.resolve import resolve_audit
from specseed.run.results import AuditEvent, RunStarted
from specseed.scenarios.schema import AuditConfig
from specseed.workflows.audit import Audit
from specseed.workflows.outputs import AuditOutputs
from tests.bundle.common import invoke


@pytest.fixture(scope="module")
def cut(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An audit of two scenarios stopped by Ctrl-C before any scenario finished."""
    root = tmp_path_factory.mktemp("cut") / "b"

    def interrupt(event: AuditEvent) -> None:
        if isinstance(event, RunStarted):
            raise KeyboardInterrupt  # as Ctrl-C would, in the first run

    resolved = resolve_audit(AuditConfig(scenarios=["distinct-seeds", "uptime"]))
    outcome = Audit(resolved, AuditOutputs(bundle=root), on_event=interrupt).run()
    assert outcome.exit_code == 130
    return root


def test_check_of_an_interrupted_bundle_exits_130_and_says_first_what_it_did_not_judge(
    cut: Path,
) -> None:
    result = invoke("check", str(cut))
    assert result.exit_code == 130, result.output
    first = " ".join(result.output.splitlines()[0:2])
    assert first.startswith("NOT JUDGED: the audit was interrupted by SIGINT"), result.output
    text = " ".join(result.output.split())
    assert "before 2 of 2 scenarios finished" in text
    assert "(exit 130)" in text and "(exit 0)" not in text and "PASS" not in text


def test_report_of_an_interrupted_bundle_vouches_for_nothing(cut: Path) -> None:
    result = invoke("report", str(cut), "--no-minimize")
    assert result.exit_code == 0, result.output
    assert "every invariant holds" not in result.output
    assert "found no violation" not in result.output
    text = " ".join(result.output.split())
    assert (
        "the audit was interrupted by SIGINT before 2 of 2 scenarios finished; "
        "nothing below vouches for them" in text
    )
    data = json.loads(invoke("report", str(cut), "--no-minimize", "-f", "json").output)
    assert data["verdict"] == "unfinished"


def test_the_signal_named_is_the_manifests(cut: Path, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "b"
    shutil.copytree(cut, root)
    manifest = json.loads((root / "manifest.json").read_text())
    (root / "manifest.json").write_text(
        json.dumps({**manifest, "status": "interrupted by SIGTERM", "exit_code": 143})
    )
    result = invoke("check", str(root))
    assert result.exit_code == 143 and "SIGINT" not in result.output, result.output
    assert "interrupted by SIGTERM" in " ".join(result.output.split())


def test_a_bundle_still_running_or_crashed_is_exit_5(cut: Path, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "b"
    shutil.copytree(cut, root)
    manifest = json.loads((root / "manifest.json").read_text())
    for key in ("verdict", "exit_code", "seconds"):
        manifest.pop(key, None)
    (root / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}))
    result = invoke("check", str(root))
    assert result.exit_code == 5, result.output
    assert result.output.startswith("NOT JUDGED: the audit stopped"), result.output
    report = invoke("report", str(root), "--no-minimize")
    assert "every invariant holds" not in report.output
    assert "found no violation" not in report.output
