"""Interrupted is not crashed; a crash is one cause named by its site; skips say why (issue 19).

Inputs: a recorded reference trace whose end record is replaced by an interrupt or a crash, as
the runner writes them (``run/execute.py``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from specseed.checks.attribution import root_causes
from specseed.checks.context import CheckContext
from specseed.checks.rng_state import rng_contract
from specseed.checks.runs import runs_complete
from specseed.engine_adapters.contracts import get_contract
from specseed.scenarios.schema import Scenario
from specseed.traces.records import EngineFailure, RunTrace, load_trace

TRACE = Path(__file__).parents[1] / "data" / "traces" / "overlap-window-reuse" / "overlap-on.jsonl"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/w/src/specseed/engine_adapters/base.py", line 300, in run\n'
    '  File "/w/src/specseed/engine_adapters/reference/engine.py", line 210, in _warmup\n'
    '  File "/usr/lib/python3.12/contextlib.py", line 81, in inner\n'
    "IndexError: index 8 is out of bounds\n"
)


def _ended(exception: str, *, steps: bool = True) -> RunTrace:
    trace = load_trace(TRACE)
    failure = EngineFailure(0, "warmup", 1, exception, "stopped", TRACEBACK)
    # A crash at step 0 has drawn nothing and emitted nothing.
    end = replace(trace.end, failure=failure, outputs=trace.end.outputs if steps else {})
    return replace(trace, steps=trace.steps if steps else (), end=end)


def _ctx(trace: RunTrace) -> CheckContext:
    return CheckContext(
        Scenario.model_construct(name="s"), {trace.name: trace}, get_contract("ideal")
    )


def test_an_interrupted_run_is_unfinished_not_an_engine_failure() -> None:
    trace = _ended("Interrupted")
    [finding] = runs_complete(_ctx(trace), trace)
    assert finding.status == "skip"
    assert "unfinished" in finding.message and "crashed" not in finding.message


def test_a_crash_fails_and_is_one_cause_named_by_the_engines_innermost_frame() -> None:
    trace = _ended("IndexError")
    [finding] = runs_complete(_ctx(trace), trace)
    assert finding.status == "fail"
    [cause] = root_causes([replace(finding, check="runs-complete", scenario="s")])
    assert cause.kind == "crash"
    assert cause.label == (
        "crash: IndexError in _warmup (specseed/engine_adapters/reference/engine.py:210)"
    )


def test_after_a_crash_at_step_0_rng_contract_says_the_run_crashed() -> None:
    trace = _ended("IndexError", steps=False)
    [finding] = rng_contract(_ctx(trace), trace)
    assert finding.status == "skip"
    assert "crashed at step 0" in finding.message and "IndexError" in finding.message
