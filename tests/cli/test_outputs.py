"""Outputs of an audit that are not the report itself: progress lines for CI logs, and a
trace folder that cannot be written (a file where a scenario's folder should be)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from specseed.cli.app import app

runner = CliRunner()


def test_progress_lines_when_stderr_is_not_a_terminal() -> None:
    result = runner.invoke(app, ["audit", "-s", "distinct-seeds"])
    assert result.exit_code == 0, result.output
    assert "specseed: auditing engine reference: 1 scenario, 1 run" in result.stderr
    assert "specseed: [1/1] distinct-seeds: 1 run, 4 pass, 0 fail (" in result.stderr
    assert "specseed:" not in result.stdout


def test_no_progress_silences_them() -> None:
    result = runner.invoke(app, ["audit", "--no-progress", "-s", "distinct-seeds"])
    assert result.exit_code == 0, result.output
    assert "specseed:" not in result.stderr


def test_unwritable_trace_folder_is_missing_evidence_not_an_engine_crash(tmp_path: Path) -> None:
    traces, report = tmp_path / "traces", tmp_path / "r.json"
    traces.mkdir()
    (traces / "distinct-seeds").write_text("a file where the scenario's folder goes\n")
    result = runner.invoke(
        app,
        ["audit", "--no-progress", "-s", "distinct-seeds", "-s", "warmup",
         "--trace-dir", str(traces), "--json", str(report)],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 4, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    trace = traces / "distinct-seeds" / "together.jsonl"
    assert (
        f"Missing evidence: {trace}: cannot create the folder {trace.parent}: File exists; the file holds 0 of "
        in result.stderr
    )
    data = json.loads(report.read_text())
    assert data["verdict"] == "pass"
    seeds = [f for f in data["findings"] if f["scenario"] == "distinct-seeds"]
    assert [f["status"] for f in seeds] == ["pass"] * 4  # runs-complete too: not a crash
    assert len(data["missing_evidence"]) == 1
    # The other scenario's evidence is whole.
    assert (traces / "warmup").is_dir() and list((traces / "warmup").glob("*.jsonl"))
