"""Replaying a bundle: its scenarios run again on an engine (the bundle's, or another
model.yaml's) and every request compared with the recording.

``replay`` is the work (the scenarios served on one engine session, the recordings
compared); ``Replay`` is ``specseed replay``: a workflow on the shared base, so it locks the
``--bundle`` folder it writes, records its bundle as it goes, keeps the engine's log in that
bundle's ``engine.log``, stops on a signal with the bundle saying so (exit 130/143), and
decides its exit code in the audit's order (``exit_codes.decide``): 1 when the replay's
audit fails or the replay differs from the recording, 5 when evidence could not be
written, 4 when nothing was checked, else 0; its summary line and its bundle's manifest
state that code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from specseed.bundle.compare import RecordingDiff, compare_recordings
from specseed.core.errors import OutputError
from specseed.run.results import (
    AuditFinished,
    AuditInterruptedEvent,
    AuditResult,
    EventHandler,
)
from specseed.workflows.base import Interrupts, Workflow
from specseed.workflows.exit_codes import EXIT_NOTHING_CHECKED, EXIT_SIGNAL, decide
from specseed.workflows.outputs import AuditOutputs
from specseed.workflows.session import EngineSession

if TYPE_CHECKING:
    from collections.abc import Callable

    from specseed.bundle.format import Bundle
    from specseed.engine_adapters.base import EngineAdapter
    from specseed.plan.resolve import ResolvedAudit
    from specseed.scenarios.schema import AuditConfig
    from specseed.traces.records import TraceWriter


@dataclass(frozen=True)
class ReplayResult:
    audit: AuditResult
    """The fresh audit of the bundle's scenarios."""
    diff: RecordingDiff
    """The recording (left) against the replay (right)."""


@dataclass(frozen=True)
class ReplayOutcome:
    """What ``Replay.run`` returns."""

    result: ReplayResult | None
    """None when a signal came before any scenario ran."""
    exit_code: int


def _engine_of(bundle: Bundle, engine: ResolvedAudit | None) -> tuple[AuditConfig, Path]:
    """The config and folder the replay's engine comes from: ``engine``'s (its engine
    section; its scenarios are ignored), else the bundle's."""
    if engine is not None:
        return engine.config, engine.base_dir
    return bundle.config, bundle.root


def replay(
    bundle: Bundle,
    engine: ResolvedAudit | None = None,
    *,
    on_event: EventHandler | None = None,
    trace_writer: Callable[[str, str], TraceWriter] | None = None,
    command: str = "",
    adapter: EngineAdapter | None = None,
    session: EngineSession | None = None,
) -> ReplayResult:
    """Run the bundle's scenarios on the engine of its model.yaml (or of ``engine``: its
    engine section, not its scenarios) and compare every request with the recording. The
    engine is ``session``'s, else ``adapter``, else one loaded for the replay."""
    from specseed.bundle.format import recorded_scenarios
    from specseed.bundle.recheck import recordings
    from specseed.plan.planning import base_settings, plan_scenario

    config, base_dir = _engine_of(bundle, engine)
    base = base_settings(config, base_dir)
    if session is None:
        with EngineSession(base, adapter=adapter) as own:
            return replay(
                bundle,
                engine,
                on_event=on_event,
                trace_writer=trace_writer,
                command=command,
                session=own,
            )
    planned = [plan_scenario(loaded, base) for loaded in recorded_scenarios(bundle)]
    audit = session.run(
        config,
        planned,
        base_dir,
        on_event=on_event,
        trace_writer=trace_writer,
        keep_steps=True,  # the diff against the recording reads every step
        command=command,
    )
    fresh = {(s.scenario.name, run): t for s in audit.scenarios for run, t in s.traces.items()}
    diff = compare_recordings(
        recordings(bundle), fresh, left_label=str(bundle.root), right_label="replay"
    )
    return ReplayResult(audit, diff)


