"""Edge values too large to keep as files in ``invalid/``: each is a bounded validation
error naming the file, the line and the limit, not a hang."""

from __future__ import annotations

import pytest

from specseed.core.errors import ScenarioError
from specseed.scenarios.loader import parse_scenario
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
