"""``specseed.api`` on the reference engine: an audit from a path, a dict and an AuditConfig,
its renderings, root causes and bundle, and its refusals."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import specseed
import specseed.api as api
from specseed.core.errors import EngineError, InputError, ScenarioError
from tests.api.conftest import write_model


def test_a_failing_audit_from_a_path_with_its_renderings_and_bundle(tmp_path: Path) -> None:
    model = write_model(tmp_path, defects=["row0-seed"])
    report = api.audit(model, scenarios=["small-position"], bundle=tmp_path / "b")
    assert not report.passed and report.exit_code == 1 and report.verdict == "fail"
    assert [c.defect for c in report.root_causes] == ["row0-seed"]
    assert {f.check for f in report.failures} == {"position-invariance"}
    assert "FAIL position-invariance" in report.console()
    data = json.loads(report.json())
    assert data["exit_code"] == 1
    suites = ET.fromstring(report.junit())
    assert [s.get("name") for s in suites] == ["small-position", "root-causes"]
    assert (tmp_path / "b" / "manifest.json").is_file()
    assert "row0-seed" in report.issue()


def test_a_dict_and_an_audit_config_give_the_same_verdict(tmp_path: Path) -> None:
    write_model(tmp_path)
    data = {"engine": {"name": "reference"}, "scenarios": ["small-rerun.yaml"]}
    from_dict = api.audit(data, base_dir=tmp_path)
    from_config = api.audit(api.load_config(data), base_dir=tmp_path)
    assert from_dict.passed and from_config.passed
    assert [f.check for f in from_dict.findings] == [f.check for f in from_config.findings]
    with pytest.raises(InputError, match="from a bundle"):
        from_dict.issue()


def test_checks_narrow_what_is_judged(tmp_path: Path) -> None:
    model = write_model(tmp_path, defects=["row0-seed"])
    report = api.audit(model, scenarios=["small-position"], checks=["rng-contract"])
    judged = {f.check for f in report.findings if f.status != "skip"}
    assert judged == {"rng-contract"} and report.passed


def test_refusals_are_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as caught:
        api.audit({"engine": {"name": "reference", "max_draft_lenn": 3}})
    assert any("max_draft_lenn" in p for p in caught.value.problems)
    with pytest.raises(InputError, match="unknown check"):
        api.audit(checks=["no-such-check"])
    with pytest.raises(InputError, match="cannot audit a int"):
        api.audit(engine=3)  # type: ignore[arg-type]


def test_a_server_url_audits_engine_openai(tmp_path: Path) -> None:
    config = api.server_config("http://127.0.0.1:1", model="m")
    assert config.engine.name == "openai" and config.engine.options["base_url"] == (
        "http://127.0.0.1:1"
    )
    # nothing listens on port 1: the engine cannot run (exit 3 in the CLI)
    with pytest.raises(EngineError, match=r"127\.0\.0\.1:1"):
        api.audit(
            api.server_config("http://127.0.0.1:9", retries=0),
            engine="http://127.0.0.1:1",  # the URL given wins over the config's
            scenarios=["reproducibility"],
        )


def test_the_package_reexports_the_api_lazily() -> None:
    assert specseed.Report is api.Report and specseed.load_config is api.load_config


def test_load_config_of_a_dict_names_the_key_and_the_fix() -> None:
    with pytest.raises(ScenarioError) as caught:
        api.load_config({"engine": {"name": "reference", "max_draft_lenn": 3}})
    message = str(caught.value)
    assert "engine.max_draft_lenn: unknown key 'max_draft_lenn'" in message
    assert "Did you mean 'max_draft_len'?" in message


def test_console_renders_at_the_terminal_width_unless_given_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = api.audit(write_model(tmp_path, defects=["row0-seed"]), scenarios=["small-position"])

    def widest(text: str) -> int:
        return max(len(line) for line in text.splitlines())

    # shutil.get_terminal_size reads COLUMNS first; the failure's rule spans the whole width.
    monkeypatch.setenv("COLUMNS", "64")
    assert widest(report.console()) == 64
    assert widest(report.console(width=100)) == 100
    monkeypatch.delenv("COLUMNS")
    monkeypatch.setattr(
        "shutil.get_terminal_size", lambda fallback=(80, 24): os.terminal_size(fallback)
    )
    assert widest(report.console()) == 80
