"""Commands that read bundles: ``check``, ``report``, ``diff`` (``replay`` and ``minimize``,
which run an engine, are ``cli/replay.py`` and ``cli/minimize.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from specseed.cli.error_boundary import EXIT_OK, EXIT_VIOLATION, error_boundary
from specseed.core.errors import InputError, OutputError
from specseed.core.secrets import SafeConsole
from specseed.workflows.exit_codes import decide
from specseed.workflows.outputs import (
    check_output_paths,
    check_writable,
    flush_terminal,
    write_stdout,
)

if TYPE_CHECKING:  # commands import their modules when they run
    from specseed.bundle.format import Bundle
    from specseed.checks.findings import Finding
    from specseed.run.results import AuditResult

out = SafeConsole()
err = SafeConsole(stderr=True)

BUNDLE_ARG = typer.Argument(
    help="A bundle directory (written by `specseed audit --bundle DIR`).",
    metavar="BUNDLE",
    show_default=False,
)


def _notes(notes: tuple[str, ...], console: Console) -> None:
    for note in notes:
        console.print(f"[yellow]bundle:[/] {escape(note)}")


def _write_text(path: Path | None, text: str) -> None:
    if path is None or str(path) == "-":
        write_stdout(text, "output")  # OutputError (exit 5) when stdout cannot take it
        return
    from specseed.core.files import write_output

    write_output(path, text, "output")  # OutputError (exit 5) when it cannot be written
    err.print(f"wrote {escape(str(path))}")


def engine_from_bundle_option(your_own: str = "") -> Any:
    """``--engine-from-bundle``; ``your_own`` says how this command runs your own engine,
    in this command's options (only replay has ``--model``)."""
    return typer.Option(
        "--engine-from-bundle",
        help="Run the engine the bundle's model.yaml names (its base_url, API key variable, "
        "checkpoints), printed first. Without it only the built-in reference engine runs from "
        f"a bundle{your_own}.",
    )


ENGINE_FROM_BUNDLE = engine_from_bundle_option()


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
    engine_from_bundle: Annotated[
        bool,
        typer.Option(
            "--engine-from-bundle",
            help="Let the distribution check load the checkpoint the bundle's traces name "
            "(printed first) where the bundle stored no evidence.",
        ),
    ] = False,
) -> None:
    """Re-run the checks on a bundle's recorded traces (no engine, no torch).

    A trace recorded on a GPU box can be examined anywhere, against any
    contract.

    [bold]Examples[/]

      specseed check bug/
      specseed check bug/ --contract trtllm-pr17599

    The findings the bundle recorded decide nothing (a difference is said);
    a bundle whose traces contradict their place is refused.

    Exit codes, as the audit's: 0 every invariant holds, 1 a violation, 2
    not a readable bundle, 4 nothing checked (every finding is skip), 5 the
    audit stopped before scenarios finished (no signal) or the bundle lacks
    their traces, 130/143/129 the audit was interrupted by
    SIGINT/SIGTERM/SIGHUP (the manifest's signal): an unfinished bundle is
    never 0.
    """
    from specseed.bundle.format import read_bundle
    from specseed.bundle.recheck import disagreements, recheck
    from specseed.reporting.console import render_report
    from specseed.reporting.json_report import render_json

    console = SafeConsole(stderr=json_path is not None and str(json_path) == "-")
    with error_boundary():
        if json_path is not None and str(json_path) != "-":
            check_writable(json_path, "JSON report")
            check_output_paths([("--json", json_path)], (bundle,))
        loaded = read_bundle(bundle)
        _say_checkpoints(loaded, engine_from_bundle)
        result = recheck(loaded, contract, load_checkpoints=engine_from_bundle)
        exit_code = _check_code(result)
        if loaded.unjudged:  # unfinished is never a pass: said first
            console.print(f"[bold yellow]NOT JUDGED[/]: {escape(loaded.unjudged)}")
        for line in disagreements(loaded, result):
            console.print(f"[bold yellow]bundle:[/] {escape(line)}")
        _notes(loaded.notes, console)
        unwritten: OutputError | None = None
        if json_path is not None:  # the file before the terminal: a full stdout loses no file
            try:
                _write_text(json_path, render_json(result, exit_code))
            except OutputError as exc:  # the report is still printed, then exit 5
                unwritten = exc
        exit_code = flush_terminal(
            lambda: render_report(result, console, exit_code, summary=summary, command="check"),
            exit_code,
        )
        if unwritten is not None:
            raise unwritten
    raise typer.Exit(exit_code)


