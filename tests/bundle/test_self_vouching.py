"""A bundle never vouches for itself: ``check`` and ``report`` judge again from the traces,
refuse a bundle whose traces contradict their place (a trace copied over another run, a
header edited, outputs that are not what the steps emitted), never pass one that lacks a
run's trace, and say where findings.json disagrees; and nothing a bundle names outside
itself (a checkpoint, a file linked in) is used or pasted without the user's say."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.bundle.common import SCENARIO, invoke

TINY_DISTRIBUTION = """\
name: tiny-distribution
description: A few sampled copies of one request.
requests:
  s: {prompt: [3, 1, 4], seed: 11, temperature: 1.0, max_tokens: 2}
runs:
  - {name: sampled, requests: [s]}
distribution: {samples: 8}
"""


def _record(root: Path, scenario: str, defects: str, expected: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "scenario.yaml").write_text(scenario)
    model = root / "model.yaml"
    model.write_text(f"engine: {{options: {{defects: [{defects}]}}}}\nscenarios: [scenario.yaml]\n")
    result = invoke("audit", str(model), "--no-progress", "--summary", "--bundle", str(root / "b"))
    assert result.exit_code == expected, result.output
    return root / "b"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A failing bundle (row0-seed), a passing one, and one of a distribution run."""
    root = tmp_path_factory.mktemp("recorded")
    return {
        "failing": _record(root / "failing", SCENARIO, "row0-seed", 1),
        "passing": _record(root / "passing", SCENARIO, "", 0),
        "distribution": _record(root / "distribution", TINY_DISTRIBUTION, "", 0),
    }


