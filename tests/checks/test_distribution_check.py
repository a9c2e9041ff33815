"""The ``distribution`` check on the reference engine: the correct engine passes, each planted
bias fails at the library's default budget and is named, and evidence it cannot get is skip."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from specseed.checks.context import CheckContext
from specseed.checks.distribution import distribution
from specseed.checks.findings import Finding
from specseed.distribution.oracle import OracleUnavailable, oracle_for
from specseed.engine_adapters.contracts import get_contract
from specseed.plan.planning import plan_audit
from specseed.run.execute import run_audit
from specseed.run.results import AuditResult
from specseed.scenarios.schema import AuditConfig, EngineConfig
from specseed.traces.records import EngineConfigRecord


def _audit(
    defects: list[str], scenario: str = "distribution", contract: str = "ideal"
) -> AuditResult:
    options: dict[str, object] = {"defects": list(defects), "rng_profile": contract}
    config = AuditConfig(
        engine=EngineConfig(contract=contract, options=options), scenarios=[scenario]
    )
    return run_audit(config, plan_audit(config, Path.cwd()), Path.cwd())


def _findings(result: AuditResult) -> list[Finding]:
    return [f for f in result.findings if f.check == "distribution"]


@pytest.fixture(scope="module")
def correct() -> AuditResult:
    return _audit([])


def test_correct_engine_passes_and_states_level_power_and_precision(correct: AuditResult) -> None:
    findings = _findings(correct)
    assert [f.status for f in findings] == ["pass"]
    text = "\n".join(findings[0].details)
    assert "alpha 0.001 family-wise" in text and "Holm" in text
    assert "detectable with 80% power: pit TV >= " in text
    assert "precision: float32 logits" in text


@pytest.mark.parametrize(
    "defect", ["biased-acceptance", "accept-reuses-draft-draw", "draft-temperature-skipped"]
)
def test_planted_bias_fails_and_is_named(defect: str) -> None:
    findings = _findings(_audit([defect]))
    assert [f.status for f in findings] == ["fail"]
    assert defect in {s.defect for s in findings[0].suspects}


def test_one_draw_slots_coupling_fails_the_default_scenario_through_step_aware_tests() -> None:
    # trtllm-pr17599 (subsequence = kernel row, slots one draw wide): the bonus token and the
    # next draft read one draw. The built-in scenario alone must see it, through the pairs
    # the trace says shared a draw; a coupling is a failure whatever the contract states.
    findings = _findings(_audit([], contract="trtllm-pr17599"))
    assert [f.status for f in findings] == ["fail"]
    rejected = [d for d in findings[0].details if d.startswith("rejected ")]
    assert any("steps[1/1 accepted, +1 shared]" in d for d in rejected), rejected
    assert "draw-overlap" in {s.defect for s in findings[0].suspects}


def test_scenarios_without_a_distribution_section_get_no_finding() -> None:
    assert _findings(_audit([], "reproducibility")) == []


def test_engine_without_a_loadable_checkpoint_is_skip_with_the_reason(
    correct: AuditResult,
) -> None:
    with pytest.raises(OracleUnavailable, match="names no checkpoint"):
        oracle_for(EngineConfigRecord(name="openai", checkpoint=None))
    scenario = correct.scenarios[0]
    trace = next(iter(scenario.traces.values()))
    config = replace(trace.header.engine_config, name="openai")
    moved = replace(trace, header=replace(trace.header, engine_config=config))
    ctx = CheckContext(scenario.scenario, {trace.name: moved}, get_contract("ideal"))
    (finding,) = distribution(ctx, moved)
    assert finding.status == "skip"
    assert "no exact target probabilities" in finding.message


@pytest.mark.slow
def test_correct_engine_passes_across_model_and_request_seeds() -> None:
    # The false-alarm guard on the engine itself (benchmarks/bench_distribution.py
    # --false-alarms measures it at the full budget): 8 tiny models and request seeds, 60
    # copies of each request. Each run's finding is a false alarm with probability <= 1e-3.
    from specseed.plan.planning import PlannedScenario, base_settings, plan_run
    from specseed.scenarios.loader import LoadedScenario

    loaded = plan_audit(AuditConfig(scenarios=["distribution"]), Path.cwd())[0]
    statuses = []
    for repeat in range(8):
        scenario = loaded.scenario.model_copy(
            update={
                "requests": {
                    name: spec.model_copy(update={"seed": (spec.seed or 0) + 7919 * (repeat + 1)})
                    for name, spec in loaded.scenario.requests.items()
                },
                "distribution": loaded.scenario.distribution.model_copy(update={"samples": 60}),
            }
        )
        config = AuditConfig(engine=EngineConfig(options={"model_seed": repeat}))
        base = base_settings(config.engine, Path.cwd())
        planned = PlannedScenario(
            LoadedScenario(scenario, loaded.loaded.source),
            tuple(plan_run(scenario, run, base) for run in scenario.runs),
            base,
        )
        result = run_audit(config, [planned], Path.cwd())
        statuses += [f.status for f in _findings(result)]
    assert statuses == ["pass"] * 8
