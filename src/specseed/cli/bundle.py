"""Commands on bundles: ``check``, ``report``, ``diff``, ``replay``, ``minimize``."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from specseed.cli.errors import EXIT_OK, EXIT_VIOLATION, error_boundary
from specseed.core.errors import InputError, OutputError
from specseed.core.secrets import SafeConsole
from specseed.workflows.outputs import check_bundle_folder, check_writable

if TYPE_CHECKING:  # commands import their modules when they run
    from specseed.bundle.format import Bundle
    from specseed.checks.findings import Finding

out = SafeConsole()
err = SafeConsole(stderr=True)

BUNDLE_ARG = typer.Argument(
    help="A bundle directory (written by `specseed audit --bundle DIR`).",
    metavar="BUNDLE",
    show_default=False,
)


def _notes(notes: tuple[str, ...], console: Console) -> None:
    for note in notes:
        console.print(f"[yellow]bundle cut short:[/] {escape(note)}")


def _write_text(path: Path | None, text: str) -> None:
    if path is None or str(path) == "-":
        from specseed.core.secrets import scrub_text

        sys.stdout.write(scrub_text(text, by_name=False))  # the file writer scrubs the same
        return
    from specseed.core.files import write_output

    write_output(path, text, "output")  # OutputError (exit 5) when it cannot be written
    err.print(f"wrote {escape(str(path))}")


ENGINE_FROM_BUNDLE = typer.Option(
    "--engine-from-bundle",
    help="Run the engine the bundle's model.yaml names (its base_url, API key variable, "
    "checkpoints), printed first. Without it only the built-in reference engine runs from a "
    "bundle; give --model for your own.",
)


def _self_contained(engine: str) -> bool:
    """An engine that reads no file, no variable and no network address from its options:
    the built-in reference engine. Only such an engine runs because a bundle names it."""
    from specseed.core.errors import SpecseedError
    from specseed.engine_adapters.registry import get_engine

    try:
        info = get_engine(engine)
    except SpecseedError:
        return False
    return info.builtin_model and info.source == "specseed"


def _engine_consent(bundle: Bundle, allowed: bool, command: str) -> None:
    """Refuse to run an engine only the bundle names (a stranger's server, a path, an
    environment variable) unless the user said so; say what will run when they did."""
    engine = bundle.config.engine
    if _self_contained(engine.name):
        return
    options = bundle.config.engine.options
    where = [
        f"{key} {options[key]}"
        for key in ("base_url", "api_key_env")
        if isinstance(options, dict) and options.get(key)
    ]
    where += [
        f"{key} {getattr(engine, key)}"
        for key in ("checkpoint", "draft_checkpoint")
        if getattr(engine, key, None)
    ]
    described = f"engine {engine.name}" + (f" ({', '.join(where)})" if where else "")
    if not allowed:
        raise InputError(
            f"{command}: the bundle names {described}; refusing to run an engine, contact a "
            "server or read a variable because a bundle says so",
            hint="give --model YOUR_MODEL_YAML, or pass --engine-from-bundle to run it",
        )
    err.print(f"{command}: running the bundle's {escape(described)}")


def check(
    bundle: Annotated[Path, BUNDLE_ARG],
    contract: Annotated[
        str | None,
        typer.Option(
            "--contract",
            help="Hold the engine to this contract (default: the audit's).",
            metavar="NAME",
        ),
    ] = None,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="Write the JSON report here ('-' for stdout).", metavar="PATH"),
    ] = None,
    summary: Annotated[
        bool, typer.Option("--summary", help="Print only the verdict table and root causes.")
    ] = False,
) -> None:
    """Re-run the checks on a bundle's recorded traces (no engine, no torch).

    A trace recorded on a GPU box can be examined anywhere, against any
    contract.

    [bold]Examples[/]

      specseed check bug/
      specseed check bug/ --contract trtllm-pr17599

    Exit codes: 0 every invariant holds, 1 a violation, 2 not a readable bundle.
    """
    from specseed.bundle.format import read_bundle
    from specseed.bundle.replay import recheck
    from specseed.reporting.console import render_report
    from specseed.reporting.json_report import render_json

    console = SafeConsole(stderr=json_path is not None and str(json_path) == "-")
    with error_boundary():
        loaded = read_bundle(bundle)
        result = recheck(loaded, contract)
        exit_code = EXIT_VIOLATION if result.verdict == "fail" else EXIT_OK
        _notes(loaded.notes, console)
        render_report(result, console, exit_code, summary=summary, command="check")
        if json_path is not None:
            _write_text(json_path, render_json(result, exit_code))
    raise typer.Exit(exit_code)


def report(
    bundle: Annotated[Path, BUNDLE_ARG],
    fmt: Annotated[
        str,
        typer.Option("--format", "-f", help="markdown (an issue body) or json.", metavar="FORMAT"),
    ] = "markdown",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here (default: stdout).")
    ] = None,
    shrink: Annotated[
        bool | None,
        typer.Option(
            "--minimize/--no-minimize",
            help="Shrink the failing scenario first and store the smallest in the bundle "
            "(default: when the bundle has none yet, the scenario is small and its engine "
            "runs here).",
            show_default=False,
        ),
    ] = None,
    engine_from_bundle: Annotated[bool, ENGINE_FROM_BUNDLE] = False,
) -> None:
    """Write an issue body from a bundle (Markdown for GitHub, or JSON).

    Title, environment, expected versus observed, the minimal scenario, the
    first divergence with its token and RNG diffs, the suspects, the
    reproduce command.

    The minimal scenario is the one `specseed minimize` stored in the
    bundle; without one, a small failing scenario is minimized first (see
    `specseed minimize --help` for the cost; --no-minimize skips it).

    [bold]Examples[/]

      specseed report bug/ > issue.md
      gh issue create --title "$(specseed report bug/ -f json | jq -r .title)" \\
        --body-file issue.md
    """
    from specseed.bundle.format import read_bundle
    from specseed.bundle.replay import recheck
    from specseed.core.text import printable
    from specseed.reporting.issue import build_issue, render_issue_json, render_markdown

    with error_boundary():
        if fmt not in ("markdown", "json"):
            raise InputError(f"--format {fmt}: unknown format", hint="markdown or json")
        check_writable(output, "output")
        loaded = read_bundle(bundle)
        rechecked = None
        findings: list[Finding] = []
        for item in loaded.scenarios:
            recorded = item.findings
            if recorded is None:  # cut short before its checks ran: check what was recorded
                rechecked = rechecked or recheck(loaded)
                recorded = tuple(f for f in rechecked.findings if f.scenario == item.name)
            findings.extend(recorded)
        if shrink is not False and _minimize_for_report(
            loaded, findings, forced=bool(shrink), engine_from_bundle=engine_from_bundle
        ):
            loaded = read_bundle(bundle)  # with the minimal scenario it stored
        issue = build_issue(loaded, findings)
        # Bundle text in the body reaches a terminal or an issue: controls escaped (JSON
        # escapes its own).
        text = printable(render_markdown(issue)) if fmt == "markdown" else render_issue_json(issue)
        _write_text(output, text)


def _minimize_for_report(
    bundle: Bundle, findings: list[Finding], *, forced: bool, engine_from_bundle: bool
) -> bool:
    """Shrink the scenario the report leads with when that is worth it and possible here;
    True when a minimal scenario was stored."""
    from specseed.bundle.format import recorded_scenarios, write_minimal
    from specseed.bundle.minimize import minimize as run_minimize
    from specseed.bundle.minimize import small_enough, target_of
    from specseed.core.errors import SpecseedError
    from specseed.engine_adapters.registry import get_engine
    from specseed.reporting.causes import root_causes

    causes = root_causes(findings)
    if not causes:
        return False
    lead = causes[0].lead
    item = next((s for s in bundle.scenarios if s.name == lead.scenario), None)
    if item is None or item.minimal is not None:
        return False
    engine = bundle.config.engine.name
    if forced:
        _engine_consent(bundle, engine_from_bundle, "report --minimize")
    # On its own, report minimizes only on the self-contained reference engine: a bundle's
    # server, checkpoint or key variable is used only when the user asks for it.
    local = _self_contained(engine) or engine_from_bundle
    if not forced and (
        not local or not small_enough(item.scenario) or get_engine(engine).missing_packages()
    ):
        err.print(
            f"[dim]report: {item.name} not minimized (run specseed minimize "
            f"{bundle.root} to shrink it)[/]"
        )
        return False
    loaded = next(s for s in recorded_scenarios(bundle) if s.scenario.name == item.name)
    err.print(f"[dim]report: minimizing {item.name} on engine {engine}…[/]")
    try:
        result = run_minimize(bundle.config, item.scenario, bundle.root, target=target_of(lead))
    except SpecseedError as exc:
        if forced:
            raise
        err.print(f"[yellow]report: could not minimize {item.name}:[/] {escape(exc.message)}")
        return False
    write_minimal(bundle.root, item.name, result.yaml_text(loaded.source))
    err.print(f"[dim]report: stored {item.name}/minimal.yaml ({result.audits} audits)[/]")
    return True


def diff(
    a: Annotated[Path, typer.Argument(help="The first bundle.", metavar="A", show_default=False)],
    b: Annotated[Path, typer.Argument(help="The second bundle.", metavar="B", show_default=False)],
    show_all: Annotated[bool, typer.Option("--all", help="List equal requests too.")] = False,
) -> None:
    """Compare two bundles request by request; exit 1 when they differ.

    Two engine versions, two machines: each request is equal, diverged at
    token n, or missing; RNG states side by side where they differ.

    Exit codes: 0 the recordings agree, 1 they differ, 2 not a readable bundle.
    """
    from specseed.bundle.compare import compare_recordings
    from specseed.bundle.format import read_bundle
    from specseed.bundle.replay import recordings
    from specseed.reporting.recording_diff import render_recording_diff

    with error_boundary():
        left, right = read_bundle(a), read_bundle(b)
        for label, loaded in (("A", left), ("B", right)):
            _notes(tuple(f"{label}: {n}" for n in loaded.notes), out)
        result = compare_recordings(
            recordings(left), recordings(right), left_label=str(a), right_label=str(b)
        )
        render_recording_diff(result, out, show_all=show_all)
    raise typer.Exit(EXIT_VIOLATION if result.differs else EXIT_OK)


def replay(
    bundle: Annotated[Path, BUNDLE_ARG],
    model: Annotated[
        Path | None,
        typer.Option(
            "--model",
            help="Use this model.yaml's engine (its scenarios are ignored); default: the bundle's.",
            metavar="MODEL_YAML",
        ),
    ] = None,
    bundle_out: Annotated[
        Path | None,
        typer.Option("--bundle", help="Write the replay as a bundle too.", metavar="DIR"),
    ] = None,
    show_all: Annotated[bool, typer.Option("--all", help="List equal requests too.")] = False,
    engine_from_bundle: Annotated[bool, ENGINE_FROM_BUNDLE] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace an earlier bundle in --bundle DIR (says which)."),
    ] = False,
) -> None:
    """Run a bundle's scenarios on this engine; diff against the recording.

    A = the recording, B = the replay.

    Exit codes: 0 the replay reproduces the recording, 1 it differs,
    2 bad input, 3 the engine could not run.
    """
    from specseed.bundle.format import BundleWriter, read_bundle
    from specseed.bundle.replay import replay as run_replay
    from specseed.reporting.console import render_report
    from specseed.reporting.recording_diff import render_recording_diff

    with error_boundary(runs_engine=True):
        check_writable(bundle_out, "bundle", directory=True)
        check_bundle_folder(bundle_out, force=force)
        loaded = read_bundle(bundle)
        _notes(loaded.notes, out)
        if model is None:
            _engine_consent(loaded, engine_from_bundle, "replay")
        writer = reporter = None
        if bundle_out is not None:
            from specseed.bundle.format import recorded_scenarios
            from specseed.reporting.bundle_reporter import BundleReporter

            config = loaded.config
            writer = BundleWriter(bundle_out, force=force)
            scenarios = [(s, [r.name for r in s.scenario.runs]) for s in recorded_scenarios(loaded)]
            try:
                writer.start(config, scenarios, loaded.root, sys.argv[1:] or ["replay"])
            except OSError as exc:
                raise OutputError(
                    f"cannot write the bundle in {bundle_out}: {exc.filename or bundle_out}: "
                    f"{exc.strerror or exc}",
                    hint="free space or give another directory; nothing ran",
                ) from None
            if writer.removed:
                err.print(
                    f"--force: removed the earlier bundle in {escape(str(bundle_out))}: "
                    + escape(", ".join(writer.removed))
                )
            reporter = BundleReporter(writer)
        command = "specseed " + shlex.join(sys.argv[1:])
        result = run_replay(
            loaded,
            model,
            on_event=reporter.on_event if reporter is not None else None,
            trace_writer=writer.trace_writer if writer is not None else None,
            command=command,
        )
        exit_code = EXIT_VIOLATION if result.audit.verdict == "fail" else EXIT_OK
        unwritten = None
        if reporter is not None:
            try:
                reporter.finish(result.audit, exit_code)
            except OutputError as exc:  # the result is printed first, then exit 5
                unwritten = exc
        render_report(result.audit, out, exit_code, summary=True, command="replay")
        out.print()
        out.print("[bold]Replay against the recording[/] (A = recording, B = replay):")
        render_recording_diff(result.diff, out, show_all=show_all)
        if unwritten is not None:
            raise unwritten
    raise typer.Exit(EXIT_VIOLATION if result.diff.differs else EXIT_OK)


MINIMIZE_HELP = """Shrink a failing scenario to a minimal reproduction.

