"""One order of exit codes for every command that judges (docs/exit-codes.md): an audit,
``check`` of its bundle and ``replay`` of it agree, and each prints the code it returns."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specseed.checks import CHECKS
from tests.bundle.common import invoke

NOTHING = (
    "engine:\n  options: {defects: [neighbor-unseeded]}\nscenarios: [batch-composition]\n"
    f"checks:\n  skip: [{', '.join(c for c in CHECKS if c != 'unseeded-independence')}]\n"
)
"""An audit whose every finding is skip (unseeded-independence is on and has nothing to say
in batch-composition; every other check is skipped)."""


def _printed(output: str) -> list[int]:
    return [int(code) for code in re.findall(r"\(exit (\d+)\)", output)]


@pytest.fixture(scope="module")
def nothing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("nothing")
    (root / "model.yaml").write_text(NOTHING)
    result = invoke("audit", "--no-progress", str(root / "model.yaml"), "--bundle", str(root / "b"))
    assert result.exit_code == 4, result.output
    assert _printed(result.output) == [4]
    return root / "b"


def test_check_of_a_bundle_that_checked_nothing_exits_4_as_its_audit_did(nothing: Path) -> None:
    manifest = json.loads((nothing / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["exit_code"] == 4
    result = invoke("check", str(nothing))
    assert result.exit_code == 4, result.output
    assert _printed(result.output) == [4]
    assert "NOTHING CHECKED" in result.output and "PASS" not in result.output
    written = invoke("check", str(nothing), "--json", "-")
    assert written.exit_code == 4
    assert json.loads(written.stdout)["exit_code"] == 4


def test_report_of_a_bundle_that_checked_nothing_vouches_for_nothing(nothing: Path) -> None:
    result = invoke("report", str(nothing), "--no-minimize")
    assert "every invariant holds" not in result.output
    assert "found no violation" not in result.output
    assert "nothing checked" in result.output
    data = json.loads(invoke("report", str(nothing), "--no-minimize", "-f", "json").output)
    assert data["verdict"] == "nothing-checked"


def test_a_replay_of_it_exits_4_and_prints_the_code_it_returns(nothing: Path) -> None:
    # Every request equals the recording, but the replay's own audit checked nothing: half
    # of the replay's verdict is missing, so it is no pass.
    result = invoke("replay", str(nothing))
    assert result.exit_code == 4, result.output
    assert set(_printed(result.output)) == {4}, result.output
    last = " ".join(result.output.split()).rsplit("replay: ", 1)[-1]
    assert last.startswith("NOTHING CHECKED: the audit checked nothing"), last
    assert "reproduces the recording" in last
