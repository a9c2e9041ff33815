"""``resolve_audit``: model.yaml read once, every problem of it and of what it names reported in
one pass, with file:line, key path and did-you-mean."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from specseed.core.errors import ScenarioError
from specseed.plan.resolve import PYTHON_SOURCE, resolve_audit
from specseed.scenarios import loader

THREE_ROUNDS = """\
engine:
  name: reference
  verificaton: strict
  max_draft_len: 99
  options:
    model_sed: 1
scenarios: [uptme]
"""
"""A typo'd engine key, a bad max_draft_len, a misspelt scenario and an options typo: once
three rounds of errors (engine, then scenarios, then options)."""


def _problems(source: Any, **kwargs: Any) -> list[str]:
    with pytest.raises(ScenarioError) as caught:
        resolve_audit(source, **kwargs)
    return caught.value.problems


def test_every_problem_of_one_file_comes_in_one_error(tmp_path: Path) -> None:
    path = tmp_path / "model.yaml"
    path.write_text(THREE_ROUNDS, encoding="utf-8")
    problems = _problems(path)
    assert len(problems) == 4, problems
    expected = [
        f"{path}:3: engine.verificaton: unknown key 'verificaton'. Did you mean 'verification'?",
        f"{path}:4: engine.max_draft_len: Input should be less than or equal to 16 (got 99)",
        f"{path}:6: engine.options.model_sed: unknown key 'model_sed'. Did you mean 'model_seed'?",
        "builtin:uptme: unknown scenario. Did you mean 'uptime'?",
    ]
    assert sorted(problems) == sorted(expected)


def test_a_scenario_file_problem_comes_with_the_engine_problems(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("name: s\ndescription: d\nrequests: {}\nruns: []\n")
    path = tmp_path / "model.yaml"
    path.write_text("engine:\n  devce: cpu\nscenarios: [s.yaml]\n", encoding="utf-8")
    text = "\n".join(_problems(path))
    assert f"{path}:2: engine.devce: unknown key 'devce'. Did you mean 'device'?" in text
    assert "s.yaml:3: requests:" in text and "s.yaml:4: runs:" in text


@pytest.mark.parametrize("key", ["checkpoint", "draft_checkpoint"])
def test_a_missing_checkpoint_is_reported_with_its_line_and_key(tmp_path: Path, key: str) -> None:
    path = tmp_path / "model.yaml"
    path.write_text(f"engine:\n  {key}: does/not/exist\nscenarios: [uptime]\n")
    [problem] = _problems(path)
    assert problem.startswith(f"{path}:2: engine.{key}: {tmp_path / 'does/not/exist'}: ")
    assert "no such directory" in problem


def test_a_checkpoint_without_config_json_or_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    path = tmp_path / "model.yaml"
    path.write_text("engine:\n  checkpoint: empty\n  draft_checkpoint: file\n")
    text = "\n".join(_problems(path))
    assert f"{path}:2: engine.checkpoint: {tmp_path / 'empty'}: no config.json in it." in text
    assert f"{path}:3: engine.draft_checkpoint: {tmp_path / 'file'}: not a directory." in text


def test_a_missing_checkpoint_exits_2_through_the_cli_without_torch(tmp_path: Path) -> None:
    """Validation, before any engine loads: exit 2 with file:line and key; torch never
    imported."""
    path = tmp_path / "model.yaml"
    path.write_text("engine:\n  checkpoint: does/not/exist\nscenarios: [uptime]\n")
    script = (
        "import json, sys\n"
        "from typer.testing import CliRunner\n"
        "from specseed.cli.app import app\n"
        f"result = CliRunner().invoke(app, ['audit', {str(path)!r}])\n"
        "print(json.dumps({'code': result.exit_code, 'output': result.output,"
        " 'torch': 'torch' in sys.modules}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 2, result["output"]
    assert f"{path}:2: engine.checkpoint: " in result["output"]
    assert "does/not/exist: no such directory" in result["output"]
    assert not result["torch"]


def test_a_dict_config_gets_key_paths_and_did_you_mean_without_a_file() -> None:
    problems = _problems(
        {
            "engine": {"verificaton": "strict", "options": {"model_sed": 1}},
            "scenarios": ["uptme"],
        }
    )
    assert sorted(problems) == sorted(
        [
            "engine.verificaton: unknown key 'verificaton'. Did you mean 'verification'?",
            "engine.options.model_sed: unknown key 'model_sed'. Did you mean 'model_seed'?",
            "builtin:uptme: unknown scenario. Did you mean 'uptime'?",
        ]
    )


def test_the_error_message_carries_the_problems(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as caught:
        resolve_audit({"engine": {"max_draft_len": -1}})
    assert str(caught.value) == (
        "the audit config does not validate\n"
        "  • engine.max_draft_len: Input should be greater than or equal to 0 (got -1)"
    )


def test_the_api_raises_with_the_problems_in_its_message(tmp_path: Path) -> None:
    import specseed.api as api

    path = tmp_path / "bad.yaml"
    path.write_text("engine:\n  verificaton: strict\nscenarios: [uptime]\n")
    with pytest.raises(ScenarioError) as caught:
        api.audit(path)
    message = str(caught.value)
    assert message.startswith(f"{path} does not validate\n")
    assert f"{path}:2: engine.verificaton: unknown key 'verificaton'. Did you mean" in message


def test_a_resolved_audit_carries_typed_settings_and_plans(tmp_path: Path) -> None:
    from specseed.engine_adapters.reference.options import ReferenceOptions

    (tmp_path / "model.yaml").write_text(
        "engine:\n  max_draft_len: 2\n  options:\n    model_seed: 5\nscenarios: [uptime]\n"
    )
    resolved = resolve_audit(tmp_path / "model.yaml")
    assert isinstance(resolved.engine.options, ReferenceOptions)
    assert resolved.engine.options.model_seed == 5
    assert resolved.engine.max_draft_len == 2
    assert [p.scenario.name for p in resolved.planned] == ["uptime"]
    assert all(
        plan.settings.options is resolved.engine.options for plan in resolved.planned[0].plans
    )
    assert resolved.inputs == (tmp_path / "model.yaml",)
    assert resolved.model_yaml == tmp_path / "model.yaml" and not resolved.scenario_file
    from_dict = resolve_audit({"scenarios": ["uptime"]})
    assert from_dict.source == PYTHON_SOURCE and from_dict.model_yaml is None


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every call of the real ``read_source`` and YAML parse, by file (nothing mocked away)."""
    counts: Counter[str] = Counter()
    real_read, real_parse = loader.read_source, loader._parse_yaml

    def read_source(path: Path) -> str:
        counts[f"read {Path(path).name}"] += 1
        return real_read(path)

    def parse_yaml(text: str, source: str) -> Any:
        counts[f"parse {Path(source).name}"] += 1
        return real_parse(text, source)

    monkeypatch.setattr(loader, "read_source", read_source)
    monkeypatch.setattr(loader, "_parse_yaml", parse_yaml)
    return counts


