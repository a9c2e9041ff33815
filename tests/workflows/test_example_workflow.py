"""The worked example of a workflow (tests/data/examples/token_streams.py, shown in
ARCHITECTURE.md) runs as written: one engine session, its log captured, its outputs checked
before anything runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from specseed.core.errors import InputError
from specseed.plan.resolve import resolve_audit
from specseed.workflows.outputs import AuditOutputs

EXAMPLES = Path(__file__).parents[1] / "data" / "examples"


@pytest.fixture
def token_streams(monkeypatch: pytest.MonkeyPatch) -> type:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.delitem(sys.modules, "token_streams", raising=False)
    from token_streams import TokenStreams

    return TokenStreams


def test_the_example_workflow_serves_each_scenario_once_on_one_engine(
    token_streams: type, tmp_path: Path
) -> None:
    resolved = resolve_audit({"scenarios": ["reproducibility"]}, base_dir=tmp_path)
    log = tmp_path / "engine.log"
    streams = token_streams(resolved, AuditOutputs(engine_log=log)).run()
    runs = {run.name for run in resolved.planned[0].scenario.runs}
    assert {run for _, run, _ in streams} == runs
    # The same seeded request in every run of reproducibility: the same tokens.
    by_request: dict[str, set[tuple[int, ...]]] = {}
    for (_, _, request), tokens in streams.items():
        by_request.setdefault(request, set()).add(tokens)
        assert tokens
    assert all(len(seen) == 1 for seen in by_request.values())
    assert log.exists()  # the session captured the engine's log there


def test_the_example_workflow_refuses_an_output_over_its_input(
    token_streams: type, tmp_path: Path
) -> None:
    model = tmp_path / "model.yaml"
    model.write_text("scenarios: [reproducibility]\n", encoding="utf-8")
    resolved = resolve_audit(model)
    with pytest.raises(InputError, match=r"model\.yaml"):
        token_streams(resolved, AuditOutputs(json=model)).run()
