"""Outputs of an audit that are not the report itself: progress lines for CI logs, and a
trace folder that cannot be written (a file where a scenario's folder should be)."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from specseed.cli.app import app

runner = CliRunner()


def test_progress_lines_when_stderr_is_not_a_terminal() -> None:
    result = runner.invoke(app, ["audit", "-s", "distinct-seeds"])
    assert result.exit_code == 0, result.output
    assert "specseed: auditing engine reference: 1 scenario, 1 run" in result.stderr
    # The progress line counts what the report then says.
    passed = re.search(r"^PASS: (\d+) pass \(exit 0\)$", result.stdout, re.M)
    assert passed, result.stdout
    assert f"specseed: [1/1] distinct-seeds: 1 run, {passed[1]} pass, 0 fail (" in result.stderr
    assert "specseed:" not in result.stdout


def test_no_progress_silences_them() -> None:
    result = runner.invoke(app, ["audit", "--no-progress", "-s", "distinct-seeds"])
    assert result.exit_code == 0, result.output
    assert "specseed:" not in result.stderr


def test_unwritable_bundle_folder_is_refused_before_anything_runs(tmp_path: Path) -> None:
    traces, report = tmp_path / "traces", tmp_path / "r.json"
    # An earlier bundle in the folder (replaced with --force), then a file where
    # a scenario's folder goes. (A trace file that fails mid-run: tests/cli/test_reliability.)
    first = runner.invoke(
        app, ["audit", "--no-progress", "-s", "warmup", "--trace-dir", str(traces)]
    )
    assert first.exit_code == 0, first.output
    (traces / "distinct-seeds").write_text("a file where the scenario's folder goes\n")
    result = runner.invoke(
        app,
        ["audit", "--no-progress", "-s", "distinct-seeds", "-s", "warmup",
         "--trace-dir", str(traces), "--json", str(report), "--force"],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert f"cannot write the bundle in {traces}" in result.output
    assert "Traceback" not in result.output and not report.exists()