class Replay(Workflow):
    """``specseed replay``: a bundle's scenarios on an engine, against the recording.

    ``bundle``: the bundle's folder. ``model``: a model.yaml (or what ``resolve_audit`` made
    of one) whose engine to use instead of the bundle's. ``engine_from_bundle``: the user's
    consent to run an engine the bundle names (``consent.engine_consent``). ``outputs``:
    ``bundle`` (and ``force``) to record the replay as a bundle, ``terminal`` to print the
    report and the diff (``show_all``: equal requests too), ``argv`` for the manifest.
    """

    def __init__(
        self,
        bundle: Path,
        outputs: AuditOutputs | None = None,
        *,
        model: Path | ResolvedAudit | None = None,
        engine_from_bundle: bool = False,
        show_all: bool = False,
        adapter: EngineAdapter | None = None,
        on_event: EventHandler | None = None,
    ) -> None:
        super().__init__(outputs, on_event)
        self.path = bundle
        self.model = model
        self.engine_from_bundle = engine_from_bundle
        self.show_all = show_all
        self.adapter = adapter

    def inputs(self) -> tuple[Path, ...]:
        """The bundle replayed (a folder: nothing may be written into it) and ``--model``."""
        model = self.model if isinstance(self.model, Path) else None
        return (self.path, *((model,) if model is not None else ()))

    def _say(self, text: str) -> None:
        consoles = self.consoles()
        if consoles is not None:
            consoles[1].print(text)

    def run(self, *, interrupts: Interrupts | None = None) -> ReplayOutcome:
        """Replay, record, render; returns the result and the exit code. Raises
        ``InputError`` before anything runs (an unwritable or busy ``--bundle`` folder, not a
        bundle, an engine the bundle names without consent), ``EngineError`` when the engine
        cannot run. A recorded bundle that misses a file is said after the report and makes
        the code 5 (1 when something failed)."""
        from specseed.bundle.format import read_bundle, recorded_scenarios
        from specseed.plan.planning import base_settings
        from specseed.workflows.consent import engine_consent

        self.check_outputs()
        loaded = read_bundle(self.path)
        consoles = self.consoles()
        if consoles is not None:
            for note in loaded.notes:
                consoles[0].print(f"[yellow]bundle:[/] {_escape(note)}")
        if self.model is None:
            engine_consent(loaded, self.engine_from_bundle, "replay", self._say)
        scenarios = [(s, [r.name for r in s.scenario.runs]) for s in recorded_scenarios(loaded)]
        engine = self._resolved_model()
        config, base_dir = _engine_of(loaded, engine)
        # The replay's bundle records the engine that served it, as its traces do.
        guard = self.guard(interrupts)
        with guard:
            guard.defer()  # held while the bundle is created (audit.py says why)
            with self.bundle(config, scenarios, base_dir) as writer:
                try:
                    guard.resume()
                    with self.session(
                        base_settings(config, base_dir), adapter=self.adapter, guard=guard
                    ) as session:
                        result = replay(
                            loaded,
                            engine,
                            on_event=self.emit,
                            trace_writer=writer.trace_writer if writer is not None else None,
                            command=self.outputs.command,
                            session=session,
                        )
                except KeyboardInterrupt:
                    guard.defer()
                    name = guard.received or "SIGINT"
                    code = EXIT_SIGNAL[name]
                    names = tuple(s.name for s in loaded.scenarios)
                    self.emit(AuditInterruptedEvent(name, 0, names, reported=False))
                    self.bundle_interrupted(config, name, names, code)
                    self.emit(AuditFinished(None, code, self.outputs.bundle, self.temporary_log()))
                    return ReplayOutcome(None, code)
                guard.defer()
                code = self._finish(result, guard.received)
        return ReplayOutcome(result, code)

    def _resolved_model(self) -> ResolvedAudit | None:
        if self.model is None or not isinstance(self.model, Path):
            return self.model
        from specseed.plan.resolve import resolve_audit

        return resolve_audit(self.model)

    def _finish(self, result: ReplayResult, received: str | None) -> int:
        """The bundle's manifest, then the report and the diff on the terminal; the exit
        code, which every line printed states (a manifest that could not be written is
        said on the terminal and makes it 5 unless something failed)."""
        audit = result.audit
        if audit.interrupted:
            finished = len(audit.scenarios)
            self.emit(AuditInterruptedEvent(audit.interrupted, finished, audit.unfinished, True))
        unwritten: list[OutputError] = []
        for document in self.documents():  # the bundle's manifest (a replay writes no report)
            try:
                document.finish(audit, replay_exit_code(result, received, bool(unwritten)))
            except OutputError as exc:
                unwritten.append(exc)
        code = replay_exit_code(result, received, bool(unwritten))
        consoles = self.consoles()
        if consoles is not None:
            out, err = consoles

            def render() -> None:
                from specseed.reporting.console import render_report
                from specseed.reporting.recording_diff import render_recording_diff

                render_report(audit, out, code, summary=True, command="replay")
                out.print()
                out.print("[bold]Replay against the recording[/] (A = recording, B = replay):")
                render_recording_diff(result.diff, out, show_all=self.show_all)
                out.print()
                for exc in unwritten:
                    err.print(f"[bold red]Error:[/] {_escape(exc.message)}")
                    if exc.hint:
                        err.print(f"[dim]hint: {_escape(exc.hint)}[/]")
                out.print(replay_summary(result, code))

            code = self.flush_terminal(render, code)
        self.emit(AuditFinished(audit, code, self.outputs.bundle, self.temporary_log()))
        return code


def replay_exit_code(
    result: ReplayResult, received: str | None = None, unwritten: bool = False
) -> int:
    """The exit code of ``specseed replay``, which every line it prints states, in the
    audit's order (``exit_codes.decide``): the signal that stopped it (130/143), else 1 when
    the replay's audit fails or the replay differs from the recording, else 5 when evidence
    or the bundle's manifest could not be written, else 4 when the replay's audit checked
    nothing (every finding is skip: half the verdict is missing, whatever the comparison
    with the recording says), else 0."""
    from specseed.plan.scope import checked_nothing

    audit = result.audit
    return decide(
        interrupted=audit.interrupted or received,
        violation=audit.verdict == "fail" or result.diff.differs,
        incomplete=unwritten or bool(audit.missing_evidence),
        checked_nothing=checked_nothing(audit.findings),
    )


def replay_summary(result: ReplayResult, code: int) -> str:
    """The replay's last line: both halves of its verdict and the exit code it returns."""
    audit = result.audit
    if audit.interrupted:
        head = f"[bold yellow]INTERRUPTED[/] ({audit.interrupted})"
    elif code == EXIT_NOTHING_CHECKED:
        head = "[bold yellow]NOTHING CHECKED[/]"
    elif audit.verdict == "fail" or result.diff.differs:
        head = "[bold red]FAIL[/]"
    else:
        head = "[bold green]PASS[/]"
    from specseed.plan.scope import checked_nothing

    if audit.verdict == "fail":
        verdict = "fails"
    elif checked_nothing(audit.findings):
        verdict = "checked nothing (every finding is skip)"
    else:
        verdict = "passes"
    if result.diff.differs:
        joined = "but" if verdict == "passes" else "and"
        same = f"{joined} the replay differs from the recording"
    else:
        same = "and the replay reproduces the recording"
    return f"replay: {head}: the audit {verdict} {same} (exit {code})"


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


__all__ = [
    "Replay",
    "ReplayOutcome",
    "ReplayResult",
    "replay",
    "replay_exit_code",
    "replay_summary",
]
