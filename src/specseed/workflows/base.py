"""What every workflow shares: its outputs checked before anything runs, the bundle folder's
lock, its bundle started and finished, one stream of events, the terminal's consoles, the
report documents, and the exit code of an audit's result.

A workflow (``Audit``, ``Replay``, ``Minimize``, ``Matrix``) is a ``Workflow``: it is built
from what the user asked for (``AuditOutputs``) and an optional ``on_event``, and every event
it emits goes through :meth:`Workflow.emit`, to its reporters first (the terminal, the
bundle), then to ``on_event``. Its engine is an ``EngineSession`` (``session.py``) that the
workflow opens with :meth:`Workflow.session`, so the engine's log lands in the bundle's
``engine.log`` (or ``--engine-log``, or a temporary file named at the end) and specseed's own
output stays on the terminal.
"""

from __future__ import annotations

import errno
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from specseed.core.errors import InputError, OutputError
from specseed.core.text import printable
from specseed.run.results import (
    AuditEvent,
    AuditFinished,
    AuditResult,
    AuditSkipped,
    EventHandler,
    OutputFailed,
)
from specseed.workflows.engine_log import ENGINE_LOG
from specseed.workflows.exit_codes import EXIT_OK, decide
from specseed.workflows.outputs import (
    AuditOutputs,
    StdoutConsole,
    check_bundle_folder,
    check_output_paths,
    check_writable,
    flush_terminal,
    write_document,
)
from specseed.workflows.session import EngineSession, InterruptGuard, NoGuard

if TYPE_CHECKING:  # torch and the engines load only when a workflow runs
    from rich.console import Console

    from specseed.bundle.format import BundleWriter
    from specseed.engine_adapters.base import EngineAdapter, EngineSettings
    from specseed.reporting.base import Reporter
    from specseed.reporting.console import ConsoleReporter
    from specseed.scenarios.loader import LoadedScenario
    from specseed.scenarios.schema import AuditConfig

Interrupts = Callable[[], InterruptGuard]
"""Makes the signal handler that is active while the engines run and the reports are
written (``cli.interrupts.InterruptGuard``)."""


def exit_code(result: AuditResult, output_problems: int = 0) -> int:
    """Interrupted beats violation beats unwritten outputs or missing evidence (5) beats
    nothing checked (4); otherwise 0 (``exit_codes.decide``, docs/exit-codes.md)."""
    from specseed.plan.scope import checked_nothing

    return decide(
        interrupted=result.interrupted,
        violation=result.verdict == "fail",
        incomplete=bool(output_problems or result.missing_evidence),
        checked_nothing=checked_nothing(result.findings),
    )


