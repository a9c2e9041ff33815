"""One invalid file per error message: each must fail validation with the message it names.

Every file in tests/scenarios/invalid starts with ``# expect: <text>``; the text must appear in
one of the problems, which must also name the file and a line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specseed.core.errors import ScenarioError
from specseed.plan.planning import plan_audit
from specseed.scenarios.loader import load_audit_config, parse_scenario

INVALID = Path(__file__).parent / "invalid"
FILES = sorted(INVALID.glob("*.yaml"))


def _expected(path: Path) -> str:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# expect: "), f"{path.name} lacks its '# expect:' line"
    return first[len("# expect: ") :]


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_invalid_file_is_rejected_with_its_message(path: Path) -> None:
    expected = _expected(path)
    with pytest.raises(ScenarioError) as caught:
        if path.name.endswith(".model.yaml"):
            config = load_audit_config(path)
            plan_audit(config, path.parent, str(path))
        else:
            parse_scenario(path.read_text(encoding="utf-8"), str(path))
    problems = caught.value.problems
    assert any(expected in problem for problem in problems), problems
    matching = next(p for p in problems if expected in p)
    if "no such file" not in expected and "builtin:" not in expected:
        assert matching.startswith(str(path)) or matching.startswith(path.name), matching


def test_every_problem_in_one_file_is_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "model.yaml"
    path.write_text("engine:\n  max_draft_len: -1\n  verificaton: strict\n  device: tpu\n")
    with pytest.raises(ScenarioError) as caught:
        load_audit_config(path)
    text = "\n".join(caught.value.problems)
    assert "max_draft_len" in text and "verificaton" in text and "device" in text
    assert f"{path}:2:" in text and f"{path}:3:" in text and f"{path}:4:" in text


def test_problems_across_scenario_files_are_collected(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("name: a\ndescription: x\nrequests: {}\nruns: []\n")
    (tmp_path / "b.yaml").write_text("name: b\n")
    (tmp_path / "model.yaml").write_text("scenarios: [a.yaml, b.yaml]\n")
    config = load_audit_config(tmp_path / "model.yaml")
    with pytest.raises(ScenarioError) as caught:
        plan_audit(config, tmp_path, "model.yaml")
    text = "\n".join(caught.value.problems)
    assert "a.yaml" in text and "b.yaml" in text
