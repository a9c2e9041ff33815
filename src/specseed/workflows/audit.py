"""The audit as one object: a resolved audit and the outputs asked for in, an exit code out.

``Audit`` holds what ``specseed audit`` does between parsing its flags and exiting: it narrows
the plan (``scenarios``, ``shard``), locks the bundle folder and starts the bundle before the
engine loads, builds the reporters, runs the audit in an ``EngineSession`` (this process, or
``--jobs`` workers, or an engine the caller built), writes the documents (files first, then
the terminal report) and decides the exit code. Every event goes through one stream, the end
included: ``AuditInterruptedEvent``, ``OutputFailed`` and, last of all, ``AuditFinished``
with the result and the exit code.

Its input is a ``plan.resolve.ResolvedAudit`` (``resolve_audit``: model.yaml is read there,
once). It needs no terminal: with ``AuditOutputs()`` it writes and prints nothing and returns
the result. Library errors (``InputError``, ``EngineError``, ...) propagate as typed errors;
only ``cli/`` maps them to exit codes.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from specseed.core.errors import InputError
from specseed.core.wording import did_you_mean
from specseed.run.results import (
    AuditFinished,
    AuditInterruptedEvent,
    AuditResult,
    EventHandler,
)
from specseed.workflows.base import Interrupts, Workflow, exit_code
from specseed.workflows.exit_codes import EXIT_SIGNAL
from specseed.workflows.outputs import AuditOutputs
from specseed.workflows.session import InterruptGuard

if TYPE_CHECKING:  # torch and the engines load only when an audit runs
    from specseed.bundle.format import BundleWriter
    from specseed.engine_adapters.base import EngineAdapter
    from specseed.plan.planning import PlannedScenario
    from specseed.plan.resolve import ResolvedAudit
    from specseed.workflows.session import EngineSession


@dataclass(frozen=True)
class AuditOutcome:
    """What ``Audit.run`` returns (the same as its ``AuditFinished`` event)."""

    result: AuditResult | None
    """None when nothing ran: the shard holds no scenario, or a signal came first."""
    exit_code: int


def selected_scenarios(resolved: ResolvedAudit, outputs: AuditOutputs) -> list[PlannedScenario]:
    """The planned scenarios an audit of ``resolved`` runs: ``outputs.scenarios`` and then
    ``outputs.shard`` applied. ``InputError`` for a name the plan lacks or a selection that
    checks nothing."""
    from specseed.plan.scope import check_scope
    from specseed.run.parallel import shard

    planned = list(resolved.planned)
    wanted = outputs.scenarios
    if wanted:
        known = {p.scenario.name for p in planned}
        unknown = [name for name in wanted if name not in known]
        if unknown:
            raise unknown_scenarios(unknown, resolved, "--scenario")
        planned = [p for p in planned if p.scenario.name in wanted]
    check_scope(resolved.config.checks.skip, [p.scenario for p in planned], resolved.source)
    if outputs.shard is not None:
        planned = shard(planned, *outputs.shard)
    return planned


def unknown_scenarios(unknown: Sequence[str], resolved: ResolvedAudit, option: str) -> InputError:
    """The error for scenario names an audit does not run: a built-in scenario the audit
    leaves out (and how to add it), or a name found nowhere (did you mean)."""
    from specseed.scenarios.loader import BUILTIN, library_names

    listed = [p.scenario.name for p in resolved.planned]
    library = library_names()
    builtin = [name for name in unknown if name in library]
    named = ", ".join(builtin)
    it = "it" if len(builtin) == 1 else "them"
    scenarios = resolved.config.scenarios
    with_them = ", ".join(dict.fromkeys([*scenarios, *builtin]))
    if builtin and resolved.model_yaml is None and scenarios == [BUILTIN]:
        # The default audit: "builtin" leaves out the long scenarios.
        first = builtin[0]
        return InputError(
            f"{option} {named}: the default audit leaves {it} out (long built-in scenarios "
            "run only when named)",
            # The command on a line of its own, indented: the terminal never breaks it.
            hint=f"name {it} in a model.yaml (scenarios: [{with_them}]), or audit {first} "
            f"alone:\n  specseed scenarios show {first} > {first}.yaml && specseed audit "
            f"{first}.yaml",
        )
    if builtin:
        where = resolved.source if resolved.model_yaml is not None else "the audit's config"
        these = "this built-in scenario" if len(builtin) == 1 else "these built-in scenarios"
        left_out = " (builtin leaves out the long ones)" if BUILTIN in scenarios else ""
        return InputError(
            f"{option} {named}: {where} does not list {these}{left_out}",
            hint=f"add {it} to its scenarios: [{with_them}]",
        )
    runs = (
        "this audit runs every scenario of the default audit"
        if scenarios == [BUILTIN]
        else f"this audit runs {', '.join(listed)}"
    )
    fix = did_you_mean(unknown[0], [*listed, *library], runs)
    return InputError(
        f"{option} {', '.join(unknown)}: no such scenario in this audit or the built-in library",
        hint=f"{fix} (specseed scenarios list shows the library)",
    )


class Audit(Workflow):
    """One audit of one engine: the resolved audit, the outputs asked for, and the work
    between them. Call :meth:`run` once.

    ``adapter``: an engine already built (``run.execute.create_adapter``), used instead of
    loading one (serial audits only). ``on_event``: called with every event after the
    reporters, the last being ``AuditFinished``.
    """

    def __init__(
        self,
        resolved: ResolvedAudit,
        outputs: AuditOutputs | None = None,
        *,
        adapter: EngineAdapter | None = None,
        on_event: EventHandler | None = None,
    ) -> None:
        super().__init__(outputs, on_event)
        self.resolved = resolved
        self.adapter = adapter
        if adapter is not None and self.outputs.jobs not in (1, "auto"):
            raise InputError(
                "an engine built by the caller serves one process",
                hint="give jobs=1, or no adapter",
            )

    # -- before anything runs -------------------------------------------------------------

    def inputs(self) -> tuple[Path, ...]:
        """model.yaml and every scenario file it names: no output may overwrite them."""
        return self.resolved.inputs

    def selected(self) -> list[PlannedScenario]:
        """The planned scenarios this audit runs (:func:`selected_scenarios`)."""
        return selected_scenarios(self.resolved, self.outputs)

    # -- the audit ------------------------------------------------------------------------

    def run(self, *, interrupts: Interrupts | None = None) -> AuditOutcome:
        """Run the audit and write every output; returns the result and the exit code.

        ``interrupts`` makes the signal handler that is active while the engines run and the
        reports are written (``cli.interrupts.InterruptGuard``); without one, Ctrl-C still
        stops the runs as SIGINT. Raises ``InputError`` before anything runs (bad selection,
        unwritable output, busy bundle folder) and ``EngineError`` if the engine cannot run;
        once the runs started, a problem is an event and an exit code instead.
        """
        self.check_outputs()
        planned = self.selected()
        console = self.terminal_reporter()
        if not planned:
            return AuditOutcome(None, self.skip_shard())
        resolved = self.resolved
        scenarios = [(p.loaded, [plan.run for plan in p.plans]) for p in planned]
        guard = self.guard(interrupts)
        with guard:
            # A signal while the bundle is created is held until it stands whole, then
            # ends the audit with the bundle saying so (never a half-made bundle).
            guard.defer()
            with self.bundle(
                resolved.config, scenarios, resolved.base_dir, resolved.engine
            ) as bundle:
                documents = self.documents()
                try:
                    guard.resume()
                    with (
                        console if console is not None else nullcontext(),
                        self._session(planned, guard) as session,
                    ):
                        result = self._execute(session, planned, bundle)
                except KeyboardInterrupt:
                    guard.defer()
                    name = guard.received or "SIGINT"
                    code = EXIT_SIGNAL[name]
                    names = tuple(p.scenario.name for p in planned)
                    self.emit(AuditInterruptedEvent(name, 0, names, reported=False))
                    self.bundle_interrupted(resolved.config, name, names, code)
                    self.emit(AuditFinished(None, code, self.outputs.bundle, self.temporary_log()))
                    return AuditOutcome(None, code)
                guard.defer()
                if result.interrupted:
                    finished = len(result.scenarios)
                    self.emit(
                        AuditInterruptedEvent(result.interrupted, finished, result.unfinished, True)
                    )
                code = self.write_documents(result, documents)
                if console is not None:
                    code = self.flush_terminal(lambda: console.finish(result, code), code)
                if guard.received and not result.interrupted:  # came while reports were written
                    code = EXIT_SIGNAL[guard.received]
                self.emit(AuditFinished(result, code, self.outputs.bundle, self.temporary_log()))
        return AuditOutcome(result, code)

    def _jobs(self, planned: Sequence[PlannedScenario]) -> int:
        if self.adapter is not None:
            return 1
        from specseed.run.parallel import resolve_jobs

        return resolve_jobs(self.outputs.jobs, self.resolved.config, planned)

    def _session(self, planned: Sequence[PlannedScenario], guard: InterruptGuard) -> EngineSession:
        return self.session(
            self.resolved.engine, adapter=self.adapter, jobs=self._jobs(planned), guard=guard
        )

    def _execute(
        self,
        session: EngineSession,
        planned: Sequence[PlannedScenario],
        bundle: BundleWriter | None,
    ) -> AuditResult:
        resolved = self.resolved
        return session.run(
            resolved.config,
            planned,
            resolved.base_dir,
            on_event=self.emit,
            command=self.outputs.command,
            trace_writer=bundle.trace_writer if bundle is not None else None,
            # The parent holds the folder's lock while workers (jobs > 1) write into it.
            trace_dir=self.outputs.bundle if session.jobs > 1 else None,
        )


__all__ = [
    "Audit",
    "AuditOutcome",
    "AuditOutputs",
    "InterruptGuard",
    "exit_code",
    "selected_scenarios",
    "unknown_scenarios",
]
