"""A failure the search confirmed but the report's audit did not see again is reported as
flaky, not as a failure that reproduced.

An engine whose verdict on a case changes from serve to serve (vLLM 0.32.0's CPU build under
speculation samples with uninitialised temperatures, upstream vLLM #55005) can fail a case in
the search and in its confirmation, then pass when the minimal scenario is audited again for
the bundle. The search must say so: under the audit's report, in the verdict, and in the JSON
(``flaky``, ``outcome``, the findings the search saw rather than an empty list). The exit
code stays 1, since an exact check failed on two serves of the case.

Here the engine is the reference engine with ``overlap-window-reuse`` planted while the search
draws and confirms. The report's audit runs without it, so the minimal scenario passes there,
as it does on a flaky engine's lucky serve.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specseed.plan.resolve import resolve_audit
from specseed.run.execute import create_adapter
from specseed.workflows.outputs import AuditOutputs
from specseed.workflows.search import Search


class PassesWhenReported(Search):
    """The search of a defective engine whose report's audit finds the engine correct."""

    def _report(self, session: Any, result: Any) -> None:
        self.resolved = resolve_audit({}, scenarios=False)  # no planted defect from here on
        super()._report(session, result)


def search(tmp_path: Path, cls: type[Search]) -> tuple[int, dict[str, Any], Search]:
    resolved = resolve_audit(
        {"engine": {"options": {"defects": ["overlap-window-reuse"]}}}, scenarios=False
    )
    adapter = create_adapter(resolved.engine)
    out = tmp_path / "search.json"
    try:
        workflow = cls(
            resolved,
            AuditOutputs(terminal=True, progress=False),
            budget=3600,
            seed=0,
            json=out,
            shrink_budget=3600,
            max_scenarios=10,
            shrink_scenarios=2,
            max_tokens=8,
            adapter=adapter,
        )
        outcome = workflow.run()
    finally:
        adapter.close()
    return outcome.exit_code, json.loads(out.read_text()), workflow


def test_a_failure_the_report_does_not_see_again_is_flaky(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, document, _ = search(tmp_path, PassesWhenReported)
    shown = capsys.readouterr().err
    assert code == 1 and document["exit_code"] == 1
    assert document["outcome"] == "flaky"
    (failure,) = document["failures"]
    assert failure["flaky"] and not failure["failed_again_in_report"]
    # The evidence is the search's: the failing findings of the minimal scenario there.
    assert failure["findings_from"] == "search"
    assert failure["check"] in {f["check"] for f in failure["findings"]}
    assert failure["root_causes"]
    assert f"Not reproduced: {failure['check']} passed in this audit" in " ".join(shown.split())
    assert "not reproduced: search-" in shown
    assert "FAIL (flaky, not reproduced for the report):" in " ".join(shown.split())
    assert all(len(line) <= 80 for line in shown.splitlines()), shown


def test_a_failure_the_report_sees_again_is_not_flaky(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, document, _ = search(tmp_path, Search)
    shown = capsys.readouterr().err
    assert code == 1 and document["outcome"] == "fail"
    (failure,) = document["failures"]
    assert failure["failed_again_in_report"] and not failure["flaky"]
    assert failure["findings_from"] == "report"
    assert "not reproduced" not in shown.lower() and "flaky" not in shown