def _say_checkpoints(loaded: Bundle, allowed: bool) -> None:
    """With ``--engine-from-bundle``: the checkpoints the traces name, said before any loads."""
    if not allowed:
        return
    named = sorted(
        {
            str(t.header.engine_config.checkpoint)
            for s in loaded.scenarios
            for t in s.traces.values()
            if t.header.engine_config.checkpoint is not None
        }
    )
    for path in named:
        err.print(f"--engine-from-bundle: the distribution check may load {escape(path)}")


def _check_code(result: AuditResult) -> int:
    """``check``'s exit code, in the audit's order (``exit_codes.decide``): the signal the
    manifest names (130/143), then a violation (1), then unfinished scenarios of a bundle
    stopped without a signal or lacking traces (5), then nothing checked (4); else 0."""
    from specseed.plan.scope import checked_nothing

    return decide(
        interrupted=result.interrupted,
        violation=result.verdict == "fail",
        incomplete=bool(result.missing_evidence),
        checked_nothing=checked_nothing(result.findings),
    )


def report(
    bundle: Annotated[Path, BUNDLE_ARG],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="markdown (an issue body), json, or html (one self-contained page with "
            "figures; the bundle's report.html).",
            metavar="FORMAT",
        ),
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
    """Write an issue body from a bundle (Markdown for GitHub, JSON, or HTML).

    Title, environment, expected versus observed, the minimal scenario, the
    first divergence with its token and RNG diffs, the suspects, the
    reproduce command. -f html writes the page every bundle holds as
    report.html again (figures need matplotlib: pip install
    'specseed\\[report]').

    The minimal scenario is the one `specseed minimize` stored in the
    bundle; without one, a small failing scenario is minimized first (see
    `specseed minimize --help` for the cost; --no-minimize skips it).

    [bold]Examples[/]

      specseed report bug/ > issue.md
      specseed report bug/ -f html -o report.html
      gh issue create --title "$(specseed report bug/ -f json | jq -r .title)" \\
        --body-file issue.md
    """
    from specseed.bundle.format import read_bundle
    from specseed.bundle.recheck import disagreements, recheck
    from specseed.reporting.issue import build_issue, render_issue_json, render_markdown
    from specseed.workflows.minimize import minimize_for_report

    with error_boundary():
        if fmt not in ("markdown", "json", "html"):
            raise InputError(f"--format {fmt}: unknown format", hint="markdown, json or html")
        check_writable(output, "output")
        if output is not None and str(output) != "-":
            check_output_paths([("--output", output)], (bundle,))
        loaded = read_bundle(bundle)
        _say_checkpoints(loaded, engine_from_bundle)
        # Judged again from the traces: findings.json is the bundle's word, not evidence.
        rechecked = recheck(loaded, load_checkpoints=engine_from_bundle)
        for line in disagreements(loaded, rechecked):
            err.print(f"[bold yellow]bundle:[/] {escape(line)}")
        findings = rechecked.findings
        if shrink is not False:
            loaded = minimize_for_report(
                loaded,
                findings,
                forced=bool(shrink),
                engine_from_bundle=engine_from_bundle,
                say=err.print,
            )
        if fmt == "html":
            _write_text(output, _html_page(loaded, findings))
            return
        issue = build_issue(loaded, findings)
        # The body escapes every bundle field for Markdown (controls and bidi too).
        text = render_markdown(issue) if fmt == "markdown" else render_issue_json(issue)
        _write_text(output, text)


def _html_page(loaded: Bundle, findings: list[Finding]) -> str:
    """The bundle's HTML report (``reporting.html``) from its recorded findings and traces."""
    from specseed.reporting.html import render_html

    by_scenario: dict[str, list[Finding]] = {item.name: [] for item in loaded.scenarios}
    for finding in findings:
        by_scenario.setdefault(finding.scenario, []).append(finding)
    result = loaded.as_result(by_scenario)
    recorded = loaded.manifest.exit_code
    code = recorded if recorded is not None else _check_code(result)
    notes = (*loaded.notes, *((loaded.unjudged,) if loaded.unjudged else ()))
    return render_html(result, code, notes=notes, source=f"bundle {loaded.root}")


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
    from specseed.bundle.recheck import recordings
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
