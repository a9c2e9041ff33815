"""The built-in library: it validates, and together it covers every defect class."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from specseed.core.defects import DEFECT_IDS
from specseed.plan.planning import base_settings, plan_audit, plan_run
from specseed.scenarios.loader import library_names, load_library_scenario
from specseed.scenarios.schema import AuditConfig, Scenario


def test_library_validates_and_plans() -> None:
    planned = plan_audit(AuditConfig(), Path.cwd())
    default = [n for n in library_names() if load_library_scenario(n).scenario.default_audit]
    assert [p.scenario.name for p in planned] == default
    # The long distribution scenarios run when named; the one the matrix needs is default.
    assert "distribution" in default
    assert set(library_names()) - set(default) == {
        "distribution-draft-len",
        "distribution-overlap",
        "distribution-verification",
        "slot-reuse",
    }
    named = plan_audit(AuditConfig(scenarios=library_names()), Path.cwd())
    assert all(p.plans for p in named)
    assert all(p.plans for p in planned)


def test_library_covers_every_defect_class() -> None:
    covered = {d for name in library_names() for d in load_library_scenario(name).scenario.covers}
    assert covered == set(DEFECT_IDS)


def test_scenario_defaults_and_explicit_null_seed() -> None:
    scenario = Scenario.model_validate(
        {
            "name": "s",
            "description": "d",
            "defaults": {"seed": 5, "temperature": 0.5},
            "requests": {"a": {"prompt": [1]}, "b": {"prompt": [1], "seed": None}},
            "runs": [{"name": "r", "requests": ["a", "b"]}],
        }
    )
    assert scenario.resolved_request("a").seed == 5
    assert scenario.resolved_request("b").seed is None
    assert scenario.resolved_request("a").temperature == 0.5


def test_warmup_sizes_relative_to_max() -> None:
    scenario = Scenario.model_validate(
        {
            "name": "s",
            "description": "d",
            "requests": {"a": {"prompt": [1]}},
            "runs": [{"name": "r", "requests": ["a"], "warmup": [3, "max", "max+4"]}],
        }
    )
    assert scenario.runs[0].warmup_sizes(8) == [3, 8, 12]


def test_distribution_copies_are_seeded_interleaved_and_keep_arrivals() -> None:
    scenario = Scenario.model_validate(
        {
            "name": "s",
            "description": "d",
            "requests": {
                "a": {"prompt": [1], "seed": 10},
                "u": {"prompt": [2]},
                "g": {"prompt": [3], "temperature": 0.0},
                "x": {"prompt": [4], "seed": 2**64 - 1},
            },
            "runs": [{"name": "r", "requests": ["x", "a", "u", "g"], "arrivals": {"a": 2}}],
            "distribution": {"samples": 3, "requests": ["a", "u", "g"]},
        }
    )
    served = scenario.served_requests(scenario.runs[0])
    names = [spec.name for _, spec in served]
    assert names == ["x", "a.0", "u.0", "g.0", "a.1", "u.1", "g.1", "a.2", "u.2", "g.2"]
    seeds = {spec.name: spec.seed for _, spec in served}
    assert (seeds["a.0"], seeds["a.2"], seeds["u.1"], seeds["x"]) == (10, 12, None, 2**64 - 1)
    plan = plan_run(scenario, scenario.runs[0], base_settings(AuditConfig().engine, Path.cwd()))
    assert {r.request_id: r.arrival_step for r in plan.requests}["a.1"] == 2


def test_distribution_names_only_known_requests() -> None:
    with pytest.raises(ValidationError, match="distribution: unknown request 'b'"):
        Scenario.model_validate(
            {
                "name": "s",
                "description": "d",
                "requests": {"a": {"prompt": [1]}},
                "runs": [{"name": "r", "requests": ["a"]}],
                "distribution": {"requests": ["b"]},
            }
        )
