"""Hostile and mistaken inputs through ``specseed audit``: exit 2, one line naming the place
and the fix, never a traceback, and nothing run.

Each file in tests/cli/corpus holds one case. Its first lines are ``# expect: TEXT``, where
``{file}`` stands for the path the audit was given; every such line must appear in the output.
A ``*.model.yaml`` is audited directly; a ``*.scenario.yaml`` through a model.yaml that names
it. Cases that are not files (a device, an oversized file, clashing flags) follow below.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specseed.cli.app import app
from specseed.scenarios.loader import MAX_FILE_BYTES

CORPUS = Path(__file__).parent / "corpus"
CASES = sorted(CORPUS.glob("*.yaml"))
runner = CliRunner()


def audit(*args: str, columns: int = 80):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["audit", "--no-progress", *args], env={"COLUMNS": str(columns)})


def expectations(path: Path) -> list[str]:
    lines = path.read_bytes().split(b"\n")
    found = [
        line.decode("ascii")[len("# expect: ") :]
        for line in lines
        if line.startswith(b"# expect: ")
    ]
    assert found, f"{path.name} lacks its '# expect:' line"
    return found


def assert_refused(result, *messages: str) -> None:  # type: ignore[no-untyped-def]
    """Exit 2, each message on one line of the output, no traceback, nothing run."""
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = result.output.splitlines()
    for message in messages:
        assert any(message in line for line in lines), (message, result.output)
    assert "Nothing was run." in result.output
    assert "PASS" not in result.output and "FAIL" not in result.output


def test_the_corpus_covers_every_case() -> None:
    assert len(CASES) >= 15


@pytest.mark.parametrize("case", CASES, ids=[p.name for p in CASES])
def test_corpus_case_is_refused_with_its_message(case: Path, tmp_path: Path) -> None:
    if case.name.endswith(".model.yaml"):
        target = case
    else:
        target = tmp_path / "model.yaml"
        target.write_text(f"scenarios: ['{case}']\n")
    result = audit(str(target))
    assert_refused(result, *(e.replace("{file}", str(case)) for e in expectations(case)))


def test_a_device_is_refused_as_a_scenario(tmp_path: Path) -> None:
    model = tmp_path / "model.yaml"
    model.write_text("scenarios: [/dev/zero]\n")
    assert_refused(audit(str(model)), "/dev/zero: not a regular file")


def test_a_device_is_refused_as_model_yaml() -> None:
    assert_refused(audit("/dev/zero"), "/dev/zero: not a regular file")


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "model.yaml"
    os.mkfifo(fifo)
    assert_refused(audit(str(fifo)), f"{fifo}: not a regular file")


def test_a_file_above_the_size_limit_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("# padding\n" * (MAX_FILE_BYTES // 10 + 1))
    model = tmp_path / "model.yaml"
    model.write_text("scenarios: [big.yaml]\n")
    assert_refused(audit(str(model)), f"{big}: larger than 1 MiB")


def test_a_directory_as_scenario_is_refused(tmp_path: Path) -> None:
    (tmp_path / "dir.yaml").mkdir()
    model = tmp_path / "model.yaml"
    model.write_text("scenarios: [dir.yaml]\n")
    assert_refused(audit(str(model)), f"{tmp_path / 'dir.yaml'}: is a directory")


def test_json_and_junit_on_one_path_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = audit("--json", str(out), "--junit", str(out))
    assert_refused(result, f"--json and --junit both write {out}")
    assert not out.exists()


def test_two_reports_on_stdout_are_refused() -> None:
    assert_refused(audit("--json", "-", "--junit", "-"), "--json and --junit both write to stdout")


def test_a_report_onto_model_yaml_is_refused(tmp_path: Path) -> None:
    model = tmp_path / "model.yaml"
    text = "scenarios: [uptime]\n"
    model.write_text(text)
    result = audit(str(model), "--json", str(model))
    assert_refused(result, f"--json {model} would overwrite an input of this audit")
    assert model.read_text() == text


def test_a_report_onto_a_scenario_file_is_refused(tmp_path: Path) -> None:
    scenario = tmp_path / "mine.yaml"
    scenario.write_text(
        "name: mine\ndescription: x\nrequests:\n  a: {prompt: [1], seed: 1}\n"
        "runs:\n  - {name: one, requests: [a]}\n"
    )
    model = tmp_path / "model.yaml"
    model.write_text("scenarios: [mine.yaml]\n")
    before = scenario.read_text()
    result = audit(str(model), "--junit", str(tmp_path / "sub" / ".." / "mine.yaml"))
    assert_refused(result, "would overwrite an input of this audit")
    assert scenario.read_text() == before


def test_a_flag_given_a_value_is_explained() -> None:
    assert_refused(audit("--matrix", "true"), "flags such as --matrix take no value")


def test_help_shows_flags_without_a_value() -> None:
    result = runner.invoke(app, ["audit", "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    for line in result.output.splitlines():
        if "--matrix" in line or "--no-progress" in line:
            assert "<bool>" not in line, line
