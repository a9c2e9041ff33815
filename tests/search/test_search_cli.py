"""``specseed search`` through its command (issue 37): a search of the correct engine passes
with a coverage table and its JSON; a failing one writes the bundle ``audit --bundle``
writes, with the example database beside it, and a rerun tries the known failure first; bad
input is exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from specseed.bundle.format import read_bundle
from specseed.cli.app import app
from specseed.scenarios.schema import Scenario
from specseed.workflows.search import parse_duration

runner = CliRunner()
ENV = {"COLUMNS": "80"}


def test_a_search_of_the_correct_engine_passes_and_says_what_it_explored(
    tmp_path: Path,
) -> None:
    out = tmp_path / "search.json"
    args = ["search", "--budget", "4s", "--seed", "0", "--jobs", "1", "--json", str(out)]
    result = runner.invoke(app, args, env=ENV)
    assert result.exit_code == 0, result.output
    assert "Coverage: what the search explored" in result.output
    assert "PASS: no failure in" in result.output
    assert "family-wise rate <=" in result.output
    assert all(len(line) <= 80 for line in result.output.splitlines()), result.output
    document = json.loads(out.read_text())
    assert document["failures"] == [] and document["exit_code"] == 0
    assert document["scenarios_run"] >= 1 and document["seed"] == 0
    assert document["false_alarms"]["family_wise_bound"] <= 0.01
    assert document["coverage"]["requests"]


def test_a_failure_is_bundled_and_a_rerun_tries_it_first(tmp_path: Path) -> None:
    (tmp_path / "model.yaml").write_text("engine: {options: {defects: [slot-reuse-offset]}}\n")
    bundle = tmp_path / "bug"
    out = tmp_path / "search.json"
    args = [
        "search", str(tmp_path / "model.yaml"), "--budget", "2m", "--seed", "0", "--jobs", "1",
        "--shrink-budget", "3s", "--bundle", str(bundle), "--json", str(out), "--no-progress",
    ]  # fmt: skip
    result = runner.invoke(app, args, env=ENV)
    assert result.exit_code == 1, result.output
    document = json.loads(out.read_text())
    (failure,) = document["failures"]
    assert failure["root_causes"] and failure["failed_again_in_report"]
    minimal = Scenario.model_validate(yaml.safe_load(failure["scenario_yaml"]))
    assert minimal.name == failure["scenario"] and minimal.requests
    # The bundle audit --bundle writes, with the minimal scenario stored.
    read = read_bundle(bundle)
    (scenario,) = read.scenarios
    assert scenario.name == failure["scenario"] and scenario.minimal is not None
    assert (bundle / "engine.log").is_file() and (bundle / ".hypothesis").is_dir()
    assert (bundle / "report.html").is_file()  # as every bundle has it
    report = runner.invoke(app, ["report", str(bundle)], env=ENV)
    title = report.output.splitlines()[0]  # the title names the failing check
    assert report.exit_code == 0 and title.startswith("## ") and failure["check"] in title
    # Again with the bundle's example database: the known failure is the first case.
    again = runner.invoke(app, [*args, "--force"], env=ENV)
    assert again.exit_code == 1, again.output
    assert json.loads(out.read_text())["failures"][0]["scenarios_before"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget", "soon"], "cannot read the duration"),
        (["--budget", "0s"], "is zero"),
        (["--jobs", "0"], "--jobs 0"),
        (["--database", "redis://127.0.0.1:9/0"], "redis"),
        (["--database", "no/such/folder/db"], "does not exist"),
    ],
)
def test_bad_flags_are_exit_2(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["search", *args], env=ENV)
    assert result.exit_code == 2 and message in result.output, result.output


def test_a_server_is_searched_by_one_worker(tmp_path: Path) -> None:
    (tmp_path / "model.yaml").write_text(
        "engine: {name: openai, options: {base_url: 'http://127.0.0.1:9'}}\n"
    )
    result = runner.invoke(app, ["search", str(tmp_path / "model.yaml"), "-j", "2"], env=ENV)
    assert result.exit_code == 2 and "a server is one engine" in result.output, result.output


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("90s", 90), ("5m", 300), ("1h30m", 5400), ("1.5s", 1.5)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_crashes_set_aside_by_model_yaml_are_not_what_the_search_reports(
    tmp_path: Path,
) -> None:
    # A known crash (warmup-overflow's IndexError above max_num_requests) ends a search at
    # once; with runs-complete skipped in model.yaml, a case whose run crashed is not judged
    # (its comparisons would only repeat the crash), and the search goes on past it.
    engine = "engine:\n  options: {defects: [warmup-overflow]}\n"
    args = ["--seed", "3", "--jobs", "1", "--max-scenarios", "12"]
    args += ["--max-shrink-scenarios", "5", "--no-progress"]
    plain, skipping = tmp_path / "plain.yaml", tmp_path / "skip.yaml"
    plain.write_text(engine)
    skipping.write_text(engine + "checks:\n  skip: [runs-complete]\n")
    found = runner.invoke(app, ["search", str(plain), *args], env=ENV)
    assert found.exit_code == 1 and "FAIL: runs-complete after" in found.output, found.output
    aside = runner.invoke(app, ["search", str(skipping), *args], env=ENV)
    assert aside.exit_code == 0, aside.output
    assert "a run crashed and runs-complete is skipped: IndexError" in aside.output
