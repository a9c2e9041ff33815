"""The detection matrix's rows: inject each defect class into the reference engine and see
which checks catch it.

This is the proof that the checks can fail: for every defect id, an audit of the same
scenarios with ``defects: [id]`` must exit 1 and name the id among its suspects, while the
audit with no defect must not fail. It also measures the precision of the verdict: with one
defect injected, the audit's root causes (``checks.attribution``) must be exactly that
defect, no extra cause and no wrong one.

This module serves the audits of a group of defects on one engine (``matrix_rows``; a worker
process gets the same through ``MatrixTask``); the workflow that plans the groups, loads the
engine once and renders the matrix is ``workflows.matrix``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from specseed.checks.attribution import root_causes
from specseed.checks.findings import FAILING
from specseed.core.errors import AuditInterrupted
from specseed.engine_adapters.base import EngineAdapter
from specseed.engine_adapters.contracts import get_contract
from specseed.plan.planning import PlannedScenario, plan_audit
from specseed.run.execute import run_audit, run_audits_side_by_side
from specseed.run.results import AuditEvent, AuditResult
from specseed.scenarios.schema import AuditConfig


@dataclass(frozen=True)
class MatrixRow:
    """What the audit saw with one defect injected (``defect`` None: no defect)."""

    defect: str | None
    verdict: str
    failing_checks: tuple[str, ...]
    """Checks with a failing finding."""
    naming_checks: tuple[str, ...]
    """Checks whose failing findings name ``defect`` among their suspects."""
    suspects: tuple[str, ...]
    """Every defect id named by a failing finding."""
    causes: tuple[str, ...] = ()
    """The root causes' labels, as the report prints them."""

    @property
    def exact(self) -> bool:
        """Exactly one root cause, the injected defect (none at all without a defect)."""
        return self.causes == (() if self.defect is None else (self.defect,))

    @property
    def extra(self) -> tuple[str, ...]:
        """Causes beside the injected one (when it is among them)."""
        if self.defect not in self.causes:
            return ()
        return tuple(c for c in self.causes if c != self.defect)

    @property
    def wrong(self) -> bool:
        """The audit failed, yet no root cause is the injected defect."""
        return self.defect is not None and bool(self.causes) and self.defect not in self.causes

    @property
    def caught(self) -> bool:
        """Exit 1 and the defect named: the matrix's definition of caught."""
        return self.verdict == "fail" and bool(self.naming_checks)


@dataclass(frozen=True)
class MatrixResult:
    contract: str
    rows: tuple[MatrixRow, ...]

    @property
    def baseline(self) -> MatrixRow:
        return self.rows[0]

    def stated(self) -> set[str]:
        """Defects the contract itself states as limitations (its layout already has them)."""
        return {limitation.defect for limitation in get_contract(self.contract).limitations}

    def missed(self) -> list[str]:
        """Defects that some check targets, yet the audit did not catch (stated ones aside)."""
        from specseed.checks import CHECKS

        targeted = {d for spec in CHECKS.values() for d in spec.targets}
        return [
            row.defect
            for row in self.rows[1:]
            if row.defect is not None
            and row.defect in targeted
            and row.defect not in self.stated()
            and not row.caught
        ]

    def carried(self) -> set[str]:
        """Defects the contract's layout carries without stating them (upstream bugs, its
        departures): they fail the defect-free audit, and every row alike."""
        return {departure.defect for departure in get_contract(self.contract).departures}

    def exact(self, row: MatrixRow) -> bool:
        """``row.exact``, less the causes the contract's layout has of its own: a stated
        limitation, or an upstream bug it carries (``trtllm-pr17599``'s one-draw slots
        coupling the output, its unseeded requests on seed 42) fails every row alike."""
        own = self.stated() | self.carried()
        causes = tuple(c for c in row.causes if c not in own)
        return causes == (() if row.defect is None else (row.defect,))

    def imprecise(self) -> list[str]:
        """Defects caught whose root causes are not exactly the injected one."""
        return [
            row.defect
            for row in self.rows[1:]
            if row.defect is not None and row.defect not in self.stated() and not self.exact(row)
        ]

    @property
    def precision(self) -> float:
        """The share of injected defects (stated ones aside) whose audit names exactly them."""
        rows = [r for r in self.rows[1:] if r.defect is not None and r.defect not in self.stated()]
        return sum(self.exact(r) for r in rows) / len(rows) if rows else 1.0

    @property
    def ok(self) -> bool:
        """The baseline fails on nothing but the contract's own (stated limitations and the
        upstream bugs its layout carries), every targeted defect is caught and each names
        only itself."""
        baseline = self.baseline.verdict == "pass" or self.exact(self.baseline)
        return baseline and not self.missed() and not self.imprecise()


def row_of(defect: str | None, result: AuditResult) -> MatrixRow:
    """The row of an audit run with ``defect`` injected (None: none)."""
    failing = [f for f in result.findings if f.status in FAILING]
    naming = sorted({f.check for f in failing if any(s.defect == defect for s in f.suspects)})
    return MatrixRow(
        defect=defect,
        verdict=result.verdict,
        failing_checks=tuple(sorted({f.check for f in failing})),
        naming_checks=tuple(naming),
        suspects=tuple(sorted({s.defect for f in failing for s in f.suspects})),
        causes=tuple(c.label for c in root_causes(result.findings)),
    )


