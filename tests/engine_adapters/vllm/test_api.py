"""``specseed.api`` on real vLLM (the session's engine): the few lines an engine's test suite
adds, on one small greedy scenario; and the refusal of a ``vllm.LLM`` built outside an audit."""

from __future__ import annotations

from pathlib import Path

import pytest

import specseed.api as api
from specseed.models.make_checkpoint import CheckpointBundle

pytestmark = pytest.mark.vllm

# Greedy only: on vLLM 0.32.0's CPU build a sampled request under speculation reads
# uninitialised sampling parameters (test_audit.py, finding 1), which would make this
# scenario's verdict depend on memory contents.
GREEDY_RERUN = """\
name: greedy-rerun
description: The same greedy request twice gives the same tokens.
covers: []
defaults: {max_tokens: 6, temperature: 0.0}
requests:
  one: {prompt: [12, 40, 7, 91]}
runs:
  - name: first
    requests: [one]
  - name: again
    requests: [one]
expect:
  - check: run-to-run
    runs: [first, again]
"""


def test_an_audit_on_the_vllm_engine_the_suite_built(  # type: ignore[no-untyped-def]
    engine, checkpoint: CheckpointBundle, tmp_path: Path
) -> None:
    (tmp_path / "greedy-rerun.yaml").write_text(GREEDY_RERUN)
    config = {
        "engine": {
            "name": "vllm",
            "checkpoint": str(checkpoint.target),
            "draft_checkpoint": str(checkpoint.draft),
            "contract": "vllm-generators",
        },
        "scenarios": ["greedy-rerun.yaml"],
    }
    report = api.audit(config, engine=engine, base_dir=tmp_path, bundle=tmp_path / "b")
    statuses = {f.check: f.status for f in report.findings}
    assert statuses["runs-complete"] == "pass" and statuses["run-to-run"] == "pass"
    assert report.passed, report.console()
    assert (tmp_path / "b" / "manifest.json").is_file()
    # the LLM the adapter built is a real vllm.LLM, which the API does not take on its own
    llm = engine._llm
    assert type(llm).__module__.startswith("vllm")
    with pytest.raises(api.InputError, match=r"vllm\.LLM"):
        api.audit(config, engine=llm)
