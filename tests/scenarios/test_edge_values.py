"""Edge values too large to keep as files in ``invalid/``: each is a bounded validation
error naming the file, the line and the limit, not a hang."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specseed.cli.app import app
from specseed.core.errors import ScenarioError
from specseed.plan.resolve import resolve_audit
from specseed.scenarios.loader import MAX_EXPANDED_NODES, parse_scenario
from specseed.scenarios.schema import MAX_PROMPT_LENGTH, MAX_REQUESTS


def _problems(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, "edge.yaml")
    return caught.value.problems


def test_a_prompt_past_the_limit_is_refused() -> None:
    ids = ", ".join(["1"] * (MAX_PROMPT_LENGTH + 1))
    text = f"name: e\ndescription: d\nrequests:\n  a: {{prompt: [{ids}]}}\n"
    text += "runs:\n  - {name: r, requests: [a]}\n"
    problems = _problems(text)
    assert any(
        p.startswith("edge.yaml:4: requests.a.prompt") and f"at most {MAX_PROMPT_LENGTH}" in p
        for p in problems
    ), problems


def test_more_requests_than_a_scenario_may_define_are_refused() -> None:
    lines = "\n".join(f"  r{i}: {{prompt: [1]}}" for i in range(MAX_REQUESTS + 1))
    text = f"name: e\ndescription: d\nrequests:\n{lines}\nruns:\n  - {{name: r, requests: [r0]}}\n"
    problems = _problems(text)
    assert any(f"at most {MAX_REQUESTS} items" in p for p in problems), problems[:3]


def _alias_bomb(levels: int = 9) -> str:
    """A scenario whose runs name ``10**levels`` requests once its aliases are expanded, in
    under 1 KB of text: each anchor is a list of ten aliases of the one before."""
    lines = ["name: bomb", "description: d", "requests: {a: {prompt: [1]}}", "x0: &x0 [a]"]
    lines += [f"x{n}: &x{n} [{', '.join([f'*x{n - 1}'] * 10)}]" for n in range(1, levels + 1)]
    lines += ["runs:"] + [f"  - {{name: r{i}, requests: *x{levels}}}" for i in range(10)]
    return "\n".join(lines) + "\n"


def _assert_refused_as_a_bomb(problems: list[str], source: str) -> None:
    assert any(
        source + ":" in p and f"more than {MAX_EXPANDED_NODES:,} YAML nodes" in p for p in problems
    ), problems


def test_an_alias_bomb_is_refused_before_it_expands() -> None:
    started = time.monotonic()
    problems = _problems(_alias_bomb())
    assert time.monotonic() - started < 1.0
    _assert_refused_as_a_bomb(problems, "edge.yaml")
    assert any(p.startswith("edge.yaml:10:") for p in problems), problems  # x6: past the limit


def test_an_alias_bomb_is_refused_through_resolve_audit(tmp_path: Path) -> None:
    (tmp_path / "bomb.yaml").write_text(_alias_bomb())
    (tmp_path / "model.yaml").write_text("scenarios: [bomb.yaml]\n")
    started = time.monotonic()
    with pytest.raises(ScenarioError) as caught:
        resolve_audit(tmp_path / "model.yaml")
    assert time.monotonic() - started < 1.0
    _assert_refused_as_a_bomb(caught.value.problems, "bomb.yaml")


def test_an_alias_bomb_is_exit_2_in_scenarios_validate(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_alias_bomb())
    started = time.monotonic()
    result = CliRunner().invoke(app, ["scenarios", "validate", str(bomb)])
    assert time.monotonic() - started < 1.0
    assert result.exit_code == 2, result.output
    assert f"more than {MAX_EXPANDED_NODES:,} YAML nodes" in result.output


def test_aliases_that_stay_under_the_limit_still_load() -> None:
    text = "name: n\ndescription: d\nrequests: {a: {prompt: &p [1, 2, 3]}, b: {prompt: *p}}\n"
    text += "runs:\n  - {name: r0, requests: &both [a, b]}\n"
    text += "".join(f"  - {{name: r{i}, requests: *both}}\n" for i in range(1, 10))
    scenario = parse_scenario(text, "edge.yaml")
    assert len(scenario.runs) == 10