@pytest.fixture
def copy(recorded: dict[str, Path], tmp_path: Path) -> Callable[[str], Path]:
    def make(name: str) -> Path:
        return Path(shutil.copytree(recorded[name], tmp_path / name))

    return make


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write_lines(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _contradicts(bundle: Path, *says: str) -> None:
    for command in ("check", "report"):
        result = invoke(command, str(bundle), *(("--no-minimize",) if command == "report" else ()))
        assert result.exit_code == 2, result.output
        text = " ".join(result.output.split())
        assert "the bundle contradicts itself" in text and "Traceback" not in text, text
        for said in says:
            assert said in text, text


# -- findings.json is the bundle's word, not evidence -------------------------------------


def test_a_findings_file_forged_to_pass_does_not_make_the_report_say_every_invariant_holds(
    copy: Callable[[str], Path],
) -> None:
    bundle = copy("failing")
    findings = bundle / "mine" / "findings.json"
    data = json.loads(findings.read_text())
    for finding in data["findings"]:
        finding.update(status="pass", suspects=[], diffs=[])
    data["root_causes"] = []
    findings.write_text(json.dumps(data))
    report = invoke("report", str(bundle), "--no-minimize")
    assert report.exit_code == 0, report.output
    assert "every invariant holds" not in report.output
    assert "row0-seed" in report.output  # the re-judged failure leads
    said = " ".join(report.output.split())
    assert "findings.json disagrees with its traces (batch-invariance pass -> fail)" in said
    check = invoke("check", str(bundle))
    assert check.exit_code == 1 and "findings.json disagrees" in check.output


# -- a trace is held to its place ---------------------------------------------------------


def test_a_trace_copied_over_another_run_is_refused(copy: Callable[[str], Path]) -> None:
    bundle = copy("failing")
    shutil.copy(bundle / "mine" / "alone.jsonl", bundle / "mine" / "neighbour.jsonl")
    _contradicts(bundle, "mine/neighbour.jsonl: its header records run 'alone'")


def test_a_header_edited_to_the_right_run_still_contradicts_the_runs_settings(
    copy: Callable[[str], Path],
) -> None:
    """A baseline served with K = 0 passed off as a speculative run: its name fixed, its
    settings say what it was."""
    bundle = copy("passing")
    trace = bundle / "mine" / "neighbour.jsonl"
    records = _lines(trace)
    records[0]["engine_config"]["max_draft_len"] = 0
    _write_lines(trace, records)
    _contradicts(bundle, "its header records max_draft_len 0, the run is served with 3")


def test_end_outputs_that_are_not_what_the_steps_emitted_are_refused(
    copy: Callable[[str], Path],
) -> None:
    bundle = copy("failing")
    trace = bundle / "mine" / "neighbour.jsonl"
    records = _lines(trace)
    records[-1]["outputs"]["probe"] = _lines(bundle / "mine" / "alone.jsonl")[-1]["outputs"][
        "probe"
    ]  # the failing run now "agrees" with the other: the comparison would pass
    _write_lines(trace, records)
    _contradicts(bundle, "request probe: its end record's outputs are not the tokens")


@pytest.mark.parametrize(
    "edit, says",
    [
        (lambda h: h["requests"][0].update(seed=7), "request probe: its header records seed 7"),
        (lambda h: h["requests"][0].update(prompt_ids=[1, 2]), "another prompt"),
        (lambda h: h["requests"].pop(), "its header records requests [] (0)"),
        (lambda h: h.update(warmup_batches=[4]), "warmup batches [4]"),
    ],
)
def test_a_header_whose_requests_contradict_the_scenario_is_refused(
    copy: Callable[[str], Path], edit: Callable[[dict[str, Any]], object], says: str
) -> None:
    bundle = copy("passing")
    trace = bundle / "mine" / "alone.jsonl"
    records = _lines(trace)
    edit(records[0])
    _write_lines(trace, records)
    _contradicts(bundle, says)


def test_outputs_of_a_request_the_run_does_not_serve_are_refused(
    copy: Callable[[str], Path],
) -> None:
    bundle = copy("passing")
    trace = bundle / "mine" / "alone.jsonl"
    records = _lines(trace)
    records[-1]["outputs"]["intruder"] = [1]
    _write_lines(trace, records)
    _contradicts(bundle, "outputs of request 'intruder'")


# -- missing traces are never a pass ------------------------------------------------------


def test_deleting_the_failing_runs_trace_and_its_manifest_entry_is_not_a_pass(
    copy: Callable[[str], Path],
) -> None:
    bundle = copy("failing")
    (bundle / "mine" / "neighbour.jsonl").unlink()
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["scenarios"][0]["runs"] = []  # as a bundle that never listed its runs
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    check = invoke("check", str(bundle))
    assert check.exit_code == 5, check.output
    assert check.output.startswith("NOT JUDGED")
    report = invoke("report", str(bundle), "--no-minimize")
    assert "every invariant holds" not in report.output and "unfinished" in report.output
    # A manifest that lists fewer runs than the scenario defines contradicts it.
    manifest["scenarios"][0]["runs"] = ["alone"]
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    _contradicts(bundle, "the manifest lists runs alone but the scenario defines alone, neighbour")


# -- nothing the bundle names outside itself ----------------------------------------------


def test_a_reference_engine_with_a_checkpoint_runs_only_with_the_flag(
    copy: Callable[[str], Path], tmp_path: Path
) -> None:
    bundle = copy("failing")
    checkpoint = tmp_path / "strangers-checkpoint"
    model = yaml.safe_load((bundle / "model.yaml").read_text())
    model["engine"]["checkpoint"] = str(checkpoint)
    (bundle / "model.yaml").write_text(yaml.safe_dump(model))
    for args in (("replay",), ("minimize",), ("report", "--minimize")):
        result = invoke(*args, str(bundle))
        assert result.exit_code == 2, result.output
        text = " ".join(result.output.split())
        assert f"checkpoint {checkpoint}" in text and "--engine-from-bundle" in text, text
    report = invoke("report", str(bundle))
    assert report.exit_code == 0 and "not minimized" in report.output
    assert not (bundle / "mine" / "minimal.yaml").exists()


def test_check_loads_no_checkpoint_a_trace_names_unless_asked(
    copy: Callable[[str], Path], tmp_path: Path
) -> None:
    bundle = copy("distribution")
    (bundle / "tiny-distribution" / "sampled.distribution.json").unlink()  # no stored evidence
    trace = bundle / "tiny-distribution" / "sampled.jsonl"
    records = _lines(trace)
    records[0]["engine_config"]["checkpoint"] = str(tmp_path / "no-such-checkpoint")
    _write_lines(trace, records)
    refused = invoke("check", str(bundle))
    assert "not loaded because a bundle names it" in " ".join(refused.output.split())
    asked = invoke("check", str(bundle), "--engine-from-bundle")
    text = " ".join(asked.output.split())
    assert "the distribution check may load" in text and "no exact target probabilities" in text


def test_a_hard_linked_minimal_yaml_is_never_pasted_into_the_issue(
    copy: Callable[[str], Path], tmp_path: Path
) -> None:
    bundle = copy("failing")
    private = tmp_path / "private.yaml"
    private.write_text((bundle / "mine" / "scenario.yaml").read_text() + "# PRIVATE-7c1e\n")
    os.link(private, bundle / "mine" / "minimal.yaml")
    report = invoke("report", str(bundle), "--no-minimize")
    assert report.exit_code == 0, report.output
    assert "PRIVATE-7c1e" not in report.output
    assert "minimal.yaml: has 2 hard links" in " ".join(report.output.split())
    # Nor one that is no scenario at all.
    (bundle / "mine" / "minimal.yaml").unlink()
    (bundle / "mine" / "minimal.yaml").write_text("PRIVATE-7c1e: [not, a, scenario]\n")
    report = invoke("report", str(bundle), "--no-minimize")
    assert "PRIVATE-7c1e" not in report.output