Tries smaller scenarios (shorter max_tokens, fewer runs and requests, less
prior traffic and warmup, no arrivals) and keeps each one on which the same
finding still fails: the same check, naming the same suspect defect. Writes
the smallest.

[bold]Cost[/]: one audit of one scenario per candidate, at most --max-audits
(default 60), on one engine loaded once, plus one audit to confirm the
failure. Measured on the built-in scenarios with the reference engine (CPU):
5 to 20 audits, 0.4 to 15 seconds. On a real engine each audit costs what
the candidate's runs cost; the candidates shrink as it goes.

[bold]Examples[/]

  specseed minimize bug/     # stores bug/<scenario>/minimal.yaml
  specseed minimize model.yaml -s uptime -o uptime.min.yaml
"""


def minimize(
    target: Annotated[
        Path,
        typer.Argument(
            help="A bundle directory, or a model.yaml.",
            metavar="BUNDLE|MODEL_YAML",
            show_default=False,
        ),
    ],
    scenario: Annotated[
        str | None,
        typer.Option(
            "--scenario",
            "-s",
            help="The scenario to shrink (default: the first failing).",
            metavar="NAME",
        ),
    ] = None,
    check_id: Annotated[
        str | None,
        typer.Option(
            "--check",
            help="Keep this check failing (default: the clearest failing finding).",
            metavar="ID",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the minimal scenario here (default: BUNDLE/<scenario>/minimal.yaml, "
            "or <scenario>.min.yaml for a model.yaml).",
        ),
    ] = None,
    max_audits: Annotated[
        int, typer.Option("--max-audits", min=1, help="Stop after this many audits.")
    ] = 60,
    engine_from_bundle: Annotated[bool, ENGINE_FROM_BUNDLE] = False,
) -> None:
    from specseed.bundle.format import read_bundle, recorded_scenarios, write_minimal
    from specseed.bundle.minimize import minimize as shrink
    from specseed.bundle.minimize import size_of, target_of
    from specseed.plan.planning import plan_audit
    from specseed.reporting.causes import root_causes
    from specseed.scenarios.loader import load_audit_config

    with error_boundary(runs_engine=True):
        check_writable(output, "minimal scenario")
        is_bundle = target.is_dir()
        wanted = None
        if is_bundle:
            loaded = read_bundle(target)
            _engine_consent(loaded, engine_from_bundle, "minimize")
            config, base_dir = loaded.config, loaded.root
            candidates = {s.scenario.name: s for s in recorded_scenarios(loaded)}
            failing = [
                f
                for s in loaded.scenarios
                for f in (s.findings or ())
                if f.status in ("fail", "error") and (check_id is None or f.check == check_id)
            ]
            if scenario is not None:
                failing = [f for f in failing if f.scenario == scenario]
            if failing:
                # The finding `specseed report` leads with: the clearest of the first cause.
                wanted = root_causes(failing)[0].lead
                scenario = wanted.scenario
        else:
            config = load_audit_config(target)
            base_dir = target.parent
            candidates = {
                p.scenario.name: p.loaded for p in plan_audit(config, base_dir, str(target))
            }
            if scenario is None and len(candidates) == 1:
                scenario = next(iter(candidates))
        if scenario is None and len(candidates) == 1:
            # A bundle of one scenario needs no --scenario either.
            scenario = next(iter(candidates))
        if scenario is None:
            raise InputError(
                "which scenario? pass --scenario NAME",
                hint=f"scenarios: {', '.join(candidates)}",
            )
        if scenario not in candidates:
            raise InputError(
                f"--scenario {scenario}: not in {target}",
                hint=f"scenarios: {', '.join(candidates)}",
            )
        chosen = candidates[scenario].scenario
        goal = target_of(wanted) if wanted is not None else None
        if goal is None and check_id is not None:
            from specseed.bundle.minimize import Target
            from specseed.checks import CHECKS

            if check_id not in CHECKS:
                raise InputError(f"--check {check_id}: unknown check", hint="see specseed checks")
            goal = Target(check_id, None, CHECKS[check_id].kind == "comparison")

        def step(audits: int, description: str, kept: bool) -> None:
            mark = "[green]kept[/]" if kept else "[dim]no[/]"
            err.print(f"[dim]audit {audits}:[/] {escape(description)}: {mark}")

        result = shrink(config, chosen, base_dir, target=goal, max_audits=max_audits, on_step=step)
        source = candidates[scenario].source
        text = result.yaml_text(source)
        if output is not None:
            _write_text(output, text)
        if is_bundle:
            written = write_minimal(target, scenario, text)
            err.print(f"wrote {written} (specseed report {target} uses it)")
        elif output is None:
            _write_text(Path(f"{scenario}.min.yaml"), text)
        stop = " (stopped on --max-audits)" if result.budget_spent else ""
        out.print(
            f"minimized {scenario}: {size_of(result.original).text()} -> "
            f"{size_of(result.minimal).text()} in {result.audits} audits{stop}; "
            f"{result.target.describe()} still fails"
        )
