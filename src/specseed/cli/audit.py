"""``specseed audit``: the flags of an audit, parsed into ``AuditOutputs``, and the input
resolved once (``plan.resolve.resolve_audit``); the work is ``workflows.audit.Audit``'s (or,
with ``--matrix``, ``workflows.matrix.Matrix``'s)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from specseed.cli.error_boundary import error_boundary
from specseed.cli.inputs import ENGINE_LOG, FLAG, check_model_yaml_argument
from specseed.core.errors import InputError
from specseed.core.secrets import SafeConsole

AUDIT_HELP = """Replay scenarios on an engine and check reproducibility invariants.

With no MODEL_YAML, audits the embedded reference engine (CPU) with the whole built-in
scenario library.

[bold]Examples[/]

  specseed audit
  specseed audit model.yaml --json report.json --junit junit.xml
  specseed audit model.yaml --report junit=junit.xml --report json=-
  specseed audit model.yaml --scenario uptime --bundle bug/
  specseed report bug/ > issue.md
  specseed audit --matrix

Exit codes: 0 every invariant holds, 1 a violation, 2 bad input, 3 the engine could not run,
4 nothing was checked (every finding is skip), 5 an output (report or trace file) could not be
written, 130/143/129 interrupted (SIGINT/SIGTERM/SIGHUP).
"""


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
    report: Annotated[
        list[str] | None,
        typer.Option(
            "--report",
            help="Write a report in FORMAT to PATH ('-' for stdout); repeatable. FORMAT: json "
            "(as --json), junit (as --junit), html (one page with figures), or one another "
            "package adds (specseed formats lists them). Example: --report junit=junit.xml",
            metavar="FORMAT=PATH",
            show_default=False,
        ),
    ] = None,
    engine_log: Annotated[Path | None, ENGINE_LOG] = None,
    bundle_dir: Annotated[
        Path | None,
        typer.Option(
            "--bundle",
            help="Write a bug-report bundle to DIR as the audit goes: manifest, resolved "
            "model.yaml, every scenario's text, traces (DIR/<scenario>/<run>.jsonl), findings, "
            "environment, and the HTML report (DIR/report.html). Read it with specseed check / "
            "report / diff / replay.",
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
        str,
        typer.Option(
            "--jobs",
            "-j",
            help=(
                "Run independent scenarios (with --matrix: the defect classes' audits) in N "
                "worker processes (each loads its own engine). auto: one per CPU for the "
                "reference engine's built-in model on the CPU when the audit is large enough "
                "to pay for them, one process otherwise."
            ),
            metavar="N|auto",
        ),
    ] = "auto",
    shard_spec: Annotated[
        str | None,
        typer.Option(
            "--shard",
            help="Run shard I of N: the scenarios sorted by name, dealt round-robin.",
            metavar="I/N",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            metavar=FLAG,
            help="Replace an earlier bundle in the --bundle folder (its files only; says which).",
        ),
    ] = False,
) -> None:
    """Replay scenarios on an engine and check reproducibility invariants."""
    workers_coming = matrix or not (scenario or shard_spec)
    if model_yaml is None and workers_coming and jobs.strip() != "1":
        # The default audit and the matrix run on workers (--jobs auto on more than one
        # CPU): their server's imports (torch) start now, beside this process's own imports
        # and planning.
        from specseed.run.forkserver import start_early

        start_early()
    from specseed.cli.interrupts import InterruptGuard
    from specseed.plan.resolve import resolve_audit
    from specseed.reporting.formats import parse_report
    from specseed.run.parallel import parse_jobs, parse_shard
    from specseed.workflows.audit import Audit
    from specseed.workflows.matrix import Matrix
    from specseed.workflows.outputs import AuditOutputs

    with error_boundary(runs_engine=True):
        check_model_yaml_argument(model_yaml)
        if bundle_dir is not None and trace_dir is not None and bundle_dir != trace_dir:
            raise InputError("--bundle and --trace-dir name two directories", hint="give one")
        outputs = AuditOutputs(
            json=json_path,
            junit=junit_path,
            reports=tuple(parse_report(spec) for spec in report or ()),
            engine_log=engine_log,
            bundle=bundle_dir or trace_dir,
            bundle_flag="--bundle" if bundle_dir is not None else "--trace-dir",
            terminal=True,
            progress=not no_progress,
            summary=summary,
            scenarios=tuple(scenario or ()),
            shard=parse_shard(shard_spec) if shard_spec is not None else None,
            jobs=parse_jobs(jobs),
            force=force,
            argv=tuple(sys.argv[1:]) or ("audit",),
        )
        resolved = resolve_audit(model_yaml)
        if resolved.scenario_file:
            SafeConsole(stderr=True, soft_wrap=True).print(
                f"{model_yaml} is a scenario file, not a model.yaml: auditing it on the "
                "default engine (reference)"
            )
        if matrix:
            exit_code = Matrix(resolved, outputs).run(interrupts=InterruptGuard)[1]
        else:
            exit_code = Audit(resolved, outputs).run(interrupts=InterruptGuard).exit_code
    raise typer.Exit(exit_code)