def matrix_groups(audits: Sequence[str | None], workers: int) -> list[list[str | None]]:
    """``audits`` cut, in order, into groups served side by side: as few as keep each within
    :data:`SIDE_BY_SIDE_AUDITS`, as a multiple of ``workers`` (so that each worker gets as
    many), their sizes differing by one at most. Fourteen audits: 5, 5, 4 in one process;
    4, 4, 3, 3 on two workers or four."""
    if not audits:
        return []
    per_worker = -(-len(audits) // (workers * SIDE_BY_SIDE_AUDITS))
    count = min(len(audits), workers * per_worker)
    size, larger = divmod(len(audits), count)
    groups: list[list[str | None]] = []
    start = 0
    for index in range(count):
        end = start + size + (1 if index < larger else 0)
        groups.append(list(audits[start:end]))
        start = end
    return groups


def matrix_rows(
    config: AuditConfig,
    base_dir: Path,
    defects: Sequence[str | None],
    adapter: EngineAdapter,
    *,
    scenario_filter: Sequence[str] | None = None,
    on_defect: Callable[[str | None], None] | None = None,
    on_event: Callable[[AuditEvent], None] | None = None,
    on_row: Callable[[MatrixRow], None] | None = None,
) -> list[MatrixRow]:
    """Rows of ``defects``' audits on ``adapter``: side by side where it serves runs so
    (``run_audits_side_by_side``; each audit is then heard, ``on_defect``, its events and
    its row, once the group has been served), else one audit after another."""
    if len(defects) > 1 and adapter.serves_side_by_side():
        return _rows_side_by_side(
            config, base_dir, defects, adapter, scenario_filter, on_defect, on_event, on_row
        )
    rows = []
    for defect in defects:
        if on_defect is not None:
            on_defect(defect)
        row = matrix_row(
            config, base_dir, defect, adapter, scenario_filter=scenario_filter, on_event=on_event
        )
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


SIDE_BY_SIDE_AUDITS = 5
"""Defect audits one process serves side by side (scenario by scenario). The runs of five
audits at once take about as long as those of all fourteen (the library's small runs stop
being dominated by each forward's fixed cost), and a row is ready every fifth audit."""


def _planned(
    config: AuditConfig,
    base_dir: Path,
    defect: str | None,
    scenario_filter: Sequence[str] | None,
) -> tuple[AuditConfig, list[PlannedScenario]]:
    """The audit of ``config`` with ``defect`` injected (None: none), and its plan."""
    options = {**config.engine.options, "defects": [] if defect is None else [defect]}
    engine = config.engine.model_copy(update={"options": options})
    variant = config.model_copy(update={"engine": engine})
    planned: list[PlannedScenario] = plan_audit(variant, base_dir)
    if scenario_filter:
        planned = [p for p in planned if p.scenario.name in scenario_filter]
    return variant, planned


def _rows_side_by_side(
    config: AuditConfig,
    base_dir: Path,
    defects: Sequence[str | None],
    adapter: EngineAdapter,
    scenario_filter: Sequence[str] | None,
    on_defect: Callable[[str | None], None] | None,
    on_event: Callable[[AuditEvent], None] | None,
    on_row: Callable[[MatrixRow], None] | None,
) -> list[MatrixRow]:
    """Rows of ``defects``' audits, served side by side (``run_audits_side_by_side``); each
    audit's events reach ``on_defect`` and ``on_event`` in its own order once the group has
    been served, as if it had run alone."""
    heard: list[list[AuditEvent]] = [[] for _ in defects]
    results = run_audits_side_by_side(
        [_planned(config, base_dir, defect, scenario_filter) for defect in defects],
        adapter,
        on_event=[events.append for events in heard],
    )
    rows = []
    for defect, events, result in zip(defects, heard, results, strict=True):
        if on_defect is not None:
            on_defect(defect)
        if on_event is not None:
            for event in events:
                on_event(event)
        row = row_of(defect, result)
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


def matrix_row(
    config: AuditConfig,
    base_dir: Path,
    defect: str | None,
    adapter: EngineAdapter,
    *,
    scenario_filter: Sequence[str] | None = None,
    on_event: Callable[[AuditEvent], None] | None = None,
) -> MatrixRow:
    """One row of the matrix: the audit of ``config`` with ``defect`` injected (None: none)
    on ``adapter``."""
    variant, planned = _planned(config, base_dir, defect, scenario_filter)
    result = run_audit(variant, planned, base_dir, adapter=adapter, on_event=on_event)
    if result.interrupted:
        # The audit stopped at a signal and kept what finished: no row can stand for it.
        raise AuditInterrupted(result.interrupted)
    return row_of(defect, result)


@dataclass(frozen=True)
class MatrixTask:
    """A group of the matrix's audits as a task for ``run.parallel.run_engine_tasks``:
    ``task(engine, defects)`` gives their rows. A frozen dataclass of this module, so a
    worker unpickles it without importing the workflow that sent it."""

    config: AuditConfig
    base_dir: Path
    scenario_filter: tuple[str, ...] | None = None

    def __call__(self, engine: EngineAdapter, defects: Sequence[str | None]) -> list[MatrixRow]:
        return matrix_rows(
            self.config, self.base_dir, defects, engine, scenario_filter=self.scenario_filter
        )
