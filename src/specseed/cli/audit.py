"""``specseed audit``: replay scenarios on an engine and report the invariants."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from specseed.cli.errors import (
    EXIT_NOTHING_CHECKED,
    EXIT_OK,
    EXIT_OUTPUT,
    EXIT_VIOLATION,
    error_boundary,
)
from specseed.cli.inputs import FLAG, check_model_yaml_argument, check_output_paths
from specseed.cli.interrupts import EXIT_SIGNAL, InterruptGuard
from specseed.core.errors import InputError, OutputError

if TYPE_CHECKING:  # the CLI must not import heavy modules before a command runs
    from specseed.reporting.base import Reporter
    from specseed.reporting.console import ConsoleReporter
    from specseed.run.results import AuditResult
    from specseed.scenarios.schema import AuditConfig

AUDIT_HELP = """Replay scenarios on an engine and check reproducibility invariants.

With no MODEL_YAML, audits the embedded reference engine (CPU) with the whole built-in
scenario library.

[bold]Examples[/]

  specseed audit
  specseed audit model.yaml --json report.json --junit junit.xml
  specseed audit model.yaml --scenario uptime --bundle bug/
  specseed report bug/ > issue.md
  specseed audit --matrix

Exit codes: 0 every invariant holds, 1 a violation, 2 bad input, 3 the engine could not run,
4 nothing was checked (every finding is skip), 5 an output (report or trace file) could not be
written, 130/143 interrupted (SIGINT/SIGTERM).
"""


def _check_writable(path: Path | None, what: str, *, directory: bool = False) -> None:
    """Refuse an output path before the audit runs, so no result is lost at the end."""
    if path is None or str(path) == "-":
        return
    folder = path if directory else path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create {folder} for the {what}: {exc.strerror}") from None
    if not directory and path.is_dir():
        raise InputError(f"the {what} path {path} is a directory", hint="give a file name")
    if not os.access(folder, os.W_OK):
        raise InputError(f"cannot write the {what} in {folder}: permission denied")


def _write(path: Path, text: str, what: str) -> None:
    """A report document to its file (atomically) or to stdout (``-``)."""
    from specseed.core.files import write_output

    if str(path) == "-":
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            _silence_stdout()
            raise OutputError(f"cannot write the {what} to stdout: the reader closed it") from None
        return
    write_output(path, text, what)


def _silence_stdout() -> None:
    """After the reader of stdout went away (``| head``): send the rest nowhere, so that the
    interpreter's final flush does not fail with a traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


