"""Every table reads at 80 and at 100 columns: nothing is cut with an ellipsis, no line is
wider than the console, and every scenario, check and defect name appears whole.

The reports are rendered with a Rich Console of fixed width and compared with golden files
(regenerate with SPECSEED_UPDATE_GOLDEN=1 after an intended change, and read the diff). The
evidence uses the recorded overlap-window-reuse traces with their seeds moved above 2^62, as
an engine's unseeded streams are, so the widest seeds are in the tables.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from specseed.checks import CHECKS
from specseed.checks.findings import EventState, Finding, OffsetRow
from specseed.core.defects import DEFECT_IDS
from specseed.reporting.console import render_matrix, render_report
from specseed.run.execute import evaluate
from specseed.run.matrix import MatrixResult, MatrixRow
from specseed.run.results import AuditResult, ScenarioResult
from specseed.scenarios.loader import library_names, load_library_scenario
from specseed.scenarios.schema import AuditConfig, EngineConfig
from specseed.traces.records import load_trace

DATA = Path(__file__).parent.parent / "data"
TRACES = DATA / "traces" / "overlap-window-reuse"
GOLDEN = DATA / "golden"
WIDTHS = (80, 100)
HIGH = 1 << 62


def _high_seeds(value: Any) -> Any:
    """The same evidence with every seed moved to 2^62 + seed (18 hex digits)."""
    if isinstance(value, (EventState, OffsetRow)):
        changes: dict[str, Any] = {"seed": HIGH + value.seed}
        if isinstance(value, OffsetRow) and value.expected_seed is not None:
            changes["expected_seed"] = HIGH + value.expected_seed
        return dataclasses.replace(value, **changes)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(
            value,
            **{
                f.name: _high_seeds(getattr(value, f.name))
                for f in dataclasses.fields(value)
                if f.init
            },
        )
    if isinstance(value, tuple):
        return tuple(_high_seeds(v) for v in value)
    return value


def _evidence_report() -> AuditResult:
    scenario = load_library_scenario("overlap-scheduler").scenario
    traces = {p.stem: load_trace(p) for p in sorted(TRACES.glob("*.jsonl"))}
    findings = tuple(_high_seeds(f) for f in evaluate(scenario, traces, "ideal"))
    config = AuditConfig(
        engine=EngineConfig(options={"defects": ["overlap-window-reuse"]}),
        scenarios=["overlap-scheduler"],
    )
    return AuditResult(
        config=config,
        contract="ideal",
        scenarios=(ScenarioResult(scenario, "builtin:overlap-scheduler", traces, findings, 0.0),),
        environment={"specseed": "test"},
        seconds=0.0,
    )


def _library_verdicts() -> AuditResult:
    """Every library scenario with every status somewhere (no evidence: the verdict table)."""
    statuses = ("pass", "fail", "known-limitation", "error", "skip")
    results = []
    for n, name in enumerate(library_names()):
        scenario = load_library_scenario(name).scenario
        findings = tuple(
            Finding(
                statuses[(n + i) % len(statuses)] if i % 3 == 0 else "pass",
                "",
                check=check,
                scenario=name,
            )
            for i, check in enumerate(CHECKS)
        )
        results.append(ScenarioResult(scenario, f"builtin:{name}", {}, findings, 0.0))
    return AuditResult(
        config=AuditConfig(),
        contract="ideal",
        scenarios=tuple(results),
        environment={},
        seconds=0.0,
    )


def _matrix() -> MatrixResult:
    checks = list(CHECKS)
    rows = [MatrixRow(None, "pass", (), (), ())]
    for n, defect in enumerate(DEFECT_IDS):
        failing = tuple(checks[(n + i) % len(checks)] for i in range(n % 5))
        rows.append(MatrixRow(defect, "fail" if failing else "pass", failing, failing[:1], ()))
    return MatrixResult(contract="ideal", rows=tuple(rows))


def _render(draw: Any, width: int) -> str:
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    draw(console)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"


RENDERINGS = {
    "evidence": lambda c: render_report(_evidence_report(), c, exit_code=1),
    "verdicts": lambda c: render_report(_library_verdicts(), c, exit_code=1),
    "matrix": lambda c: render_matrix(_matrix(), c),
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(RENDERINGS))
def test_report_reads_at_width(name: str, width: int) -> None:
    text = _render(RENDERINGS[name], width)
    golden = GOLDEN / f"{name}-{width}.txt"
    if os.environ.get("SPECSEED_UPDATE_GOLDEN"):
        golden.write_text(text)
    too_wide = [line for line in text.splitlines() if len(line) > width]
    assert not too_wide
    # "…" only as a marker at the start of a "more in --json" line, never cutting a word.
    cut = [line for line in text.splitlines() if re.search(r"\S…", line)]
    assert not cut
    assert text == golden.read_text()


@pytest.mark.parametrize("width", WIDTHS)
def test_every_name_appears_whole(width: int) -> None:
    verdicts = _render(RENDERINGS["verdicts"], width)
    for name in library_names():
        assert re.search(rf"^{re.escape(name)}\s", verdicts, re.M), name
    for check in CHECKS:
        assert check in verdicts.replace("\n", " ") or f"{CHECKS[check].short}={check}" in (
            verdicts.replace("\n", "")
        )
    matrix = _render(RENDERINGS["matrix"], width)
    for defect in DEFECT_IDS:
        assert re.search(rf"^{re.escape(defect)}\s", matrix, re.M), defect
    evidence = _render(RENDERINGS["evidence"], width)
    assert f"{HIGH + 301:#x}" in evidence
    assert "draft[2]" in evidence
