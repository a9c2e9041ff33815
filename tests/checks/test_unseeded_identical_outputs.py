"""unseeded-independence reads identical outputs as a shared stream only for requests sampled
broadly: with top_k 1 (or near-greedy sampling) two unseeded requests with one prompt agree
on a correct engine, a false alarm ``specseed search`` found (issue 37); where the kernel
shares draws behind states that differ (``row0-seed``), broad sampling still shows it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specseed.checks.findings import Finding
from specseed.plan.planning import base_settings, plan_scenario
from specseed.run.execute import run_audit
from specseed.scenarios.loader import LoadedScenario
from specseed.scenarios.schema import AuditConfig, EngineConfig, Scenario


def _unseeded_pair(defects: list[str], **sampling: Any) -> list[Finding]:
    request = {"prompt": [5, 6, 7], "max_tokens": 10, "seed": None, **sampling}
    scenario = Scenario.model_validate(
        {
            "name": "pair",
            "description": "two unseeded requests with one prompt",
            "requests": {"a": request, "b": request},
            "runs": [{"name": "base", "requests": ["a", "b"]}],
        }
    )
    config = AuditConfig(engine=EngineConfig(options={"defects": defects}))
    planned = plan_scenario(LoadedScenario(scenario, "pair"), base_settings(config, Path.cwd()))
    result = run_audit(config, [planned], Path.cwd())
    return [f for f in result.findings if f.check == "unseeded-independence"]


@pytest.mark.parametrize(
    "sampling",
    [
        {"temperature": 0.8, "top_k": 1, "top_p": 0.5},  # what the search found
        {"temperature": 0.8, "top_k": 1},
        {"temperature": 0.05},
    ],
)
def test_narrow_sampling_that_repeats_itself_is_no_shared_stream(sampling: dict[str, Any]) -> None:
    (finding,) = _unseeded_pair([], **sampling)
    assert finding.status == "pass", finding.message


def test_broad_sampling_still_shows_draws_shared_behind_differing_states() -> None:
    (finding,) = _unseeded_pair(["row0-seed"], temperature=1.0)
    assert finding.status == "fail", finding.message
    (clean,) = _unseeded_pair([], temperature=1.0)
    assert clean.status == "pass", clean.message