class Workflow:
    """The shared half of every workflow. ``outputs``: what to write and print (quiet by
    default); ``on_event``: called with every event after the reporters."""

    def __init__(self, outputs: AuditOutputs | None = None, on_event: EventHandler | None = None):
        self.outputs = outputs or AuditOutputs()
        self.on_event = on_event
        self._reporters: list[Reporter] = []
        self._bundle_reporter: list[Reporter] = []
        self._out: Console | None = None
        self._err: Console | None = None
        self._temporary_log: Path | None = None

    # -- before anything runs -------------------------------------------------------------

    def inputs(self) -> Iterable[Path]:
        """The files this workflow reads, which no output may overwrite."""
        return ()

    def check_outputs(self) -> None:
        """``InputError`` for an output that would overwrite an input, share a path, or
        could not be written; nothing is created but the outputs' folders."""
        from specseed.reporting.formats import get_format
        from specseed.workflows.outputs import report_option

        outputs = self.outputs
        formats = [get_format(name) for name, _ in outputs.reports]
        for fmt in formats:
            fmt.load()  # a plugin that cannot render is refused before anything runs
        check_output_paths(
            [
                *((report_option(name), path) for name, path in outputs.reports),
                ("--engine-log", None if str(outputs.engine_log) == "-" else outputs.engine_log),
            ],
            self.inputs(),
            bundle=outputs.bundle,
            bundle_flag=outputs.bundle_flag,
        )
        for fmt, (_, path) in zip(formats, outputs.reports, strict=True):
            check_writable(path, fmt.what)
        check_writable(outputs.engine_log, "engine log")
        check_writable(outputs.bundle, "bundle", directory=True)
        check_bundle_folder(outputs.bundle, force=outputs.force, flag=outputs.bundle_flag)

    def skip_shard(self) -> int:
        """Nothing to run in this shard, and that is no error: said through the events."""
        i, n = self.outputs.shard or (1, 1)
        self.emit(AuditSkipped(f"shard {i}/{n}: no scenarios fall in this shard; nothing to run."))
        self.emit(AuditFinished(None, EXIT_OK))
        return EXIT_OK

    # -- the event stream -----------------------------------------------------------------

    def emit(self, event: AuditEvent) -> None:
        """One event to every reporter, then to ``on_event``."""
        for reporter in self._reporters:
            reporter.on_event(event)
        if self.on_event is not None:
            self.on_event(event)

    # -- the terminal ---------------------------------------------------------------------

    def consoles(self) -> tuple[Console, Console] | None:
        """The terminal's consoles (report, notes), when ``terminal`` was asked for. A report
        file on stdout (``--json -``, ``--report FORMAT=-``) moves the terminal report to
        stderr."""
        if not self.outputs.terminal:
            return None
        if self._out is None or self._err is None:
            from specseed.core.secrets import SafeConsole

            on_stdout = any(str(path) == "-" for _, path in self.outputs.reports)
            self._out = StdoutConsole(stderr=on_stdout)
            self._err = SafeConsole(stderr=True)
        return self._out, self._err

    def terminal_reporter(self) -> ConsoleReporter | None:
        """The terminal's reporters (the report, the progress), when ``terminal`` was asked
        for; the returned one renders the end."""
        consoles = self.consoles()
        if consoles is None:
            return None
        from specseed.reporting.console import ConsoleReporter
        from specseed.reporting.progress import ProgressLines

        out, err = consoles
        show = self.outputs.progress
        console = ConsoleReporter(
            out, err, progress=show and err.is_terminal, summary=self.outputs.summary
        )
        self._reporters.append(console)
        if show and not err.is_terminal:
            self._reporters.append(ProgressLines())
        return console

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

    # -- the engine -----------------------------------------------------------------------

    @staticmethod
    def guard(interrupts: Interrupts | None) -> InterruptGuard:
        """The signal handler to run under (``NoGuard`` without one: Ctrl-C is SIGINT)."""
        return interrupts() if interrupts is not None else NoGuard()

    def engine_log_path(self) -> Path | None:
        """Where the engine's own log goes: ``--engine-log`` (``-``: left on the terminal),
        else the bundle's ``engine.log``, else, with the terminal report, a temporary file
        (:meth:`temporary_log` names it once the engine is done); None leaves it where it
        is (a library caller's stderr)."""
        given = self.outputs.engine_log
        if given is not None:
            return None if str(given) == "-" else given
        if self.outputs.bundle is not None:
            return self.outputs.bundle / ENGINE_LOG
        if not self.outputs.terminal:
            return None
        if self._temporary_log is None:
            try:
                fd, name = tempfile.mkstemp(prefix="specseed-engine-", suffix=".log")
            except OSError:  # no writable temporary folder: the log stays on the terminal
                return None
            os.close(fd)
            self._temporary_log = Path(name)
        return self._temporary_log

    def temporary_log(self) -> Path | None:
        """The temporary file the engine's log went to, once the engine is done, when the
        engine wrote anything; an empty one is removed (None)."""
        path = self._temporary_log
        if path is None:
            return None
        try:
            if path.stat().st_size > 0:
                return path
            path.unlink()
        except OSError:
            pass
        self._temporary_log = None
        return None

    def session(
        self,
        settings: EngineSettings | None,
        *,
        adapter: EngineAdapter | None = None,
        jobs: int = 1,
        guard: InterruptGuard | None = None,
    ) -> EngineSession:
        """The workflow's engine session: its log to :meth:`engine_log_path`, the terminal's
        output routed around it."""
        return EngineSession(
            settings,
            adapter=adapter,
            jobs=jobs,
            log=self.engine_log_path(),
            log_contained=self.outputs.engine_log is None,
            on_terminal=self._route_terminal,
            guard=guard,
        )

    # -- the bundle -----------------------------------------------------------------------

    @staticmethod
    @contextmanager
    def folder_lock(root: Path, flag: str = "--bundle") -> Iterator[None]:
        """The bundle folder ``root`` held by this workflow for the block: every workflow
        that writes into a bundle (an audit, a replay, ``minimize``, ``report``'s shrinking)
        takes this lock first, so none removes or rewrites what another is writing
        (``TraceDirBusy``, exit 2, when another holds it)."""
        from specseed.traces.folder import TraceDir

        folder = TraceDir(root, flag)
        folder.lock()
        try:
            yield
        finally:
            folder.release()

    @contextmanager
    def bundle(
        self,
        config: AuditConfig,
        scenarios: Sequence[tuple[LoadedScenario, Sequence[str]]],
        base_dir: Path,
        settings: EngineSettings | None = None,
    ) -> Iterator[BundleWriter | None]:
        """The bundle folder locked and the bundle started (``scenarios``: each with the runs
        that will be served; ``settings``: the engine settings as resolved, whose options the
        bundle records), for the workflow's duration; None without a bundle. Its reporter
        joins the event stream; :meth:`documents` lists it first."""
        root = self.outputs.bundle
        if root is None:
            yield None
            return
        from specseed.bundle.format import BundleWriter
        from specseed.reporting.bundle_reporter import BundleReporter

        # The folder's lock before the bundle's first file: a second workflow on the same
        # folder stops here (exit 2) and tramples nothing.
        with self.folder_lock(root, self.outputs.bundle_flag):
            bundle = BundleWriter(root, force=self.outputs.force)
            try:
                bundle.start(
                    config, scenarios, base_dir, list(self.outputs.argv), settings=settings
                )
            except OSError as exc:
                where = exc.filename or root
                message = f"cannot write the bundle in {root}: {where}: {exc.strerror or exc}"
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # a full disk: exit 5
                    raise OutputError(message, hint="free space; nothing ran") from None
                raise InputError(message, hint="give a new or empty directory") from None
            if bundle.removed:
                note = f"--force: removed the earlier bundle in {printable(str(root))}: " + (
                    ", ".join(printable(r) for r in bundle.removed)
                )
                consoles = self.consoles()
                if consoles is not None:  # wrapped at the terminal's width, no name split
                    from specseed.reporting.layout import print_message

                    print_message(consoles[1], note)
                else:
                    print(note, file=sys.stderr)
            reporter = BundleReporter(bundle)
            self._reporters.append(reporter)
            self._bundle_reporter = [reporter]
            yield bundle

    def bundle_interrupted(
        self, config: AuditConfig, signal: str, unfinished: Sequence[str], code: int
    ) -> None:
        """A signal came before any scenario finished (while the bundle was created or the
        engine loaded): the bundle's manifest says so (``interrupted by SIGNAL``), never
        "running", which a reader takes for a crash."""
        if not self._bundle_reporter:
            return
        result = AuditResult(
            config=config,
            contract=config.engine.contract,
            scenarios=(),
            environment={},
            seconds=0.0,
            interrupted=signal,
            unfinished=tuple(unfinished),
        )
        self.write_documents(result, self._bundle_reporter, lambda _result, _problems: code)

    # -- the end --------------------------------------------------------------------------

    def documents(self) -> list[Reporter]:
        """The documents written at the end: the bundle's manifest first, then one report
        file per ``--report`` (``--json``, ``--junit``) in the order given, but those stating
        the exit code (JSON) after the others: a failed write changes the code."""
        from specseed.reporting.base import Sink
        from specseed.reporting.formats import get_format

        def sink(path: Path, what: str) -> Sink:
            return lambda text: write_document(path, text, what)

        chosen = [(get_format(name), path) for name, path in self.outputs.reports]
        chosen.sort(key=lambda pair: pair[0].states_exit_code)
        return [
            *self._bundle_reporter,
            *(fmt.build(sink(path, fmt.what)) for fmt, path in chosen),
        ]

    def write_documents(
        self,
        result: AuditResult,
        documents: Sequence[Reporter],
        decide: Callable[[AuditResult, int], int] = exit_code,
    ) -> int:
        """Write each document (a failure is an ``OutputFailed`` event and changes the exit
        code the later ones state); returns ``decide(result, failures)``."""
        problems = 0
        for document in documents:
            try:
                document.finish(result, decide(result, problems))
            except OutputError as exc:
                problems += 1
                self.emit(OutputFailed(exc.message, exc.hint))
        return decide(result, problems)

    @staticmethod
    def flush_terminal(render: Callable[[], None], code: int) -> int:
        """The terminal report, last (a closed stdout must not lose the files); returns the
        exit code. A reader that went away (``| head``) silences the rest and keeps the code;
        a stdout that cannot take the report (``> /dev/full``) makes a 0 or a 4 exit 5 (an
        output that could not be written), as a report file would."""
        return flush_terminal(render, code)


__all__ = ["Interrupts", "Workflow", "exit_code"]
