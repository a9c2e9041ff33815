"""The ``losslessness`` check on the in-process reference engine: the correct engine passes
with its power stated, biased acceptance fails and is named, and what it cannot judge is skip
with the reason. The scenario side: ``baseline_of`` makes a K = 0 run with its own seeds."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from specseed.checks.baseline import losslessness
from specseed.checks.context import CheckContext
from specseed.checks.findings import Finding
from specseed.engine_adapters.contracts import get_contract
from specseed.plan.planning import PlannedScenario, base_settings, plan_run
from specseed.run.execute import run_audit
from specseed.run.results import AuditResult
from specseed.scenarios.loader import LoadedScenario
from specseed.scenarios.schema import AuditConfig, Expectation, Scenario
from specseed.traces.records import EngineFailure


def _scenario(
    samples: int = 150,
    baseline: dict[str, Any] | None = None,
    logprobs: int | None = None,
    max_tokens: int = 4,
) -> Scenario:
    baseline_run = {"name": "baseline", "requests": ["hot"], "baseline_of": "speculative"}
    hot: dict[str, Any] = {"prompt": [31, 7, 88, 14], "seed": 7}
    if logprobs is not None:
        hot["logprobs"] = logprobs
    return Scenario.model_validate(
        {
            "name": "lossless-test",
            "description": "two arms",
            "defaults": {"max_tokens": max_tokens},
            "requests": {"hot": hot},
            "runs": [
                {"name": "speculative", "requests": ["hot"], "engine": {"max_num_requests": 64}},
                {**baseline_run, "engine": {"max_num_requests": 64}, **(baseline or {})},
            ],
            "expect": [{"check": "losslessness", "runs": ["speculative", "baseline"]}],
            "distribution": {"samples": samples},
        }
    )


def _audit(scenario: Scenario, defects: tuple[str, ...] = ()) -> AuditResult:
    config = AuditConfig.model_validate(
        {
            "engine": {"options": {"defects": list(defects)}},
            "scenarios": ["test.yaml"],
            # The oracle's check has its own tests; this one needs no model.
            "checks": {"skip": ["distribution"]},
        }
    )
    base = base_settings(config.engine, Path.cwd())
    item = PlannedScenario(
        LoadedScenario(scenario, "test.yaml"),
        tuple(plan_run(scenario, run, base) for run in scenario.runs),
        base,
    )
    return run_audit(config, [item], Path.cwd())


def _lossless(result: AuditResult) -> list[Finding]:
    return [f for f in result.findings if f.check == "losslessness"]


@pytest.fixture(scope="module")
def correct() -> AuditResult:
    return _audit(_scenario())


def test_correct_engine_passes_with_its_power_stated(correct: AuditResult) -> None:
    [finding] = _lossless(correct)
    assert finding.status == "pass", finding
    assert "detectable TV" in finding.message
    text = "\n".join(finding.details)
    assert "alpha 0.001 family-wise" in text and "Holm" in text
    assert "TV detectable with 80% power: position 0 0." in text
    # The baseline was served without speculation, on seeds of its own.
    traces = correct.scenarios[0].traces
    assert traces["baseline"].header.engine_config.max_draft_len == 0
    assert traces["speculative"].header.engine_config.max_draft_len == 3
    seeds = [{r.seed for r in traces[n].header.requests} for n in ("speculative", "baseline")]
    assert seeds[0] == set(range(7, 157)) and seeds[1] == set(range(157, 307))


def test_biased_acceptance_fails_and_is_named() -> None:
    [finding] = _lossless(_audit(_scenario(), ("biased-acceptance",)))
    assert finding.status == "fail", finding
    assert [s.defect for s in finding.suspects] == ["biased-acceptance"]
    assert finding.requests == ("hot",)
    assert any(line.startswith("rejected hot (T=1) position") for line in finding.details)


@pytest.fixture(scope="module")
def scored() -> AuditResult:
    """The correct engine with every copy asking the top 20 log-probabilities."""
    return _audit(_scenario(logprobs=20))


def test_reported_logprobs_score_every_token_they_can_and_state_the_power(
    scored: AuditResult,
) -> None:
    [finding] = _lossless(scored)
    assert finding.status == "pass", finding
    assert "per token" in finding.message
    [line] = [d for d in finding.details if "scored by the K = 0 run's log-probabilities" in d]
    spec_tokens = int(line.split(": ")[1].split(" speculative")[0])
    # Every first token is scored (its prefix is empty), later ones where a baseline copy
    # emitted the same prefix: at least the 150 first tokens, at most all 600.
    assert 150 <= spec_tokens <= 600
    assert "of TV 0." in line and "detected with 80% power" in line


def test_biased_acceptance_fails_the_per_token_test() -> None:
    scenario = _scenario(logprobs=20, max_tokens=12)
    [finding] = _lossless(_audit(scenario, ("biased-acceptance",)))
    assert finding.status == "fail", finding
    [line] = [d for d in finding.details if d.startswith("rejected hot (T=1) per token")]
    assert "Kolmogorov-Smirnov D" in line and "PIT CDF differs" in line


def test_reports_that_are_not_the_sampled_distribution_are_not_used(
    scored: AuditResult,
) -> None:
    """A K = 0 endpoint that reports another distribution than it samples from (here: flat
    reports) does not score the speculative tokens: the control says so."""
    from specseed.traces.records import TokenLogprob

    base = scored.scenarios[0].traces["baseline"]
    # Most of the mass on token 0, which the engine hardly ever samples.
    wrong = ((0, math.log(0.9)), *((t, math.log(0.004)) for t in range(1, 20)))
    reports = {
        rid: [TokenLogprob(math.log(0.004), wrong) for _ in entries]
        for rid, entries in base.end.logprobs.items()
    }
    finding = _judge(scored, baseline=replace(base, end=replace(base.end, logprobs=reports)))
    assert finding.status == "pass" and "per token" not in finding.message
    assert any("do not describe its own tokens" in d for d in finding.details)


def _judge(correct: AuditResult, **traces: Any) -> Finding:
    scenario = correct.scenarios[0]
    recorded = {**scenario.traces, **traces}
    ctx = CheckContext(scenario.scenario, recorded, get_contract("ideal"))
    expectation = Expectation(check="losslessness", runs=["speculative", "baseline"])
    [finding] = losslessness(ctx, expectation)
    return finding


def test_a_crashed_run_is_skip(correct: AuditResult) -> None:
    base = correct.scenarios[0].traces["baseline"]
    crashed = replace(
        base, end=replace(base.end, failure=EngineFailure(3, "scenario", 8, "E", "x"))
    )
    finding = _judge(correct, baseline=crashed)
    assert finding.status == "skip" and "did not complete" in finding.message


def test_a_baseline_that_speculates_is_skip(correct: AuditResult) -> None:
    base = correct.scenarios[0].traces["baseline"]
    config = replace(base.header.engine_config, max_draft_len=2)
    moved = replace(base, header=replace(base.header, engine_config=config))
    finding = _judge(correct, baseline=moved)
    assert finding.status == "skip" and "not a K = 0 baseline" in finding.message


def test_arms_that_share_seeds_are_skip() -> None:
    # A K = 0 run that is not declared a baseline reuses the speculative run's seeds.
    scenario = _scenario(40, {"baseline_of": None, "engine": {"max_draft_len": 0}})
    [finding] = _lossless(_audit(scenario))
    assert finding.status == "skip" and "not independent" in finding.message
    assert "baseline_of: speculative" in finding.message


def test_too_few_copies_is_skip() -> None:
    [finding] = _lossless(_audit(_scenario(10)))
    assert finding.status == "skip" and "fewer than 30 per arm" in finding.message


def test_baseline_of_is_validated() -> None:
    with pytest.raises(ValidationError, match="serves without speculation"):
        _scenario(baseline={"engine": {"max_draft_len": 2}})
    with pytest.raises(ValidationError, match="unknown run 'speculativ'"):
        _scenario(baseline={"baseline_of": "speculativ"})
    with pytest.raises(ValidationError, match="names the run itself"):
        _scenario(baseline={"baseline_of": "baseline"})
    scenario = _scenario(5)
    run = scenario.runs[1]
    assert run.engine.max_draft_len == 0
    assert [r.seed for _, r in scenario.served_requests(run)] == [12, 13, 14, 15, 16]
