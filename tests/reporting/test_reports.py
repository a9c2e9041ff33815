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
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from specseed.reporting.console import render_finding, render_report
from specseed.reporting.json_report import render_json
from specseed.reporting.junit import render_junit
from specseed.run.execute import evaluate
from specseed.run.results import AuditResult, ScenarioResult
from specseed.scenarios.loader import load_library_scenario
from specseed.scenarios.schema import AuditConfig, EngineConfig
from specseed.traces.records import load_trace

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
    # 80 columns: the report must read in a default terminal.
    console = Console(width=80, record=True, color_system=None, force_terminal=False)
    render_report(result, console, exit_code=1)
    text = "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"
    if os.environ.get("SPECSEED_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_report_leads_with_root_cause_then_one_full_diff(result: AuditResult) -> None:
    console = Console(width=80, record=True, color_system=None, force_terminal=False)
    render_report(result, console, exit_code=1)
    text = console.export_text()
    causes = text.index("Root causes (1), by suspect defect:")
    assert "overlap-window-reuse  3 failing findings, 1 scenario, 3 requests" in text
    # The clearest finding (a token diff blamed on the RNG state) in full, after the causes.
    assert text.index("first diverges at token 1: RNG state differs") > causes
    assert text.count("RNG state behind it") == 1
    assert "b first diverges at token 2 (overlap-off vs overlap-on)" in text
    # The other findings of the same cause: one line each (their tables are in --json).
    assert "FAIL rng-contract" in text and "FAIL draw-ranges-disjoint" in text
    assert "expected (contract) beside observed" not in text
    assert text.rstrip().endswith("(exit 1)")
    assert max(len(line) for line in text.splitlines()) <= 80


def test_summary_prints_the_verdict_table_and_causes_only(result: AuditResult) -> None:
    console = Console(width=80, record=True, color_system=None, force_terminal=False)
    render_report(result, console, exit_code=1, summary=True)
    text = console.export_text()
    assert "Verdict: scenario by check" in text and "Root causes (1)" in text
    assert "first diverges" not in text and "Also pointing" not in text
    assert text.rstrip().endswith("(exit 1)")


def test_an_offsets_finding_shows_expected_beside_observed(result: AuditResult) -> None:
    finding = next(f for f in result.findings if f.check == "rng-contract" and f.offsets)
    console = Console(width=80, record=True, color_system=None, force_terminal=False)
    console.print(render_finding(finding))
    text = console.export_text()
    assert "RNG state per event vs the contract" in text
    assert "offset 12288" in text  # what the contract expected, beside the observed 4096


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
    # The audit's conclusion, with the findings it rests on (issue 19).
    [cause] = data["root_causes"]
    assert cause["label"] == cause["defect"] == "overlap-window-reuse"
    assert cause["kind"] == "defect" and not cause["alternatives"]
    assert {e["check"] for e in cause["evidence"]} == {f["check"] for f in failing}


def test_junit_counts_failures(result: AuditResult) -> None:
    root = ET.fromstring(render_junit(result))
    # Three failing findings, as the console counts them; the one root cause they rest on
    # (issue 19) is its own suite, outside the totals and saying so.
    assert root.get("failures") == "3"
    [suite] = [s for s in root.iter("testsuite") if s.get("name") == "root-causes"]
    [cause] = list(suite.iter("testcase"))
    assert cause.get("name") == "overlap-window-reuse"
    body = cause.find("failure")
    assert body is not None and body.text and "overlap-invariance[" in body.text
    names = [case.get("name") for case in root.iter("testcase")]
    assert "overlap-invariance[overlap-off,overlap-on]" in names


def _console_tally(result: AuditResult) -> dict[str, int]:
    console = Console(width=200, record=True, color_system=None, force_terminal=False)
    render_report(result, console, exit_code=1, summary=True)
    last = console.export_text().strip().splitlines()[-1]
    return {status: int(n) for n, status in re.findall(r"(\d+) ([a-z-]+)", last.split(":")[1])}


def test_junit_totals_are_the_consoles_and_the_root_cause_suite_says_it_is_not_counted(
    result: AuditResult,
) -> None:
    tally = _console_tally(result)
    root = ET.fromstring(render_junit(result))
    assert int(root.get("tests", "")) == sum(tally.values())
    assert int(root.get("failures", "")) == tally.get("fail", 0)
    assert int(root.get("skipped", "")) == tally.get("skip", 0) + tally.get("known-limitation", 0)
    [suite] = [s for s in root.iter("testsuite") if s.get("name") == "root-causes"]
    counted = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert "not counted" in counted["specseed.counts"]


def test_json_summary_is_the_consoles_tally(result: AuditResult) -> None:
    data = json.loads(render_json(result, exit_code=1))
    tally = _console_tally(result)
    assert {k: v for k, v in data["summary"].items() if v} == tally


def test_verdict_table_of_every_check_reads_at_80_columns(result: AuditResult) -> None:
    # The whole library touches every check: one row per scenario lists its checks by
    # status, the legend names them; nothing is cut with an ellipsis.
    from specseed.checks import CHECKS
    from specseed.checks.findings import Finding

    scenario = result.scenarios[0]
    findings = tuple(Finding(status="pass", message="", check=c) for c in CHECKS)
    wide = AuditResult(
        config=result.config,
        contract="ideal",
        scenarios=(
            ScenarioResult(scenario.scenario, scenario.source, scenario.traces, findings, 0.0),
        ),
        environment={},
        seconds=0.0,
    )
    console = Console(width=80, record=True, color_system=None, force_terminal=False)
    render_report(wide, console, exit_code=0)
    text = console.export_text()
    assert "greedy=greedy-spec-equivalence" in text
    assert all(CHECKS[c].short in text for c in CHECKS)
    assert "…" not in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
