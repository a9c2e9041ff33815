"""The losslessness check on in-process vLLM 0.32.0 (CPU build): the library's
``losslessness`` scenario serves its copies under EAGLE3 (K = 3) and again with
max_draft_len 0, which the adapter serves with no speculative_config at all (a fresh engine:
vLLM fixes speculation when the engine is built). The scenario as the session's audit of the
library served it (``library_audit``)."""

from __future__ import annotations

import pytest

from specseed.run.results import AuditResult

pytestmark = pytest.mark.vllm


def test_losslessness_on_vllm_compares_eagle3_with_plain_decoding(
    library_audit: AuditResult,
) -> None:
    [scenario] = [s for s in library_audit.scenarios if s.scenario.name == "losslessness"]
    spec, base = scenario.traces["speculative"], scenario.traces["baseline"]
    assert spec.header.engine_config.max_draft_len == 3
    assert base.header.engine_config.max_draft_len == 0
    assert not spec.failed and not base.failed
    [finding] = [f for f in scenario.findings if f.check == "losslessness"]
    print(finding.status, finding.message, *finding.details, sep="\n")
    assert finding.status in ("pass", "fail"), finding
    assert "detectable TV" in finding.message or "sub-tests reject" in finding.message
