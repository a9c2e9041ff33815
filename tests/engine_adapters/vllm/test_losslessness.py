"""The losslessness check on in-process vLLM 0.32.0 (CPU build): the library's
``losslessness`` scenario serves its copies under EAGLE3 (K = 3) and again with
max_draft_len 0, which the adapter serves with no speculative_config at all (a fresh engine:
vLLM fixes speculation when the engine is built)."""

from __future__ import annotations

import pytest

from specseed.models.make_checkpoint import CheckpointBundle
from specseed.plan.planning import plan_audit
from specseed.run.execute import run_audit
from specseed.scenarios.schema import AuditConfig
from tests.engine_adapters.vllm.common import vllm_engine

pytestmark = pytest.mark.vllm


def test_losslessness_on_vllm_compares_eagle3_with_plain_decoding(  # type: ignore[no-untyped-def]
    engine, checkpoint: CheckpointBundle
) -> None:
    config = AuditConfig(
        engine=vllm_engine(checkpoint),
        scenarios=["losslessness"],
        checks={"skip": ["distribution"]},  # type: ignore[arg-type]
    )
    result = run_audit(config, plan_audit(config, checkpoint.root), checkpoint.root, adapter=engine)
    [scenario] = result.scenarios
    spec, base = scenario.traces["speculative"], scenario.traces["baseline"]
    assert spec.header.engine_config.max_draft_len == 3
    assert base.header.engine_config.max_draft_len == 0
    assert not spec.failed and not base.failed
    [finding] = [f for f in result.findings if f.check == "losslessness"]
    print(finding.status, finding.message, *finding.details, sep="\n")
    assert finding.status in ("pass", "fail"), finding
    assert "detectable TV" in finding.message or "sub-tests reject" in finding.message