SCENARIO = """\
name: mine
description: one request, twice
requests:
  a: {prompt: [1, 2, 3], seed: 1}
runs:
  - {name: one, requests: [a]}
  - {name: two, requests: [a]}
expect:
  - {check: run-to-run, runs: [one, two]}
"""


def test_resolve_audit_reads_and_parses_each_file_once(tmp_path: Path, reads: Counter[str]) -> None:
    (tmp_path / "mine.yaml").write_text(SCENARIO)
    (tmp_path / "model.yaml").write_text("scenarios: [mine.yaml, uptime]\n")
    resolve_audit(tmp_path / "model.yaml")
    assert reads["read model.yaml"] == 1 and reads["parse model.yaml"] == 1
    assert reads["read mine.yaml"] == 1 and reads["parse mine.yaml"] == 1


def test_a_scenario_file_given_for_model_yaml_is_read_once(
    tmp_path: Path, reads: Counter[str]
) -> None:
    (tmp_path / "mine.yaml").write_text(SCENARIO)
    resolved = resolve_audit(tmp_path / "mine.yaml")
    assert resolved.scenario_file and [p.scenario.name for p in resolved.planned] == ["mine"]
    assert reads["read mine.yaml"] == 1 and reads["parse mine.yaml"] == 1


def test_one_cli_audit_parses_model_yaml_once(tmp_path: Path, reads: Counter[str]) -> None:
    from typer.testing import CliRunner

    from specseed.cli.app import app

    (tmp_path / "model.yaml").write_text("scenarios: [uptime]\n")
    result = CliRunner().invoke(app, ["audit", str(tmp_path / "model.yaml")])
    assert result.exit_code == 0, result.output
    assert reads["read model.yaml"] == 1 and reads["parse model.yaml"] == 1
