"""``specseed audit``: replay scenarios on an engine and report the invariants."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from specseed.cli.errors import EXIT_NOTHING_CHECKED, EXIT_OK, EXIT_VIOLATION, error_boundary
from specseed.cli.inputs import FLAG, check_model_yaml_argument, check_output_paths
from specseed.errors import InputError

if TYPE_CHECKING:  # the CLI must not import heavy modules before a command runs
    from specseed.scenarios.schema import AuditConfig

AUDIT_HELP = """Replay scenarios on an engine and check reproducibility invariants.

With no MODEL_YAML, audits the embedded reference engine (CPU) with the whole built-in
scenario library.

[bold]Examples[/]

  specseed audit
  specseed audit model.yaml --json report.json --junit junit.xml
  specseed audit model.yaml --scenario uptime --trace-dir traces/
  specseed audit --matrix

Exit codes: 0 every invariant holds, 1 a violation, 2 bad input, 3 the engine could not run,
4 nothing was checked (every finding is skip).
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
    if str(path) == "-":
        sys.stdout.write(text)
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write the {what} to {path}: {exc.strerror}") from None


def _matrix(
    config: AuditConfig,
    base_dir: Path,
    scenarios: list[str] | None,
    out: Console,
    err: Console,
    *,
    show_progress: bool,
) -> None:
    from specseed.matrix import run_matrix
    from specseed.reporting.console import render_matrix

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
    trace_dir: Annotated[
        Path | None,
        typer.Option(
            "--trace-dir",
            help="Stream every run's trace as JSONL under DIR/<scenario>/<run>.jsonl.",
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
        typer.Option("--no-progress", metavar=FLAG, help="Do not show progress while engines run."),
    ] = False,
) -> None:
    """Replay scenarios on an engine and check reproducibility invariants."""
    from specseed.reporting.base import Reporter
    from specseed.reporting.console import ConsoleReporter
    from specseed.reporting.json_report import JsonReporter
    from specseed.reporting.junit import JunitReporter
    from specseed.results import AuditEvent
    from specseed.runner import plan_audit, run_audit
    from specseed.scenarios.loader import load_audit_config
    from specseed.scenarios.schema import AuditConfig

    out = Console(stderr=json_path is not None and str(json_path) == "-")
    err = Console(stderr=True)
    from specseed.checks import CHECKS
    from specseed.scope import check_scope, checked_nothing

    with error_boundary(runs_engine=True):
        check_model_yaml_argument(model_yaml)
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
        _check_writable(trace_dir, "traces", directory=True)
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
        if matrix:
            _matrix(config, base_dir, scenario, out, err, show_progress=not no_progress)
        command = "specseed " + shlex.join(sys.argv[1:]) if sys.argv else "specseed audit"
        console = ConsoleReporter(out, err, progress=not no_progress and err.is_terminal)
        reporters: list[Reporter] = [console]
        if json_path is not None:
            reporters.append(JsonReporter(lambda text: _write(json_path, text, "JSON report")))
        if junit_path is not None:
            reporters.append(JunitReporter(lambda text: _write(junit_path, text, "JUnit report")))

        def on_event(event: AuditEvent) -> None:
            for reporter in reporters:
                reporter.on_event(event)

        with console:
            result = run_audit(
                config, planned, base_dir, trace_dir=trace_dir, on_event=on_event, command=command
            )
        exit_code = EXIT_VIOLATION if result.verdict == "fail" else EXIT_OK
        if exit_code == EXIT_OK and checked_nothing(result.findings):
            exit_code = EXIT_NOTHING_CHECKED
        for reporter in reporters:
            reporter.finish(result, exit_code)
    raise typer.Exit(exit_code)
