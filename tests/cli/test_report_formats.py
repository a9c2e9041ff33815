"""``specseed audit --report FORMAT=PATH``: the built-in formats behind it and their aliases
(``--json``, ``--junit``), the refusals before anything runs, stdout, the listing, and a
format from another package that is one file and nothing else.

The plugin (tests/data/plugins/specseed_csv_report.py) is installed as ``pip install`` would
discover it: a distribution's metadata (``*.dist-info`` with ``entry_points.txt``) beside a
copy of it, on ``sys.path``. No specseed module names it.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specseed.cli.app import app
from specseed.reporting.formats import formats

PLUGIN = Path(__file__).parent.parent / "data" / "plugins" / "specseed_csv_report.py"
SCENARIO = "distinct-seeds"  # one run: a quick audit

runner = CliRunner()


def audit(*args: str):  # type: ignore[no-untyped-def]
    result = runner.invoke(
        app, ["audit", "--no-progress", "-s", SCENARIO, *args], env={"COLUMNS": "200"}
    )
    assert "Traceback" not in result.output, result.output
    return result


def install(site: Path, entry_points: str) -> None:
    """A distribution in ``site`` with ``entry_points`` and a copy of the plugin's file."""
    site.mkdir(exist_ok=True)
    shutil.copy(PLUGIN, site / PLUGIN.name)
    info = site / "specseed_csv_report-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: specseed-csv-report\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(entry_points)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on ``sys.path`` for plugins, with the format registry read again."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    formats.cache_clear()
    yield folder
    formats.cache_clear()


@pytest.fixture
def csv_plugin(site: Path) -> Path:
    install(site, "[specseed.formats]\ncsv = specseed_csv_report:FORMAT\n")
    formats.cache_clear()
    return site


def _stable_json(path: Path) -> dict:  # type: ignore[type-arg]
    report = json.loads(path.read_text())
    del report["seconds"], report["command"]  # the timing, and the flags as typed
    return report


def _stable_xml(path: Path) -> str:
    return re.sub(r'time="[0-9.]+"', 'time="T"', path.read_text())


def test_json_and_junit_flags_write_what_report_writes(tmp_path: Path) -> None:
    flags = audit("--json", str(tmp_path / "a.json"), "--junit", str(tmp_path / "a.xml"))
    report = audit(
        "--report", f"junit={tmp_path / 'b.xml'}", "--report", f"json={tmp_path / 'b.json'}"
    )
    assert flags.exit_code == report.exit_code == 0, flags.output + report.output
    assert _stable_json(tmp_path / "a.json") == _stable_json(tmp_path / "b.json")
    assert _stable_xml(tmp_path / "a.xml") == _stable_xml(tmp_path / "b.xml")


def test_json_to_stdout_moves_the_terminal_report_to_stderr() -> None:
    result = audit("--report", "json=-")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["verdict"] == "pass" and report["scenarios"] == [SCENARIO]
    assert "Verdict: scenario by check" in result.stderr
    assert f"PASS: {report['summary']['pass']} pass (exit 0)" in result.stderr
    assert report["summary"]["pass"] == len(report["findings"])


def test_an_unknown_format_is_refused_with_the_known_ones() -> None:
    result = audit("--report", "jsno=out.json")
    assert result.exit_code == 2
    assert "--report jsno=out.json: unknown output format 'jsno'" in result.output
    assert "Did you mean 'json'? Known formats: json, junit, html" in result.output
    assert "Nothing was run." in result.output


def test_a_report_without_a_path_is_refused() -> None:
    result = audit("--report", "junit")
    assert result.exit_code == 2
    assert "--report junit: expected FORMAT=PATH" in result.output


def test_two_reports_on_one_path_are_refused_before_anything_runs(tmp_path: Path) -> None:
    path = tmp_path / "out"
    result = audit("--junit", str(path), "--report", f"json={path}")
    assert result.exit_code == 2
    assert f"--junit and --json both write {path}" in " ".join(result.output.split())
    assert not path.exists()
    both = audit("--report", "json=-", "--report", "junit=-")
    assert both.exit_code == 2
    assert "--json and --junit both write to stdout" in both.output


