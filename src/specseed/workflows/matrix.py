"""The detection matrix as a workflow: inject each defect class into the reference engine in
turn, on one engine session, and render which checks catch it.

``run_matrix`` audits once with no defect and once per defect (``run.matrix`` serves a group
of them on one engine and turns each audit into a row); ``Matrix`` is ``specseed audit
--matrix``: the resolved audit and its outputs in, the rendered matrix and an exit code out.
The groups go to worker processes through ``run.parallel.run_engine_tasks`` as
``run.matrix.MatrixTask`` objects, so a worker never imports this module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specseed.core.defects import DEFECT_IDS
from specseed.core.errors import InputError
from specseed.run.matrix import MatrixResult, MatrixRow, MatrixTask, matrix_groups, matrix_rows
from specseed.run.results import AuditEvent, EventHandler
from specseed.workflows.audit import selected_scenarios
from specseed.workflows.base import Interrupts, Workflow
from specseed.workflows.exit_codes import EXIT_OK, EXIT_SIGNAL, EXIT_VIOLATION
from specseed.workflows.outputs import AuditOutputs
from specseed.workflows.session import EngineSession

if TYPE_CHECKING:
    from specseed.plan.resolve import ResolvedAudit
    from specseed.scenarios.schema import AuditConfig


def _in_flight(groups: list[list[str | None]]) -> str:
    lost = ", ".join(str(defect or "(none)") for group in groups for defect in group)
    return f"defects in flight: {lost}"


def run_matrix(
    config: AuditConfig,
    base_dir: Path,
    *,
    defects: Sequence[str] = DEFECT_IDS,
    scenario_filter: Sequence[str] | None = None,
    on_defect: Callable[[str | None], None] | None = None,
    on_event: Callable[[AuditEvent], None] | None = None,
    on_row: Callable[[MatrixRow], None] | None = None,
    jobs: int = 1,
    session: EngineSession | None = None,
) -> MatrixResult:
    """Audit once with no defect, then once per defect (the model is loaded once per
    process).

    ``on_defect`` hears each defect as its audit starts and ``on_event`` that audit's events
    (one process only); ``on_row`` hears each row as its audit ends. An engine that serves
    runs side by side (the reference engine on the CPU) serves the audits in groups
    (``run.matrix.matrix_groups``), each scenario's runs of the whole group together; a
    group's audits are heard one after another once it has been served. With ``jobs`` > 1
    the groups go to worker processes (``run.parallel``, capped at the CPUs this process may
    use), each worker serving one group at a time on its own engine; the rows are the same,
    in the same order. ``session``: the open session to serve on (default: one of its own,
    with ``jobs``)."""
    if config.engine.name != "reference":
        raise InputError(
            "the detection matrix injects defects into the reference engine only",
            hint="set engine.name: reference",
        )
    listed = config.engine.options.get("defects")
    if listed:
        raise InputError(
            "the detection matrix injects one defect at a time; model.yaml already lists "
            f"defects: {', '.join(listed)}",
            hint="remove engine.options.defects from model.yaml",
        )
    audits: list[str | None] = [None, *defects]
    if jobs > 1 and (on_defect is not None or on_event is not None):
        raise ValueError("on_defect and on_event follow audits in this process: jobs=1")
    if session is None:
        from specseed.plan.planning import base_settings

        with EngineSession(base_settings(config, base_dir), jobs=jobs) as own:
            return run_matrix(
                config,
                base_dir,
                defects=defects,
                scenario_filter=scenario_filter,
                on_defect=on_defect,
                on_event=on_event,
                on_row=on_row,
                session=own,
            )
    workers = session.workers(len(audits))
    filtered = tuple(scenario_filter) if scenario_filter else None
    groups = matrix_groups(audits, workers)
    if workers > 1:
        rows = run_matrix_groups(session, config, base_dir, groups, filtered, on_row)
    else:
        rows = []
        for group in groups:
            rows += matrix_rows(
                config,
                base_dir,
                group,
                session.engine(),
                scenario_filter=filtered,
                on_defect=on_defect,
                on_event=on_event,
                on_row=on_row,
            )
    return MatrixResult(contract=config.engine.contract, rows=tuple(rows))


def run_matrix_groups(
    session: EngineSession,
    config: AuditConfig,
    base_dir: Path,
    groups: Sequence[Sequence[str | None]],
    scenario_filter: Sequence[str] | None,
    on_row: Callable[[MatrixRow], None] | None = None,
) -> list[MatrixRow]:
    """The matrix's audits (one per defect of ``groups``, None for no defect) on the
    session's engines, a group per task (``run.matrix.MatrixTask``); their rows in the order
    of the groups. ``on_row`` hears each row once its group has been served. A worker that
    dies is ``EngineError``; Ctrl-C stops the workers and raises ``KeyboardInterrupt``."""

    def heard(rows: list[MatrixRow]) -> None:
        if on_row is not None:
            for row in rows:
                on_row(row)

    task = MatrixTask(config, base_dir, tuple(scenario_filter) if scenario_filter else None)
    done = session.map(
        config,
        task,
        [list(group) for group in groups],
        on_result=heard,
        doing="auditing the matrix",
        in_flight=_in_flight,
    )
    return [row for rows in done for row in rows]


def run_matrix_jobs(
    config: AuditConfig,
    base_dir: Path,
    groups: Sequence[Sequence[str | None]],
    *,
    scenario_filter: Sequence[str] | None,
    jobs: int,
    on_row: Callable[[Any], None] | None = None,
) -> list[MatrixRow]:
    """:func:`run_matrix_groups` on a session of its own with ``jobs`` workers."""
    from specseed.plan.planning import base_settings

    with EngineSession(base_settings(config, base_dir), jobs=jobs) as session:
        return run_matrix_groups(session, config, base_dir, groups, scenario_filter, on_row)


class Matrix(Workflow):
    """``specseed audit --matrix``: the detection matrix of a resolved audit (its engine
    section and scenarios; ``outputs.scenarios`` narrows them), rendered on the terminal.
    Records no bundle (one audit per defect)."""

    def __init__(
        self,
        resolved: ResolvedAudit,
        outputs: AuditOutputs | None = None,
        *,
        on_event: EventHandler | None = None,
    ) -> None:
        super().__init__(outputs, on_event)
        self.resolved = resolved

    def inputs(self) -> tuple[Path, ...]:
        return self.resolved.inputs

    def run(self, *, interrupts: Interrupts | None = None) -> tuple[MatrixResult | None, int]:
        """Inject each defect class into the reference engine in turn and render which
        checks catch it; exit 1 if the defect-free audit fails or a targeted defect is
        missed. A signal while the audits run (``interrupts``) stops them and every worker:
        no matrix, exit 130 or 143."""
        if self.outputs.bundle is not None:
            raise InputError(
                "--bundle/--trace-dir record one audit; --matrix runs one per defect",
                hint="record the defect you want with engine.options.defects and --bundle",
            )
        self.check_outputs()
        if not selected_scenarios(self.resolved, self.outputs):
            self.terminal_reporter()
            return None, self.skip_shard()
        from specseed.plan.planning import base_settings
        from specseed.run.parallel import resolve_matrix_jobs

        self.terminal_reporter()
        consoles = self.consoles()
        err = consoles[1] if consoles is not None else None
        audits = 1 + len(DEFECT_IDS)
        done: list[MatrixRow] = []

        def announce(row: MatrixRow) -> None:
            done.append(row)
            if err is not None and self.outputs.progress:
                err.print(
                    f"[dim][{len(done)}/{audits}] audited with defect "
                    f"{row.defect or '(none)'}: {row.verdict}[/]"
                )

        config, base_dir = self.resolved.config, self.resolved.base_dir
        guard = self.guard(interrupts)
        with guard:
            try:
                jobs = resolve_matrix_jobs(self.outputs.jobs, config)
                with EngineSession(base_settings(config, base_dir), jobs=jobs, guard=guard) as s:
                    result = run_matrix(
                        config,
                        base_dir,
                        scenario_filter=list(self.outputs.scenarios) or None,
                        on_row=announce,
                        session=s,
                    )
            except KeyboardInterrupt:
                guard.defer()
                name = guard.received or "SIGINT"
                if err is not None:
                    err.print(
                        f"interrupted by {name}: the matrix is incomplete ({len(done)} of "
                        f"{audits} audits finished), nothing to report"
                    )
                return None, EXIT_SIGNAL[name]
            guard.defer()
        if consoles is not None:
            from specseed.reporting.console import render_matrix

            render_matrix(result, consoles[0])
        return result, EXIT_OK if result.ok else EXIT_VIOLATION


__all__ = ["Matrix", "run_matrix", "run_matrix_groups", "run_matrix_jobs"]
