"""The reference engine on CUDA (GPU machines only; the CPU suite is the CI gate)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specseed.checks.findings import FAILING
from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
from specseed.engine_adapters.reference.adapter import ReferenceEngine
from specseed.plan.planning import plan_audit
from specseed.run.execute import run_audit
from specseed.scenarios.schema import AuditConfig, EngineConfig
from specseed.traces.records import TraceRecorder

pytestmark = pytest.mark.gpu


def test_model_runs_on_the_device_and_serves_requests() -> None:
    engine = ReferenceEngine(EngineSettings(device="cuda"))
    assert engine.target.device.type == "cuda"
    plan = RunPlan(
        "cuda",
        "run",
        EngineSettings(device="cuda"),
        tuple(
            RequestPlan(
                f"r{i}", (5 + i, 9, 13), seed=i, temperature=1.0, top_k=0, top_p=1.0, max_tokens=16
            )
            for i in range(4)
        ),
    )
    trace = engine.run(plan, TraceRecorder())
    assert not trace.failed
    assert all(len(tokens) == 16 for tokens in trace.end.outputs.values())


def test_builtin_audit_on_cuda_reports_what_it_sees() -> None:
    """The whole library on CUDA. CUDA numerics are not promised batch-invariant, so a
    failing finding here must be attributed to numerics (logits), never to the RNG."""
    config = AuditConfig(engine=EngineConfig(device="cuda"))
    result = run_audit(config, plan_audit(config, Path.cwd()), Path.cwd())
    for finding in result.findings:
        if finding.status in FAILING:
            assert finding.check not in ("rng-contract", "draw-ranges-disjoint", "runs-complete")
            for diff in finding.diffs:
                assert diff.attribution in ("logits", "rng-state-and-logits"), finding.message