def test_a_report_over_the_model_yaml_is_refused(tmp_path: Path) -> None:
    model = tmp_path / "model.yaml"
    model.write_text(f"scenarios: [{SCENARIO}]\n")
    before = model.read_text()
    result = runner.invoke(app, ["audit", str(model), "--report", f"junit={model}"])
    assert result.exit_code == 2
    assert "would overwrite an input of this audit" in " ".join(result.output.split())
    assert model.read_text() == before


def test_an_unwritable_report_path_is_refused_with_its_format(tmp_path: Path) -> None:
    result = audit("--report", f"junit={tmp_path / 'missing' / 'junit.xml'}")
    assert result.exit_code == 2
    assert "cannot write the JUnit report" in result.output


def test_formats_lists_the_built_in_formats() -> None:
    result = runner.invoke(app, ["formats"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "json (.json) · also --json PATH" in result.output
    assert "junit (.xml) · also --junit PATH" in result.output


def test_a_format_from_another_package_is_listed_and_written(
    csv_plugin: Path, tmp_path: Path
) -> None:
    listed = runner.invoke(app, ["formats"], env={"COLUMNS": "120"})
    assert listed.exit_code == 0, listed.output
    assert "csv (.csv) · from specseed-csv-report 0.1" in listed.output
    out = tmp_path / "findings.csv"
    result = audit("--report", f"csv={out}", "--json", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.output
    rows = out.read_text().splitlines()
    findings = json.loads((tmp_path / "r.json").read_text())["findings"]
    assert rows[0] == "check,scenario,status,message"
    assert len(rows) == 1 + len(findings) + 1 and rows[-1] == "exit_code,,,0"
    assert all(f",{SCENARIO},pass," in row for row in rows[1:-1])


def test_the_python_api_writes_a_plugin_format(csv_plugin: Path, tmp_path: Path) -> None:
    import specseed.api as specseed

    out = tmp_path / "findings.csv"
    report = specseed.audit(scenarios=[SCENARIO], reports={"csv": out, "junit": tmp_path / "j"})
    assert report.passed
    assert out.read_text().startswith("check,scenario,status,message\n")
    assert (tmp_path / "j").read_text().startswith("<?xml")


def test_a_plugin_that_cannot_be_loaded_is_listed_and_refused_by_name(
    site: Path, tmp_path: Path
) -> None:
    install(site, "[specseed.formats]\nsarif = specseed_no_such_module:FORMAT\n")
    formats.cache_clear()
    listed = runner.invoke(app, ["formats"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0, listed.output
    assert "unusable: cannot load its entry point: ModuleNotFoundError" in listed.output
    result = audit("--report", f"sarif={tmp_path / 'r.sarif'}")
    assert result.exit_code == 2
    assert "output format sarif: cannot load its entry point" in result.output
    assert "it comes from specseed-csv-report 0.1" in " ".join(result.output.split())
    # The other formats still work.
    assert audit("--json", str(tmp_path / "r.json")).exit_code == 0


def test_a_name_registered_twice_is_an_error(site: Path, tmp_path: Path) -> None:
    install(site, "[specseed.formats]\njson = specseed_csv_report:FORMAT\n")
    formats.cache_clear()
    result = audit("--json", str(tmp_path / "r.json"))
    assert result.exit_code == 2
    assert "output format json: registered twice, by specseed and by specseed-csv-report 0.1" in (
        " ".join(result.output.split())
    )
    assert not (tmp_path / "r.json").exists()


def test_a_plugin_renderer_that_fails_loses_only_its_own_document(
    site: Path, tmp_path: Path
) -> None:
    install(site, "[specseed.formats]\nbroken = specseed_csv_report:BROKEN\n")
    formats.cache_clear()
    report = tmp_path / "r.json"
    result = audit("--report", f"broken={tmp_path / 'b.txt'}", "--json", str(report))
    assert result.exit_code == 5, result.output
    text = " ".join(result.output.split())
    assert "cannot write the broken report: its renderer specseed_csv_report:fail failed" in text
    assert "RuntimeError: this renderer always fails" in text
    assert not (tmp_path / "b.txt").exists()
    assert json.loads(report.read_text())["exit_code"] == 5  # written after, and says so
