"""vLLM 0.32.0 samples probabilistic drafts from the global generator; rng-contract says so.

``draft_sample_method: probabilistic`` makes ``compute_probs_and_sample_next_token``
(``vllm/v1/spec_decode/llm_base_proposer.py``) draw ``q.exponential_()`` without the
request's generator ("TODO(woosuk): Consider seeds."). A seeded request's draft tokens then
depend on whatever else consumed the global generator, which ``vllm-generators`` (a seeded
request draws from its own generator only) does not allow.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specseed.models.make_checkpoint import CheckpointBundle
from specseed.plan.planning import plan_audit
from specseed.run.execute import run_audit
from specseed.scenarios.schema import AuditConfig
from tests.engine_adapters.vllm.common import vllm_engine

pytestmark = pytest.mark.vllm

SCENARIO = """\
name: probabilistic-drafts
description: one seeded sampled request under EAGLE3 with probabilistic draft sampling
covers: []
requests:
  s: {prompt: [12, 40, 7, 91, 3], seed: 77, temperature: 1.0, max_tokens: 8}
runs:
  - name: alone
    requests: [s]
"""


def test_rng_contract_fails_on_draft_draws_from_the_global_generator(
    engine,  # type: ignore[no-untyped-def]
    checkpoint: CheckpointBundle,
    tmp_path: Path,
) -> None:
    (tmp_path / "probabilistic.yaml").write_text(SCENARIO, encoding="utf-8")
    config = AuditConfig(
        engine=vllm_engine(checkpoint, draft_sample_method="probabilistic"),
        scenarios=["probabilistic.yaml"],
    )
    result = run_audit(
        config, plan_audit(config, tmp_path), tmp_path, adapter=engine, keep_steps=True
    )
    (scenario,) = result.scenarios
    trace = scenario.traces["alone"]
    assert not trace.failed, trace.end.failure
    drafts = [e for _s, row in trace.rows_of("s") for e in row.events if e.kind == "draft"]
    assert drafts, "no draft draws recorded"
    assert {e.kernel for e in drafts} == {"compute_probs_and_sample_next_token"}
    assert 77 not in {e.seed for e in drafts}  # the engine's global generator, not the request's
    own = [e for _s, row in trace.rows_of("s") for e in row.events if e.kind != "draft"]
    assert own and {e.seed for e in own} == {77}
    (finding,) = [f for f in scenario.findings if f.check == "rng-contract"]
    assert finding.status == "fail"
    assert finding.requests == ("s",)
    bad = [row for row in finding.offsets if row.mismatch]
    assert bad and all(row.event.startswith("draft") for row in bad)
    assert all("seed" in row.mismatch for row in bad)
