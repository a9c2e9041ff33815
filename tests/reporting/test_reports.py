"""Reporters on recorded traces: the console report against a golden file, JSON and JUnit.

The traces in tests/data/traces were recorded by the reference engine with the
``overlap-window-reuse`` defect on the ``overlap-scheduler`` scenario. Checks are pure
functions of traces, so this report is the same on every machine, whatever its floating
point. Regenerate the golden file with SPECSEED_UPDATE_GOLDEN=1 after an intended change to
the report, and read the diff.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from specseed.reporting.console import render_report
from specseed.reporting.json_report import render_json
from specseed.reporting.junit import render_junit
from specseed.results import AuditResult, ScenarioResult
from specseed.runner import evaluate
from specseed.scenarios.loader import load_library_scenario
from specseed.scenarios.schema import AuditConfig, EngineConfig
from specseed.trace import load_trace

DATA = Path(__file__).parent.parent / "data"
TRACES = DATA / "traces" / "overlap-window-reuse"
GOLDEN = DATA / "golden" / "overlap-window-reuse.txt"


@pytest.fixture(scope="module")
def result() -> AuditResult:
    scenario = load_library_scenario("overlap-scheduler").scenario
    traces = {p.stem: load_trace(p) for p in sorted(TRACES.glob("*.jsonl"))}
    findings = evaluate(scenario, traces, "ideal")
    config = AuditConfig(
        engine=EngineConfig(options={"defects": ["overlap-window-reuse"]}),
        scenarios=["overlap-scheduler"],
    )
    return AuditResult(
        config=config,
        contract="ideal",
        scenarios=(
            ScenarioResult(scenario, "builtin:overlap-scheduler", traces, tuple(findings), 0.0),
        ),
        environment={"specseed": "test"},
        seconds=0.0,
        command="specseed audit model.yaml",
    )


def test_console_report_matches_golden(result: AuditResult) -> None:
    console = Console(width=130, record=True, color_system=None, force_terminal=False)
    render_report(result, console, exit_code=1)
    text = "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"
    if os.environ.get("SPECSEED_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_report_shows_suspect_first_divergence_and_offsets(result: AuditResult) -> None:
    console = Console(width=130, record=True, color_system=None, force_terminal=False)
    render_report(result, console, exit_code=1)
    text = console.export_text()
    assert "overlap-window-reuse" in text
    assert "first diverges at token" in text and "RNG state differs" in text
    assert "RNG state per event vs the contract" in text
    assert text.rstrip().endswith("(exit 1)")


def test_json_report_carries_verdict_findings_and_suspects(result: AuditResult) -> None:
    data = json.loads(render_json(result, exit_code=1))
    assert data["verdict"] == "fail" and data["exit_code"] == 1
    failing = [f for f in data["findings"] if f["status"] == "fail"]
    assert {f["check"] for f in failing} == {
        "rng-contract",
        "draw-ranges-disjoint",
        "overlap-invariance",
    }
    for finding in failing:
        assert [s["defect"] for s in finding["suspects"]] == ["overlap-window-reuse"]
        assert finding["requests"] and finding["message"]
    offsets = next(f for f in failing if f["check"] == "rng-contract")["offsets"]
    assert any("offset" in row["mismatch"] for row in offsets)


def test_junit_counts_failures(result: AuditResult) -> None:
    root = ET.fromstring(render_junit(result))
    assert root.get("failures") == "3"
    names = [case.get("name") for case in root.iter("testcase")]
    assert "overlap-invariance[overlap-off,overlap-on]" in names
