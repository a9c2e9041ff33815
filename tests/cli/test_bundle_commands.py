"""The bundle commands end to end through CliRunner, on a user's own scenario: ``audit
--bundle`` (and ``--trace-dir``, the same layout), ``minimize``, ``report`` using the
minimized scenario, ``replay`` with the recording's engine and with another."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from specseed.cli.app import app
from specseed.scenarios.loader import parse_scenario

runner = CliRunner()

SCENARIO = """\
# a user's own scenario: comments and all must reach the bundle
name: mine
description: A seeded probe must not change with its neighbours' seeds.
requests:
  probe: {prompt: [17, 29, 111, 5], seed: 2024, max_tokens: 8}
  other: {prompt: [8, 1, 64], seed: 5, max_tokens: 8}
  third: {prompt: [8, 1, 65], seed: 7, max_tokens: 8}
runs:
  - {name: alone, requests: [probe]}
  - {name: neighbour, requests: [other, probe]}
  - {name: neighbours, requests: [other, third, probe]}
expect:
  - {check: batch-invariance, runs: [alone, neighbour, neighbours], requests: [probe]}
"""


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), env={"COLUMNS": "80"})


def test_audit_bundle_minimize_report_replay(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(SCENARIO)
    defective = tmp_path / "model.yaml"
    defective.write_text("engine:\n  options:\n    defects: [row0-seed]\nscenarios: [mine.yaml]\n")
    bundle = tmp_path / "bug"
    audit = invoke("audit", str(defective), "--no-progress", "--bundle", str(bundle))
    assert audit.exit_code == 1, audit.output
    assert audit.output.index("Root causes (1)") < audit.output.index("FAIL batch-invariance")
    assert max(len(line) for line in audit.output.splitlines()) <= 80
    assert (bundle / "mine" / "scenario.yaml").read_text() == SCENARIO
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["exit_code"] == 1
    assert manifest["command"].startswith("specseed ")

    # --trace-dir writes the same layout.
    traces = tmp_path / "traces"
    again = invoke(
        "audit", str(defective), "--no-progress", "--summary", "--trace-dir", str(traces)
    )
    assert again.exit_code == 1 and "first diverges" not in again.output
    assert sorted(p.name for p in traces.iterdir()) == sorted(p.name for p in bundle.iterdir())

    shrink = invoke("minimize", str(bundle))
    assert shrink.exit_code == 0, shrink.output
    minimal = parse_scenario((bundle / "mine" / "minimal.yaml").read_text(), "minimal.yaml")
    assert len(minimal.requests) <= 2 and "probe" in minimal.requests
    report = invoke("report", str(bundle))
    assert report.exit_code == 0, report.output
    assert "### Minimal reproduction" in report.output
    assert "Minimized by `specseed minimize`" in report.output
    assert "row0-seed" in report.output.splitlines()[0]

    same = invoke("replay", str(bundle))
    assert same.exit_code == 1, same.output  # it reproduces the recording: the audit fails
    assert "SAME" in same.output
    assert "the audit fails and the replay reproduces the recording (exit 1)" in " ".join(
        same.output.split()
    )
    clean = tmp_path / "clean.yaml"
    clean.write_text("scenarios: [builtin]\n")  # its scenarios are ignored: the bundle's run
    fixed = invoke("replay", str(bundle), "--model", str(clean))
    assert fixed.exit_code == 1, fixed.output
    assert "mine" in fixed.output and "diverged at token" in fixed.output


def test_minimize_help_states_the_cost() -> None:
    result = invoke("minimize", "--help")
    assert result.exit_code == 0
    assert "Cost" in result.output and "--max-audits" in result.output


def test_check_rejects_an_unknown_contract(tmp_path: Path) -> None:
    result = invoke("check", str(tmp_path), "--contract", "nope")
    assert result.exit_code == 2  # not a bundle: refused before the contract matters
    assert "Traceback" not in result.output
