"""The minimizer (issue 13) shrinks every detection-matrix case: with each defect injected,
the scenario built to expose it shrinks while the same check still fails naming the same
suspect, to at most three requests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specseed.checks import CHECKS
from specseed.checks.findings import FAILING
from specseed.core.defects import DEFECT_IDS
from specseed.core.errors import InputError
from specseed.engine_adapters.base import EngineAdapter
from specseed.plan.planning import PlannedScenario, base_settings, plan_run
from specseed.run.execute import create_adapter, run_audit
from specseed.run.results import AuditResult
from specseed.scenarios.loader import LoadedScenario, load_library_scenario, parse_scenario
from specseed.scenarios.schema import AuditConfig, EngineConfig, Scenario
from specseed.workflows.minimize import minimize, scenario_yaml, size_of
from tests.test_bundle import scenario_for

pytestmark = pytest.mark.slow

TARGETED = [
    d
    for d in DEFECT_IDS
    if any(d in spec.targets for spec in CHECKS.values() if spec.id != "distribution")
]
"""Defects a deterministic check targets. Those only the statistical ``distribution`` check
catches need hundreds of samples by nature: no three-request scenario can show them."""


@pytest.fixture(scope="module")
def adapter() -> Iterator[EngineAdapter]:
    engine = create_adapter(base_settings(AuditConfig(), Path.cwd()))
    yield engine
    engine.close()


def config(defect: str | None) -> AuditConfig:
    return AuditConfig(engine=EngineConfig(options={"defects": [defect] if defect else []}))


@pytest.mark.parametrize("defect", TARGETED)
def test_minimizer_shrinks_each_matrix_case_keeping_the_same_finding(
    defect: str, adapter: EngineAdapter
) -> None:
    original = load_library_scenario(scenario_for(defect)).scenario
    result = minimize(config(defect), original, Path.cwd(), adapter=adapter)
    assert result.target.defect == defect
    before, after = size_of(original), size_of(result.minimal)
    assert after.requests <= 3 and after.requests <= before.requests
    assert after.tokens < before.tokens
    assert after.runs <= before.runs
    # The written YAML is a valid scenario that, audited afresh, still shows the finding.
    minimal = parse_scenario(result.yaml_text("builtin"), "minimal.yaml")
    assert minimal == result.minimal
    audit = audit_of(minimal, config(defect), adapter)
    assert any(result.target.matches(f) for f in audit.findings)
    # ... and it is the defect that makes it fail: without it the minimal scenario passes.
    clean = audit_of(minimal, config(None), adapter)
    assert not [f for f in clean.findings if f.status in FAILING]


def audit_of(scenario: Scenario, settings: AuditConfig, adapter: EngineAdapter) -> AuditResult:
    base = base_settings(settings, Path.cwd())
    plans = tuple(plan_run(scenario, run, base) for run in scenario.runs)
    planned = [PlannedScenario(LoadedScenario(scenario, "minimal.yaml"), plans, base)]
    return run_audit(settings, planned, Path.cwd(), adapter=adapter)


def test_a_passing_scenario_is_not_minimized(adapter: EngineAdapter) -> None:
    with pytest.raises(InputError, match="does not fail"):
        minimize(
            config(None),
            load_library_scenario("distinct-seeds").scenario,
            Path.cwd(),
            adapter=adapter,
        )


def test_the_audit_budget_is_respected(adapter: EngineAdapter) -> None:
    original = load_library_scenario("batch-composition").scenario
    result = minimize(config("row0-seed"), original, Path.cwd(), adapter=adapter, max_audits=3)
    assert result.audits == 3 and result.budget_spent


def test_minimal_yaml_reads_like_the_library() -> None:
    text = scenario_yaml(load_library_scenario("uptime").scenario, "a comment")
    assert text.startswith("# a comment\nname: uptime\n")
    assert "  a: {prompt: [31, 7, 88, 14], seed: 11}" in text
