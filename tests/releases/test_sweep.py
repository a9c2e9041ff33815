"""``specseed sweep`` end to end on a stand-in engine: wheels of ``specseed-standin`` at
several versions (tests/data/plugins/specseed_standin: seeds ignored from 2.0, no ``knob``
before 1.0), each installed by uv into its own environment from a local folder (offline),
audited by specseed running inside it. No network: uv reads only the folder of wheels.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specseed.cli.app import app
from specseed.core.errors import InputError
from tests.releases.wheels import standin_wheel

# Ten seconds or more alone: handed out first under xdist (tests/conftest.py).
pytestmark = pytest.mark.slow

MODEL = """engine:
  name: standin
  options: {knob: true}
scenarios: [uptime]
"""


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from specseed.releases.envs import find_uv

    try:
        find_uv()
    except InputError:
        pytest.skip("uv is not installed (pip install uv)")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version in ("0.9", "1.0", "1.1", "1.2", "2.0", "2.1"):
        standin_wheel(wheels, version)
    (tmp_path / "model.yaml").write_text(MODEL)
    monkeypatch.setenv("SPECSEED_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _sweep(*args: str) -> tuple[int, str, dict]:  # type: ignore[type-arg]
    result = CliRunner().invoke(
        app,
        ["sweep", "model.yaml", "--find-links", "wheels", "--offline", "--no-progress", *args],
    )
    assert "Traceback" not in result.output, result.output
    data = json.loads(Path("sweep/sweep.json").read_text())
    return result.exit_code, result.output, data


def _by_version(data: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {o["version"]: o for o in data["outcomes"]}


def test_a_list_names_the_first_bad_release_and_says_which_could_not_run(setup: Path) -> None:
    code, output, data = _sweep(
        "--engine-versions", "specseed-standin==0.9,1.0,2.0,3.0", "--bundle", "sweep"
    )
    assert code == 1, output
    outcomes = _by_version(data)
    assert outcomes["0.9"]["status"] == "cannot-run"
    assert "knob" in outcomes["0.9"]["reason"]  # the knob 0.9 lacks, refused: no verdict
    assert outcomes["3.0"]["status"] == "not-installable"
    assert "specseed-standin==3.0" in outcomes["3.0"]["reason"]
    for version, verdict in (("1.0", "pass"), ("2.0", "fail")):
        assert outcomes[version]["status"] == "ran"
        assert outcomes[version]["verdict"] == verdict
        # What ran is the release asked for, from its own environment.
        assert outcomes[version]["engine"]["specseed-standin"] == version
        assert outcomes[version]["timings"]["cached"] is False
    assert outcomes["2.0"]["cells"]["uptime"]["uptime-invariance"]["status"] == "fail"
    assert data["transition"] == {
        "kind": "regression",
        "last_before": "1.0",
        "first_after": "2.0",
        "untested_between": [],
        "cells": ["uptime/uptime-invariance"],
    }
    assert "First bad release: 2.0 (last good: 1.0)" in output
    assert all(len(line) <= 80 for line in output.splitlines()), output
    # Each release's bundle is a specseed bundle; the table is in sweep.md.
    assert (setup / "sweep" / "specseed-standin-2.0" / "manifest.json").is_file()
    assert (
        "| uptime | uptime-invariance | n/r | pass | fail | n/i |"
        in (setup / "sweep" / "sweep.md").read_text()
    )

    # A bundle's recorded scenarios, replayed on each release's engine (with consent).
    recorded = setup / "recorded"
    (setup / "sweep" / "specseed-standin-2.0").rename(recorded)
    result = CliRunner().invoke(
        app,
        ["sweep", str(recorded), "--engine-versions", "specseed-standin==1.0,2.0",
         "--find-links", "wheels", "--offline", "--no-progress", "--bundle", "replayed"],
    )  # fmt: skip
    refused = CliRunner().invoke(
        app, ["sweep", str(recorded), "--engine-versions", "specseed-standin==1.0"]
    )
    assert refused.exit_code == 2 and "--engine-from-bundle" in refused.output
    assert result.exit_code == 2, result.output  # the same refusal: no consent given
    result = CliRunner().invoke(
        app,
        ["sweep", str(recorded), "--engine-from-bundle", "--engine-versions",
         "specseed-standin==1.0,2.0", "--find-links", "wheels", "--offline", "--no-progress",
         "--bundle", "replayed"],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    replayed = _by_version(json.loads((setup / "replayed" / "sweep.json").read_text()))
    assert [replayed[v]["verdict"] for v in ("1.0", "2.0")] == ["pass", "fail"]
    assert [replayed[v]["timings"]["cached"] for v in ("1.0", "2.0")] == [True, True]

    # A second sweep finds the environments in the cache and reaches the same verdicts.
    code, output, again = _sweep(
        "--engine-versions", "specseed-standin==2.0", "--bundle", "sweep", "--force"
    )
    assert code == 1, output
    outcome = _by_version(again)["2.0"]
    assert (outcome["timings"]["cached"], outcome["verdict"]) == (True, "fail")
    assert not (setup / "sweep" / "specseed-standin-1.0").exists()  # --force cleared the old


def test_a_range_is_bisected_with_fewer_runs_than_releases(setup: Path) -> None:
    code, output, data = _sweep("--engine-versions", "specseed-standin>=1.0", "--bundle", "sweep")
    assert code == 1, output
    assert data["releases"] == ["1.0", "1.1", "1.2", "2.0", "2.1"]
    # The ends, then the middle (1.2: still good), then 2.0: 1.1 is never installed.
    assert sorted(_by_version(data)) == ["1.0", "1.2", "2.0", "2.1"]
    assert (data["transition"]["last_before"], data["transition"]["first_after"]) == ("1.2", "2.0")
    assert "bisected" in output
    assert not any("specseed-standin-1.1" in p.name for p in (setup / "cache" / "envs").iterdir())
