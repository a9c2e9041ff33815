"""Near-tie triage: a greedy divergence inside the stated numeric envelope is numerics, not
a defect; outside it, the defect rules stand (``checks/near_ties.py``).

The divergences are real: the reference engine with ``greedy-drift`` verifies drafts in
bfloat16 and flips near-ties. Under the float32 logits it states, no flip is inside the
float32 envelope (a defect); had it stated bfloat16 logits, as a bf16 engine does, every flip
is inside bfloat16's (numerics: near-tie).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from specseed.checks.attribution import root_causes
from specseed.checks.near_ties import measure
from specseed.plan.planning import plan_audit
from specseed.run.execute import evaluate, run_audit
from specseed.run.results import ScenarioResult
from specseed.scenarios.schema import AuditConfig, EngineConfig
from specseed.traces.records import RunTrace


@pytest.fixture(scope="module")
def drifted() -> ScenarioResult:
    config = AuditConfig(
        engine=EngineConfig(options={"defects": ["greedy-drift"]}),
        scenarios=["greedy-speculation"],
    )
    result = run_audit(config, plan_audit(config, Path.cwd()), Path.cwd(), keep_steps=True)
    return result.scenarios[0]


def _stated(traces: dict[str, RunTrace], dtype: str) -> dict[str, RunTrace]:
    return {
        name: replace(
            trace,
            header=replace(
                trace.header, environment={**trace.header.environment, "logits_dtype": dtype}
            ),
        )
        for name, trace in traces.items()
    }


def test_flips_outside_the_float32_envelope_stay_a_defect(drifted: ScenarioResult) -> None:
    [finding] = [f for f in drifted.findings if f.status == "fail"]
    assert finding.check == "greedy-spec-equivalence"
    margins = [d.margin for d in finding.diffs]
    assert margins and all(m is not None and not m.near_tie for m in margins)
    assert all(m.source == "oracle" and m.logits_dtype == "float32" for m in margins)  # type: ignore[union-attr]
    assert "greedy-drift" in {s.defect for s in finding.suspects}
    assert [c.label for c in root_causes(drifted.findings)] == ["greedy-drift"]


def test_the_same_flips_under_bfloat16_logits_are_numerics_near_ties(
    drifted: ScenarioResult,
) -> None:
    findings = evaluate(drifted.scenario, _stated(drifted.traces, "bfloat16"), "ideal")
    [finding] = [f for f in findings if f.status == "fail"]
    assert finding.suspects == ()
    assert all(d.margin is not None and d.margin.near_tie for d in finding.diffs)
    assert "every divergence is a near-tie: numerics, not a defect" in finding.message
    [cause] = root_causes(findings)
    assert cause.kind == "numerics" and cause.defects == ()
    assert cause.label.startswith("numerics: near-tie, margin ")
    assert "within the envelope" in cause.label and "bfloat16 logits" in cause.label


def test_a_token_far_from_the_top_is_no_near_tie_even_under_bfloat16(
    drifted: ScenarioResult,
) -> None:
    [finding] = [f for f in drifted.findings if f.status == "fail"]
    diff = finding.diffs[0]
    traces = _stated(drifted.traces, "bfloat16")
    left, right = traces[diff.left.run], traces[diff.right.run]
    # The right side emits, at the divergence, the token the target ranks last.
    from specseed.distribution.oracle import oracle_for

    outputs = left.end.outputs[diff.request]
    info = left.request(diff.request)
    [logits] = oracle_for(left.header.engine_config).logits(
        [(tuple(info.prompt_ids), outputs[: diff.position + 1])]
    )
    worst = int(logits[diff.position].argmin())
    edited = (*right.end.outputs[diff.request][: diff.position], worst)
    right = replace(right, end=replace(right.end, outputs={diff.request: edited}))
    margin = measure(diff, left, right)
    assert margin is not None and margin.tokens[1] == worst
    assert not margin.near_tie and margin.margin > 10 * margin.envelope
