"""The audit as one object: a resolved plan and the outputs asked for in, an exit code out.

``Audit`` holds what ``specseed audit`` does between parsing its flags and exiting: it narrows
the plan (``scenarios``, ``shard``), locks the bundle folder and starts the bundle before the
engine loads, builds the reporters, runs the audit (``run.parallel.run_audit_jobs``, or
``run.execute.run_audit`` on an engine the caller built), writes the documents (files first,
then the terminal report) and decides the exit code. Every event goes through one stream,
the end included: ``AuditInterruptedEvent``, ``OutputFailed`` and, last of all,
``AuditFinished`` with the result and the exit code.

It needs no terminal: with ``AuditOutputs()`` it writes and prints nothing and returns the
result. Library errors (``InputError``, ``EngineError``, ...) propagate as typed errors; only
``cli/`` maps them to exit codes.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO

from specseed.audit.engine_log import ENGINE_LOG, capture_engine_log
from specseed.audit.exit_codes import (
    EXIT_NOTHING_CHECKED,
    EXIT_OK,
    EXIT_OUTPUT,
    EXIT_SIGNAL,
    EXIT_VIOLATION,
)
from specseed.audit.outputs import (
    AuditOutputs,
    StdoutConsole,
    check_bundle_folder,
    check_output_paths,
    check_writable,
    silence_stdout,
    write_document,
)
from specseed.core.errors import InputError, OutputError
from specseed.core.text import printable
from specseed.run.results import (
    AuditEvent,
    AuditFinished,
    AuditInterruptedEvent,
    AuditResult,
    AuditSkipped,
    EventHandler,
    OutputFailed,
)

if TYPE_CHECKING:  # torch and the engines load only when an audit runs
    from rich.console import Console

    from specseed.bundle.format import BundleWriter
    from specseed.engine_adapters.base import EngineAdapter
    from specseed.plan.planning import PlannedScenario
    from specseed.reporting.base import Reporter
    from specseed.reporting.console import ConsoleReporter
    from specseed.run.matrix import MatrixResult
    from specseed.scenarios.schema import AuditConfig

DEFAULT_SOURCE = "(built-in default)"
"""The source of an audit with no model.yaml: the reference engine and the built-in library."""


class InterruptGuard(Protocol):
    """What the audit needs of a signal handler (``cli/interrupts.py`` is one): while the
    engines run, a signal raises ``AuditInterrupted``; after ``defer``, it is only noted in
    ``received``, so no report is cut short."""

    received: str | None

    def defer(self) -> None: ...

    def __enter__(self) -> InterruptGuard: ...

    def __exit__(self, *exc: object) -> None: ...


class _NoGuard:
    """No signal handlers: Ctrl-C still stops the runs (``KeyboardInterrupt`` is SIGINT)."""

    received: str | None = None

    def defer(self) -> None:
        pass

    def __enter__(self) -> _NoGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@dataclass(frozen=True)
class AuditOutcome:
    """What ``Audit.run`` returns (the same as its ``AuditFinished`` event)."""

    result: AuditResult | None
    """None when nothing ran: the shard holds no scenario, or a signal came first."""
    exit_code: int


def exit_code(result: AuditResult, output_problems: int = 0) -> int:
    """Interrupted beats violation beats unwritten outputs or missing evidence (5) beats
    nothing checked (4); otherwise 0 (docs/exit-codes.md)."""
    if result.interrupted:
        return EXIT_SIGNAL.get(result.interrupted, EXIT_SIGNAL["SIGINT"])
    if result.verdict == "fail":
        return EXIT_VIOLATION
    if output_problems or result.missing_evidence:
        return EXIT_OUTPUT
    from specseed.plan.scope import checked_nothing

    if checked_nothing(result.findings):
        return EXIT_NOTHING_CHECKED
    return EXIT_OK


class Audit:
    """One audit of one engine: the plan, the outputs asked for, and the work between them.

    Build it with :meth:`from_model_yaml`, :meth:`from_config` or directly from a plan
    (``plan.planning.plan_audit``); call :meth:`run` once. ``adapter``: an engine already
    built (``run.execute.create_adapter``), used instead of loading one (serial audits only).
    ``on_event``: called with every event after the reporters, the last being
    ``AuditFinished``.
    """

    def __init__(
        self,
        config: AuditConfig,
        base_dir: Path,
        source: str,
        planned: Sequence[PlannedScenario],
        outputs: AuditOutputs | None = None,
        *,
        model_yaml: Path | None = None,
        adapter: EngineAdapter | None = None,
        on_event: EventHandler | None = None,
    ) -> None:
        self.config = config
        self.base_dir = base_dir
        self.source = source
        self.planned = list(planned)
        self.outputs = outputs or AuditOutputs()
        self.model_yaml = model_yaml
        """model.yaml, when the audit was read from one (an input no report may overwrite)."""
        self.adapter = adapter
        self.on_event = on_event
        self._reporters: list[Reporter] = []
        self._bundle_reporter: list[Reporter] = []
        self._out: Console | None = None
        self._err: Console | None = None
        if adapter is not None and self.outputs.jobs not in (1, "auto"):
            raise InputError(
                "an engine built by the caller serves one process",
                hint="give jobs=1, or no adapter",
            )

    @classmethod
    def from_config(
        cls,
        config: AuditConfig | None = None,
        base_dir: Path | None = None,
        outputs: AuditOutputs | None = None,
        *,
        source: str = DEFAULT_SOURCE,
        adapter: EngineAdapter | None = None,
        on_event: EventHandler | None = None,
    ) -> Audit:
        """An audit of ``config`` (default: the reference engine, the built-in library),
        relative paths taken from ``base_dir`` (default: the working folder)."""
        from specseed.plan.planning import plan_audit
        from specseed.scenarios.schema import AuditConfig

        config = config if config is not None else AuditConfig()
        base_dir = base_dir if base_dir is not None else Path.cwd()
        planned = plan_audit(config, base_dir, source)
        return cls(config, base_dir, source, planned, outputs, adapter=adapter, on_event=on_event)

    @classmethod
    def from_model_yaml(
        cls,
        model_yaml: Path,
        outputs: AuditOutputs | None = None,
        *,
        adapter: EngineAdapter | None = None,
        on_event: EventHandler | None = None,
    ) -> Audit:
        """An audit of the model.yaml at ``model_yaml`` (``ScenarioError`` if it is invalid)."""
        from specseed.checks import CHECKS
        from specseed.plan.planning import plan_audit
        from specseed.scenarios.loader import load_audit_config

        config = load_audit_config(model_yaml, check_ids=CHECKS)
        base_dir, source = model_yaml.parent, str(model_yaml)
        planned = plan_audit(config, base_dir, source)
        return cls(
            config,
            base_dir,
            source,
            planned,
            outputs,
            model_yaml=model_yaml,
            adapter=adapter,
            on_event=on_event,
        )

    # -- before anything runs -------------------------------------------------------------

    def _inputs(self) -> list[Path]:
        """model.yaml and every scenario file it names (``--scenario`` or not)."""
        paths = [self.model_yaml] if self.model_yaml is not None else []
        for p in self.planned:
            source = p.loaded.source
            if not source.startswith("builtin:"):
                paths.append(Path(source) if Path(source).is_absolute() else self.base_dir / source)
        return paths

    def check_outputs(self) -> None:
        """``InputError`` for an output that would overwrite an input, share a path, or
        could not be written; nothing is created but the outputs' folders."""
        from specseed.audit.outputs import report_option
        from specseed.reporting.formats import get_format

        outputs = self.outputs
        formats = [get_format(name) for name, _ in outputs.reports]
        for fmt in formats:
            fmt.load()  # a plugin that cannot render is refused before anything runs
        check_output_paths(
            [
                *((report_option(name), path) for name, path in outputs.reports),
                ("--engine-log", outputs.engine_log),
            ],
            self._inputs(),
        )
        for fmt, (_, path) in zip(formats, outputs.reports, strict=True):
            check_writable(path, fmt.what)
        check_writable(outputs.engine_log, "engine log")
        check_writable(outputs.bundle, "bundle", directory=True)
        check_bundle_folder(outputs.bundle, force=outputs.force)

    def selected(self) -> list[PlannedScenario]:
        """The planned scenarios this audit runs: ``scenarios`` and then ``shard`` applied.
        ``InputError`` for a name the plan lacks or a selection that checks nothing."""
        from specseed.plan.scope import check_scope
        from specseed.run.parallel import shard

        planned = self.planned
        wanted = self.outputs.scenarios
        if wanted:
            known = {p.scenario.name for p in planned}
            unknown = [name for name in wanted if name not in known]
            if unknown:
                raise InputError(
                    f"--scenario {', '.join(unknown)}: not among this audit's scenarios",
                    hint=f"available: {', '.join(sorted(known))}",
                )
            planned = [p for p in planned if p.scenario.name in wanted]
        check_scope(self.config.checks.skip, [p.scenario for p in planned], self.source)
        if self.outputs.shard is not None:
            planned = shard(planned, *self.outputs.shard)
        return planned

    # -- the event stream -----------------------------------------------------------------

    def _emit(self, event: AuditEvent) -> None:
        for reporter in self._reporters:
            reporter.on_event(event)
        if self.on_event is not None:
            self.on_event(event)

    def _terminal(self) -> ConsoleReporter | None:
        """The consoles and the terminal's reporters, when ``terminal`` was asked for."""
        if not self.outputs.terminal:
            return None
        from specseed.core.secrets import SafeConsole
        from specseed.reporting.console import ConsoleReporter
        from specseed.reporting.progress import ProgressLines

        json = self.outputs.json
        # A JSON report on stdout moves the terminal report to stderr.
        self._out = StdoutConsole(stderr=json is not None and str(json) == "-")
        self._err = err = SafeConsole(stderr=True)
        show = self.outputs.progress
        console = ConsoleReporter(
            self._out, err, progress=show and err.is_terminal, summary=self.outputs.summary
        )
        self._reporters.append(console)
        if show and not err.is_terminal:
            self._reporters.append(ProgressLines())
        return console

    def _skipped(self) -> AuditOutcome:
        i, n = self.outputs.shard or (1, 1)
        self._emit(AuditSkipped(f"shard {i}/{n}: no scenarios fall in this shard; nothing to run."))
        self._emit(AuditFinished(None, EXIT_OK))
        return AuditOutcome(None, EXIT_OK)

    # -- the audit ------------------------------------------------------------------------

    def run(self, *, interrupts: Callable[[], InterruptGuard] | None = None) -> AuditOutcome:
        """Run the audit and write every output; returns the result and the exit code.

        ``interrupts`` makes the signal handler that is active while the engines run and the
        reports are written (``cli.interrupts.InterruptGuard``); without one, Ctrl-C still
        stops the runs as SIGINT. Raises ``InputError`` before anything runs (bad selection,
        unwritable output, busy bundle folder) and ``EngineError`` if the engine cannot run;
        once the runs started, a problem is an event and an exit code instead.
        """
        self.check_outputs()
        planned = self.selected()
        console = self._terminal()
        if not planned:
            return self._skipped()
        with self._bundle(planned) as bundle:
            # The bundle's manifest first, then the report files.
            documents = [*self._bundle_reporter, *self._documents()]
            guard = interrupts() if interrupts is not None else _NoGuard()
            with guard:
                try:
                    with (
                        console if console is not None else nullcontext(),
                        capture_engine_log(self._engine_log_path()) as terminal,
                    ):
                        self._route_terminal(terminal)
                        try:
                            result = self._execute(planned, bundle)
                        finally:
                            self._route_terminal(None)
                except KeyboardInterrupt:
                    guard.defer()
                    name = guard.received or "SIGINT"
                    code = EXIT_SIGNAL[name]
                    names = tuple(p.scenario.name for p in planned)
                    self._emit(AuditInterruptedEvent(name, 0, names, reported=False))
                    self._emit(AuditFinished(None, code, self.outputs.bundle))
                    return AuditOutcome(None, code)
                guard.defer()
                code = self._finish(result, documents, console)
                if guard.received and not result.interrupted:  # came while reports were written
                    code = EXIT_SIGNAL[guard.received]
                self._emit(AuditFinished(result, code, self.outputs.bundle))
        return AuditOutcome(result, code)

    def _route_terminal(self, stream: TextIO | None) -> None:
        """Point specseed's own stderr output at ``stream`` while the engine's stderr goes to
        its log (None: back to ``sys.stderr``)."""
        from specseed.reporting.progress import ProgressLines

        if self._err is not None:
            self._err.file = stream  # type: ignore[assignment]
        if self._out is not None and self._out.stderr:
            self._out.file = stream  # type: ignore[assignment]
        for reporter in self._reporters:
            if isinstance(reporter, ProgressLines):
                reporter.stream = stream

    def _engine_log_path(self) -> Path | None:
        """Where the engine's own log goes: ``--engine-log``, else the bundle's
        ``engine.log``; None leaves it on the terminal."""
        if self.outputs.engine_log is not None:
            return self.outputs.engine_log
        if self.outputs.bundle is not None:
            return self.outputs.bundle / ENGINE_LOG
        return None

    @contextmanager
    def _bundle(self, planned: Sequence[PlannedScenario]) -> Iterator[BundleWriter | None]:
        """The bundle folder locked and the bundle started, for the audit's duration."""
        root = self.outputs.bundle
        if root is None:
            yield None
            return
        from specseed.bundle.format import BundleWriter
        from specseed.reporting.bundle import BundleReporter
        from specseed.traces.folder import TraceDir

        # The folder's lock before the bundle's first file: a second audit on the same folder
        # stops here (exit 2) and tramples nothing.
        folder = TraceDir(root, self.outputs.bundle_flag)
        folder.lock()
        try:
            bundle = BundleWriter(root, force=self.outputs.force)
            try:
                bundle.start(
                    self.config,
                    [(p.loaded, [plan.run for plan in p.plans]) for p in planned],
                    self.base_dir,
                    list(self.outputs.argv),
                )
            except OSError as exc:
                where = exc.filename or root
                message = f"cannot write the bundle in {root}: {where}: {exc.strerror or exc}"
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # a full disk: exit 5
                    raise OutputError(message, hint="free space; nothing ran") from None
                raise InputError(message, hint="give a new or empty directory") from None
            if bundle.removed:
                print(
                    f"--force: removed the earlier bundle in {printable(str(root))}: "
                    + ", ".join(printable(r) for r in bundle.removed),
                    file=sys.stderr,
                )
            reporter = BundleReporter(bundle)
            self._reporters.append(reporter)
            self._bundle_reporter = [reporter]
            yield bundle
        finally:
            folder.release()

    def _documents(self) -> list[Reporter]:
        """The report files, one per ``--report`` (``--json``, ``--junit``), in the order
        given, but those stating the exit code (JSON) after the others: a failed write
        changes the code."""
        from specseed.reporting.base import Sink
        from specseed.reporting.formats import get_format

        def sink(path: Path, what: str) -> Sink:
            return lambda text: write_document(path, text, what)

        chosen = [(get_format(name), path) for name, path in self.outputs.reports]
        chosen.sort(key=lambda pair: pair[0].states_exit_code)
        return [fmt.build(sink(path, fmt.what)) for fmt, path in chosen]

    def _execute(
        self, planned: Sequence[PlannedScenario], bundle: BundleWriter | None
    ) -> AuditResult:
        trace_writer = bundle.trace_writer if bundle is not None else None
        if self.adapter is not None:
            from specseed.run.execute import run_audit

            return run_audit(
                self.config,
                planned,
                self.base_dir,
                on_event=self._emit,
                adapter=self.adapter,
                command=self.outputs.command,
                trace_writer=trace_writer,
                lock_trace_dir=False,
            )
        from specseed.run.parallel import resolve_jobs, run_audit_jobs

        jobs = resolve_jobs(self.outputs.jobs, self.config, planned)
        return run_audit_jobs(
            self.config,
            planned,
            self.base_dir,
            jobs=jobs,
            # The parent holds the folder's lock while workers (jobs > 1) write into it.
            trace_dir=self.outputs.bundle if jobs > 1 else None,
            on_event=self._emit,
            command=self.outputs.command,
            trace_writer=trace_writer,
            lock_trace_dir=False,
        )

    def _finish(
        self, result: AuditResult, documents: list[Reporter], console: ConsoleReporter | None
    ) -> int:
        """Write the documents first (a closed stdout must not lose them), then the terminal
        report. Returns the exit code."""
        if result.interrupted:
            finished = len(result.scenarios)
            self._emit(AuditInterruptedEvent(result.interrupted, finished, result.unfinished, True))
        problems = 0
        for document in documents:
            try:
                document.finish(result, exit_code(result, problems))
            except OutputError as exc:
                problems += 1
                self._emit(OutputFailed(exc.message, exc.hint))
        code = exit_code(result, problems)
        if console is not None:
            try:
                console.finish(result, code)
                sys.stdout.flush()
            except BrokenPipeError:
                silence_stdout()
        return code

    # -- the detection matrix -------------------------------------------------------------

    def run_matrix(
        self, *, interrupts: Callable[[], InterruptGuard] | None = None
    ) -> tuple[MatrixResult | None, int]:
        """Inject each defect class into the reference engine in turn (``run.matrix``) and
        render which checks catch it; exit 1 if the defect-free audit fails or a targeted
        defect is missed. Records no bundle (one audit per defect). A signal while the
        audits run (``interrupts``, as in :meth:`run`) stops them and every worker: no
        matrix, exit 130 or 143."""
        if self.outputs.bundle is not None:
            raise InputError(
                "--bundle/--trace-dir record one audit; --matrix runs one per defect",
                hint="record the defect you want with engine.options.defects and --bundle",
            )
        self.check_outputs()
        if not self.selected():
            self._terminal()
            return None, self._skipped().exit_code
        from specseed.core.defects import DEFECT_IDS
        from specseed.run.matrix import MatrixRow, run_matrix
        from specseed.run.parallel import resolve_matrix_jobs

        self._terminal()
        err = self._err
        audits = 1 + len(DEFECT_IDS)
        done: list[MatrixRow] = []

        def announce(row: MatrixRow) -> None:
            done.append(row)
            if err is not None and self.outputs.progress:
                err.print(
                    f"[dim][{len(done)}/{audits}] audited with defect "
                    f"{row.defect or '(none)'}: {row.verdict}[/]"
                )

        guard = interrupts() if interrupts is not None else _NoGuard()
        with guard:
            try:
                result = run_matrix(
                    self.config,
                    self.base_dir,
                    scenario_filter=list(self.outputs.scenarios) or None,
                    on_row=announce,
                    jobs=resolve_matrix_jobs(self.outputs.jobs, self.config),
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
        if self._out is not None:
            from specseed.reporting.console import render_matrix

            render_matrix(result, self._out)
        return result, EXIT_OK if result.ok else EXIT_VIOLATION


__all__ = [
    "DEFAULT_SOURCE",
    "Audit",
    "AuditOutcome",
    "AuditOutputs",
    "InterruptGuard",
    "exit_code",
]