class _Stdout(Console):
    """The terminal report's console. When the reader of stdout goes away (``| head -1``),
    the rest of the report goes nowhere and the audit keeps its exit code; Rich's default
    exits 1, which would turn a passing audit into a violation."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        _silence_stdout()


def _exit_code(result: AuditResult, output_problems: int) -> int:
    """Interrupted beats violation beats missing outputs (README, "Exit codes")."""
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


def _finish(
    result: AuditResult,
    documents: list[Reporter],
    console: ConsoleReporter,
    err: Console,
    trace_dir: Path | None,
) -> int:
    """Write the documents first (a closed stdout must not lose them), then the terminal
    report; say what is missing and where the evidence is. Returns the exit code."""
    problems: list[OutputError] = []
    for document in documents:
        try:
            document.finish(result, _exit_code(result, len(problems)))
        except OutputError as exc:
            problems.append(exc)
    exit_code = _exit_code(result, len(problems))
    try:
        console.finish(result, exit_code)
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    notes: list[str] = []
    if result.interrupted:
        finished = len(result.scenarios)
        total = finished + len(result.unfinished)
        notes.append(
            f"Interrupted by {result.interrupted}: {finished} of {total} scenarios finished "
            f"and are reported; not finished: {', '.join(result.unfinished)}."
        )
    notes += [f"Missing evidence: {m}" for m in result.missing_evidence]
    notes += [f"Error: {p.message}" for p in problems]
    if trace_dir is not None and (result.interrupted or result.missing_evidence):
        notes.append(
            f"Traces are in {trace_dir}/<scenario>/<run>.jsonl; a run cut short ends with an "
            "Interrupted failure or reads as truncated."
        )
    for note in notes:
        try:
            err.print(escape(note), soft_wrap=True)
        except OSError:
            break
    return exit_code


def _matrix(
    config: AuditConfig,
    base_dir: Path,
    scenarios: list[str] | None,
    out: Console,
    err: Console,
    *,
    show_progress: bool,
) -> None:
    from specseed.reporting.console import render_matrix
    from specseed.run.matrix import run_matrix

    def announce(defect: str | None) -> None:
        if show_progress:
            err.print(f"[dim]auditing with defect: {defect or '(none)'}[/]")

    result = run_matrix(config, base_dir, scenario_filter=scenarios, on_defect=announce)
    render_matrix(result, out)
    raise typer.Exit(EXIT_OK if result.ok else EXIT_VIOLATION)


def audit(
    model_yaml: Annotated[
        Path | None,
        typer.Argument(
            help="model.yaml naming the engine and scenarios (default: reference engine, "
            "built-in library).",
            show_default=False,
            metavar="MODEL_YAML",
        ),
    ] = None,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="Write the JSON report here ('-' for stdout).", metavar="PATH"),
    ] = None,
    junit_path: Annotated[
        Path | None, typer.Option("--junit", help="Write JUnit XML here.", metavar="PATH")
    ] = None,
    bundle_dir: Annotated[
        Path | None,
        typer.Option(
            "--bundle",
            help="Write a bug-report bundle to DIR as the audit goes: manifest, resolved "
            "model.yaml, every scenario's text, traces (DIR/<scenario>/<run>.jsonl), findings, "
            "environment. Read it with specseed check / report / diff / replay.",
            metavar="DIR",
        ),
    ] = None,
    trace_dir: Annotated[
        Path | None,
        typer.Option(
            "--trace-dir",
            help="Same as --bundle (traces under DIR/<scenario>/<run>.jsonl).",
            metavar="DIR",
        ),
    ] = None,
    scenario: Annotated[
        list[str] | None,
        typer.Option(
            "--scenario",
            "-s",
            help="Only these scenarios (by name; repeatable).",
            metavar="NAME",
        ),
    ] = None,
    matrix: Annotated[
        bool,
        typer.Option(
            "--matrix",
            metavar=FLAG,
            help="Inject each defect class into the reference engine in turn and print which "
            "checks catch it (exit 1 if the defect-free audit fails or a targeted defect is "
            "missed).",
        ),
    ] = False,
    no_progress: Annotated[
        bool,
        typer.Option(
            "--no-progress",
            metavar=FLAG,
            help="Do not show progress (a bar on a terminal, plain lines on stderr otherwise).",
        ),
    ] = False,
    summary: Annotated[
        bool,
        typer.Option(
            "--summary",
            metavar=FLAG,
            help="Print only the verdict table and the root causes (all in --json).",
        ),
    ] = False,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            "-j",
            help="Run independent scenarios in N worker processes (each loads its own engine).",
            metavar="N",
        ),
    ] = 1,
    shard_spec: Annotated[
        str | None,
        typer.Option(
            "--shard",
            help="Run shard I of N: the scenarios sorted by name, dealt round-robin.",
            metavar="I/N",
        ),
    ] = None,
) -> None:
    """Replay scenarios on an engine and check reproducibility invariants."""
    from specseed.bundle.format import BundleWriter
    from specseed.plan.planning import plan_audit
    from specseed.reporting.bundle import BundleReporter
    from specseed.reporting.console import ConsoleReporter
    from specseed.reporting.json_report import JsonReporter
    from specseed.reporting.junit import JunitReporter
    from specseed.reporting.progress import ProgressLines
    from specseed.run.parallel import parse_shard, run_audit_jobs, shard
    from specseed.run.results import AuditEvent
    from specseed.scenarios.loader import load_audit_config
    from specseed.scenarios.schema import AuditConfig

    out = _Stdout(stderr=json_path is not None and str(json_path) == "-")
    err = Console(stderr=True)
    from specseed.checks import CHECKS
    from specseed.plan.scope import check_scope

    with error_boundary(runs_engine=True):
        check_model_yaml_argument(model_yaml)
        if jobs < 1:
            raise InputError(f"--jobs {jobs}: give 1 or more worker processes")
        shard_of = parse_shard(shard_spec) if shard_spec is not None else None
        if model_yaml is not None:
            config = load_audit_config(model_yaml, check_ids=CHECKS)
            base_dir = model_yaml.parent
            source = str(model_yaml)
        else:
            config, base_dir, source = AuditConfig(), Path.cwd(), "(built-in default)"
        planned = plan_audit(config, base_dir, source)
        # Before anything is created on disk; every file model.yaml names, --scenario or not.
        check_output_paths(
            {"--json": json_path, "--junit": junit_path},
            [p for p in [model_yaml] if p is not None]
            + [
                Path(p.loaded.source)
                if Path(p.loaded.source).is_absolute()
                else base_dir / p.loaded.source
                for p in planned
                if not p.loaded.source.startswith("builtin:")
            ],
        )
        _check_writable(json_path, "JSON report")
        _check_writable(junit_path, "JUnit report")
        if bundle_dir is not None and trace_dir is not None and bundle_dir != trace_dir:
            raise InputError("--bundle and --trace-dir name two directories", hint="give one")
        bundle_dir = bundle_dir or trace_dir
        if matrix and bundle_dir is not None:
            raise InputError(
                "--bundle/--trace-dir record one audit; --matrix runs one per defect",
                hint="record the defect you want with engine.options.defects and --bundle",
            )
        _check_writable(bundle_dir, "bundle", directory=True)
        if scenario:
            known = {p.scenario.name for p in planned}
            unknown = [name for name in scenario if name not in known]
            if unknown:
                raise InputError(
                    f"--scenario {', '.join(unknown)}: not among this audit's scenarios",
                    hint=f"available: {', '.join(sorted(known))}",
                )
            planned = [p for p in planned if p.scenario.name in scenario]
        check_scope(config.checks.skip, [p.scenario for p in planned], source)
        if shard_of is not None:
            planned = shard(planned, *shard_of)
            if not planned:
                err.print(f"shard {shard_spec}: no scenarios fall in this shard; nothing to run.")
                raise typer.Exit(EXIT_OK)
        if matrix:
            _matrix(config, base_dir, scenario, out, err, show_progress=not no_progress)
        command = "specseed " + shlex.join(sys.argv[1:]) if sys.argv else "specseed audit"
        console = ConsoleReporter(
            out, err, progress=not no_progress and err.is_terminal, summary=summary
        )
        reporters: list[Reporter] = [console]
        if not no_progress and not err.is_terminal:
            reporters.append(ProgressLines(sys.stderr))
        documents: list[Reporter] = []
        bundle = None
        folder = None
        if bundle_dir is not None:
            from specseed.traces.folder import TraceDir

            # The folder's lock before the bundle's first file: a second audit on the same
            # folder stops here (exit 2) and tramples nothing.
            folder = TraceDir(bundle_dir)
            folder.lock()
            bundle = BundleWriter(bundle_dir)
            try:
                bundle.start(
                    config,
                    [(p.loaded, [plan.run for plan in p.plans]) for p in planned],
                    base_dir,
                    sys.argv[1:] or ["audit"],
                )
            except OSError as exc:
                folder.release()
                where = exc.filename or bundle_dir
                raise InputError(
                    f"cannot write the bundle in {bundle_dir}: {where}: {exc.strerror or exc}",
                    hint="give a new or empty directory",
                ) from None
            bundle_reporter = BundleReporter(bundle)
            reporters.append(bundle_reporter)
            documents.append(bundle_reporter)
        # JUnit first: the JSON report states the exit code, which a failed write changes.
        if junit_path is not None:
            documents.append(JunitReporter(lambda text: _write(junit_path, text, "JUnit report")))
        if json_path is not None:
            documents.append(JsonReporter(lambda text: _write(json_path, text, "JSON report")))

        def on_event(event: AuditEvent) -> None:
            for reporter in reporters:
                reporter.on_event(event)

        try:
            with InterruptGuard() as guard:
                try:
                    with console:
                        result = run_audit_jobs(
                            config,
                            planned,
                            base_dir,
                            jobs=jobs,
                            # Workers (--jobs) write under the folder; one process through the bundle.
                            trace_dir=bundle_dir if jobs > 1 else None,
                            on_event=on_event,
                            command=command,
                            trace_writer=bundle.trace_writer if bundle is not None else None,
                            lock_trace_dir=False,
                        )
                except KeyboardInterrupt:
                    guard.defer()
                    name = guard.received or "SIGINT"
                    err.print(f"Interrupted by {name} before any scenario ran; nothing to report.")
                    raise typer.Exit(EXIT_SIGNAL[name]) from None
                guard.defer()
                exit_code = _finish(result, documents, console, err, bundle_dir)
            if guard.received and not result.interrupted:  # arrived while reports were written
                exit_code = EXIT_SIGNAL[guard.received]
        finally:
            if folder is not None:
                folder.release()
    raise typer.Exit(exit_code)
