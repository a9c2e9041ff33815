"""What an audit keeps in memory: a scenario's steps go once its checks have run, so memory
grows with the largest scenario, not with the audit; the findings do not change."""

from __future__ import annotations

from pathlib import Path

from specseed.plan.planning import plan_audit
from specseed.run.execute import run_audit
from specseed.scenarios.schema import AuditConfig


def test_steps_are_dropped_after_the_checks_unless_asked_for() -> None:
    config = AuditConfig(scenarios=["distinct-seeds", "uptime"])
    planned = plan_audit(config, Path.cwd())
    light = run_audit(config, planned, Path.cwd())
    whole = run_audit(config, planned, Path.cwd(), keep_steps=True)
    assert light.findings == whole.findings and light.verdict == "pass"
    for light_scenario, whole_scenario in zip(light.scenarios, whole.scenarios, strict=True):
        for name, trace in light_scenario.traces.items():
            assert trace.steps == ()
            assert trace.header == whole_scenario.traces[name].header
            assert trace.end.outputs == whole_scenario.traces[name].end.outputs
            assert whole_scenario.traces[name].steps
