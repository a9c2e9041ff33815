"""``specseed audit`` end to end through CliRunner: exit codes, reports, traces, errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specseed.cli.app import app
from specseed.traces.records import load_trace

runner = CliRunner()


def audit(*args: str, columns: int = 120):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["audit", "--no-progress", *args], env={"COLUMNS": str(columns)})


def model(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "model.yaml"
    path.write_text(text)
    return path


def test_passing_audit_writes_json_junit_and_traces(tmp_path: Path) -> None:
    path = model(tmp_path, "scenarios: [uptime, warmup]\n")
    report, junit, traces = tmp_path / "r.json", tmp_path / "j.xml", tmp_path / "traces"
    result = audit(
        str(path), "--json", str(report), "--junit", str(junit), "--trace-dir", str(traces)
    )
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output
    data = json.loads(report.read_text())
    assert data["verdict"] == "pass" and data["exit_code"] == 0
    assert data["scenarios"] == ["uptime", "warmup"]
    assert data["findings"]
    for finding in data["findings"]:
        assert {"check", "scenario", "status", "suspects", "requests", "message"} <= set(finding)
    assert "torch" in data["environment"]
    suites = ET.parse(junit).getroot()
    assert suites.get("failures") == "0" and int(suites.get("tests", "0")) == len(data["findings"])
    files = sorted(p.relative_to(traces).as_posix() for p in traces.rglob("*.jsonl"))
    assert files == [
        "uptime/after-seeded-traffic.jsonl",
        "uptime/after-traffic.jsonl",
        "uptime/alone-after-traffic.jsonl",
        "uptime/alone-cold.jsonl",
        "uptime/cold.jsonl",
        "warmup/no-warmup.jsonl",
        "warmup/warmup-above-max.jsonl",
    ]
    cold = load_trace(traces / "uptime" / "cold.jsonl")
    assert set(cold.end.outputs) == {"a", "b", "g"}


def test_violation_exits_1_and_names_suspects(tmp_path: Path) -> None:
    path = model(
        tmp_path, "engine:\n  options:\n    defects: [row0-seed]\nscenarios: [batch-composition]\n"
    )
    result = audit(str(path), "--json", "-")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout[result.stdout.index("{") :])
    failing = [f for f in data["findings"] if f["status"] == "fail"]
    assert failing and data["verdict"] == "fail"
    assert any(s["defect"] == "row0-seed" for f in failing for s in f["suspects"])


def test_engine_crash_in_one_scenario_is_a_finding_and_others_still_run(tmp_path: Path) -> None:
    path = model(
        tmp_path,
        "engine:\n  options:\n    defects: [warmup-overflow]\nscenarios: [warmup, uptime]\n",
    )
    report = tmp_path / "r.json"
    result = audit(str(path), "--json", str(report))
    assert result.exit_code == 1, result.output
    findings = json.loads(report.read_text())["findings"]
    crash = [f for f in findings if f["check"] == "runs-complete" and f["status"] == "fail"]
    assert len(crash) == 1 and crash[0]["runs"] == ["warmup-above-max"]
    assert "IndexError" in crash[0]["message"]
    assert [s["defect"] for s in crash[0]["suspects"]] == ["warmup-overflow"]
    uptime = [f for f in findings if f["scenario"] == "uptime"]
    assert uptime and all(f["status"] == "pass" for f in uptime)


def test_bad_input_exits_2_and_runs_nothing(tmp_path: Path) -> None:
    path = model(tmp_path, "engine:\n  max_draft_len: 99\n")
    traces = tmp_path / "traces"
    result = audit(str(path), "--trace-dir", str(traces))
    assert result.exit_code == 2, result.output
    assert "engine.max_draft_len" in result.output and "Nothing was run." in result.output
    assert not traces.exists()


def test_missing_model_yaml_exits_2(tmp_path: Path) -> None:
    result = audit(str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2
    assert "no such file" in result.output


def test_unknown_scenario_filter_exits_2() -> None:
    result = audit("--scenario", "nope")
    assert result.exit_code == 2
    assert "no such scenario in this audit or the built-in library" in result.output
    assert "this audit runs every scenario of the default audit" in result.output


def test_engine_that_cannot_load_exits_3(tmp_path: Path) -> None:
    from specseed.models.model import TINY_MODEL

    target, _ = TINY_MODEL.build(model_seed=3)
    target.save_checkpoint(tmp_path / "target")
    for weights in (tmp_path / "target").glob("*.safetensors*"):
        weights.unlink()  # config.json stays: validation passes, the engine cannot load
    path = model(tmp_path, "engine:\n  checkpoint: target\nscenarios: [uptime]\n")
    result = audit(str(path))
    assert result.exit_code == 3, result.output


def test_missing_checkpoint_is_a_validation_problem_with_its_line(tmp_path: Path) -> None:
    path = model(tmp_path, "engine:\n  checkpoint: missing-dir\nscenarios: [uptime]\n")
    result = audit(str(path))
    assert result.exit_code == 2, result.output
    assert f"{path}:2: engine.checkpoint: " in result.output
    assert "missing-dir: no such directory" in result.output


def test_trtllm_without_tensorrt_llm_says_what_is_missing(tmp_path: Path) -> None:
    pytest.importorskip("typer")
    path = model(tmp_path, "engine:\n  name: trtllm\nscenarios: [uptime]\n")
    result = audit(str(path))
    assert result.exit_code == 3, result.output
    assert "tensorrt_llm" in result.output and "pypi.nvidia.com" in result.output


def test_audit_runs_on_local_checkpoint_directories(tmp_path: Path) -> None:
    from specseed.models.model import TINY_MODEL

    target, draft = TINY_MODEL.build(model_seed=3)
    target.save_checkpoint(tmp_path / "target")
    draft.save_checkpoint(tmp_path / "target" / "eagle3")
    path = model(
        tmp_path,
        "engine:\n  checkpoint: target\n  draft_checkpoint: target/eagle3\n"
        "scenarios: [uptime, greedy-speculation]\n",
    )
    report = tmp_path / "r.json"
    result = audit(str(path), "--json", str(report))
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text())
    assert data["environment"]["model"] == f"checkpoint {tmp_path / 'target'}"


def test_unwritable_report_path_is_refused_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "report.json").mkdir()
    path = model(tmp_path, "scenarios: [uptime]\n")
    traces = tmp_path / "traces"
    result = audit(str(path), "--json", str(tmp_path / "report.json"), "--trace-dir", str(traces))
    assert result.exit_code == 2, result.output
    assert "is a directory" in result.output and "Nothing was run." in result.output
    assert not list(traces.rglob("*.jsonl"))
