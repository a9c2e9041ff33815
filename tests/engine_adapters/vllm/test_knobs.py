"""The sampling knobs on vLLM 0.32.0 (CPU build), in-process, for real.

What vLLM 0.32.0 does with them under EAGLE3 speculation, measured here:

- penalties, stop token ids, stop strings, ``ignore_eos`` and ``logprobs`` on greedy requests:
  the same tokens, finish reasons and log-probabilities as without speculation; a stop
  sampled mid-step ends the request there (vLLM's ``check_stop`` drops the rest);
- ``min_p`` and ``logit_bias``: refused at ``add_request`` ("The min_p and logit_bias sampling
  parameters are not yet supported with speculative decoding."), so the run is a skip that
  quotes vLLM, never a failure or a crash;
- ``n``: children ``<i>_<id>`` with seed + i (``ParentRequest``), recorded as ``id#i``.
"""

from __future__ import annotations

from typing import Any

import pytest

from specseed.models.make_checkpoint import CheckpointBundle
from specseed.plan.planning import plan_audit
from specseed.run.execute import run_audit
from specseed.run.results import AuditResult
from specseed.scenarios.schema import AuditConfig
from tests.engine_adapters.vllm.common import vllm_engine

pytestmark = pytest.mark.vllm

PROMPT = [261, 376, 346, 348, 116, 298]
# The suite's checkpoint (seed 0) decodes PROMPT greedily as
# 504 155 413 235 161 479 272 407 260 57 ...: token 407 is the 8th, "W" (57) the 10th.
GREEDY = {
    "name": "greedy-knobs",
    "description": "Greedy requests with knobs, without and with speculation.",
    "defaults": {"max_tokens": 16, "temperature": 0.0},
    "requests": {
        "presence": {"prompt": PROMPT, "presence_penalty": 1.5, "logprobs": 2},
        "stop-token": {"prompt": PROMPT, "stop_token_ids": [407]},
        "stop-text": {"prompt": PROMPT, "stop": "W"},
    },
    "runs": [
        {
            "name": "no-speculation",
            "requests": ["presence", "stop-token", "stop-text"],
            "engine": {"max_draft_len": 0},
        },
        {"name": "speculative", "requests": ["presence", "stop-token", "stop-text"]},
    ],
    "expect": [{"check": "knob-equivalence", "runs": ["no-speculation", "speculative"]}],
}
REFUSED = {
    "name": "refused-knobs",
    "description": "min_p under speculation.",
    "requests": {
        "min-p": {"prompt": PROMPT, "temperature": 1.0, "seed": 1, "min_p": 0.5, "max_tokens": 4}
    },
    "runs": [{"name": "speculative", "requests": ["min-p"]}],
}
CHILDREN = {
    "name": "children",
    "description": "n = 2 without speculation.",
    "requests": {
        "kids": {"prompt": PROMPT, "temperature": 1.0, "seed": 5, "n": 2, "max_tokens": 6}
    },
    "runs": [{"name": "plain", "requests": ["kids"], "engine": {"max_draft_len": 0}}],
}


@pytest.fixture(scope="module")
def audit(engine, checkpoint: CheckpointBundle, tmp_path_factory) -> AuditResult:  # type: ignore[no-untyped-def]
    import yaml

    folder = tmp_path_factory.mktemp("knob-scenarios")
    for scenario in (GREEDY, REFUSED, CHILDREN):
        (folder / f"{scenario['name']}.yaml").write_text(yaml.safe_dump(scenario))
    config = AuditConfig(
        engine=vllm_engine(checkpoint),
        scenarios=[str(folder / f"{s['name']}.yaml") for s in (GREEDY, REFUSED, CHILDREN)],
    )
    planned = plan_audit(config, checkpoint.root)
    return run_audit(config, planned, checkpoint.root, adapter=engine, keep_steps=True)


def _findings(audit: AuditResult, scenario: str, check: str) -> list[Any]:
    return [f for f in audit.findings if f.scenario == scenario and f.check == check]


def _run(audit: AuditResult, scenario: str, run: str) -> Any:
    result = next(s for s in audit.scenarios if s.scenario.name == scenario)
    return result.traces[run]


def test_greedy_knobs_are_honoured_under_speculation(audit: AuditResult) -> None:
    (equivalence,) = _findings(audit, "greedy-knobs", "knob-equivalence")
    assert equivalence.status == "pass", equivalence.message
    for run in ("no-speculation", "speculative"):
        end = _run(audit, "greedy-knobs", run).end
        assert end.finish_reasons == {
            "presence": "length",
            "stop-token": "stop",
            "stop-text": "stop",
        }
        assert end.outputs["stop-token"][-1] == 407
        assert len(end.outputs["stop-text"]) == 10
        lps = end.logprobs["presence"]
        assert len(lps) == len(end.outputs["presence"])
        assert all(len(lp.top) == 2 and lp.logprob <= 0.0 for lp in lps)


def test_rows_record_what_vllm_emitted_up_to_a_mid_step_stop(audit: AuditResult) -> None:
    trace = _run(audit, "greedy-knobs", "speculative")
    for request, output in trace.end.outputs.items():
        emitted = [
            t
            for step in trace.steps
            for row in step.rows
            if row.request_id == request
            for t in row.emitted
        ]
        assert emitted == list(output), request


def test_a_refused_knob_is_a_skip_quoting_vllm(audit: AuditResult) -> None:
    trace = _run(audit, "refused-knobs", "speculative")
    assert trace.end.refused is not None
    assert "not yet supported with speculative decoding" in trace.end.refused
    statuses = {f.status for f in audit.findings if f.scenario == "refused-knobs"}
    assert statuses == {"skip"}
    assert all(
        "not yet supported" in f.message for f in audit.findings if f.scenario == "refused-knobs"
    )


def test_children_of_n_are_recorded_as_their_own_requests(audit: AuditResult) -> None:
    trace = _run(audit, "children", "plain")
    assert set(trace.end.outputs) == {"kids", "kids#1"}
    assert trace.end.outputs["kids"] != trace.end.outputs["kids#1"]
    rows = {row.request_id for step in trace.steps for row in step.rows}
    assert rows == {"kids", "kids#1"}
    (distinct,) = _findings(audit, "children", "children-distinct")
    assert distinct.status == "pass", distinct.message
