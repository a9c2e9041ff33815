"""A cause the evidence leaves open ("one of A or B") is described whole wherever it is
shown: each defect with its own evidence, and what would tell them apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bundle.common import invoke

MODEL = "engine:\n  options: {defects: [neighbor-unseeded]}\nscenarios: [batch-composition]\n"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("open")
    (root / "model.yaml").write_text(MODEL)
    result = invoke("audit", "--no-progress", str(root / "model.yaml"), "--bundle", str(root / "b"))
    assert result.exit_code == 1, result.output
    assert "one of engine-counter or neighbor-unseeded" in result.output
    return root / "b"


def test_report_describes_both_defects_of_a_one_of_cause(bundle: Path) -> None:
    text = invoke("report", str(bundle), "--no-minimize").output
    assert "**one of engine-counter or neighbor-unseeded**" in text
    assert "- `engine-counter` (one engine-wide seed" in text
    assert "- `neighbor-unseeded` (a seed is ignored when another request" in text
    assert "To tell them apart: uptime-invariance" in text
    data = json.loads(invoke("report", str(bundle), "--no-minimize", "-f", "json").output)
    [cause] = data["causes"]
    assert cause["alternatives"] == ["neighbor-unseeded"]
    assert (
        set(cause["summaries"])
        == set(cause["evidence_by_defect"])
        == {
            "engine-counter",
            "neighbor-unseeded",
        }
    )
    assert all(cause["evidence_by_defect"].values())


def test_the_console_gives_each_defects_evidence(bundle: Path) -> None:
    text = " ".join(invoke("check", str(bundle)).output.split())
    assert "engine-counter: probe asked for seed 2024" in text
    assert "neighbor-unseeded: probe asked for seed 2024" in text
