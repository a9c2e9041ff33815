"""The Rich terminal report: verdict table, suspects, diffs, offset tables, progress.

Reporters render; they never decide a verdict (``AuditResult.verdict`` does).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from specseed.checks import CHECKS, PLUGIN_PROBLEMS
from specseed.checks.findings import (
    ATTRIBUTION_TEXT,
    EventState,
    Finding,
    OffsetRow,
    StreamSide,
    TokenDiff,
)
from specseed.core.seeds import fmt_request_seed, fmt_seed
from specseed.core.wording import plural
from specseed.plan.scope import checked_nothing
from specseed.reporting.base import Reporter
from specseed.reporting.causes import RootCause, root_causes
from specseed.reporting.layout import Fitted, Words, print_message, print_words
from specseed.run.matrix import MatrixResult
from specseed.run.results import (
    AuditEvent,
    AuditFinished,
    AuditInterruptedEvent,
    AuditResult,
    AuditSkipped,
    AuditStarted,
    OutputFailed,
    RunFinished,
    RunStarted,
    ScenarioChecked,
)

STATUS_STYLE = {
    "pass": ("ok", "green"),
    "fail": ("FAIL", "bold red"),
    "known-limitation": ("known", "yellow"),
    "error": ("error", "bold magenta"),
    "skip": ("skip", "dim"),
}
_SEVERITY = {"fail": 4, "error": 3, "known-limitation": 2, "pass": 1, "skip": 0}
MAX_OFFSET_ROWS = 12
MAX_OFFSET_TABLES = 2
MAX_OFFSET_TABLES_NAMED = 8
"""Requests named in the line about the RNG state tables left to --json (the rest counted)."""
MAX_DIFFS_SHOWN = 1
"""Diffs of a finding shown in full; the others get one line each."""
SHORT_RUN_NAME = 12
"""Run names longer than this are shown as A and B in RNG state tables."""


def _status_text(status: str) -> Text:
    label, style = STATUS_STYLE[status]
    return Text(label, style=style)


def worst(statuses: Sequence[str]) -> str:
    return max(statuses, key=lambda s: _SEVERITY[s])


# -- progress -----------------------------------------------------------------------------


class AuditProgress:
    """Shows a progress bar over runs on stderr while the engine works."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task: TaskID | None = None

    def __enter__(self) -> AuditProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def __call__(self, event: AuditEvent) -> None:
        if isinstance(event, AuditStarted):
            self.task = self.progress.add_task(f"auditing {event.engine}", total=event.runs)
        elif isinstance(event, RunStarted) and self.task is not None:
            self.progress.update(self.task, description=f"{event.scenario}/{event.run}")
        elif isinstance(event, RunFinished) and self.task is not None:
            self.progress.advance(self.task)
        elif isinstance(event, ScenarioChecked):
            failed = [f for f in event.result.findings if f.status in ("fail", "error")]
            mark = "[red]✗[/]" if failed else "[green]✓[/]"
            self.console.print(
                f"{mark} {escape(event.result.scenario.name)} "
                f"[dim]({plural(len(event.result.traces), 'run')}, {event.result.seconds:.1f}s)[/]"
            )


# -- the report ---------------------------------------------------------------------------


def _ordered_checks() -> list[str]:
    """Run checks first, then comparisons, each in registration order."""
    return [c for c in CHECKS if CHECKS[c].kind == "run"] + [
        c for c in CHECKS if CHECKS[c].kind != "run"
    ]


_STATUS_ORDER = ("fail", "error", "known-limitation", "skip", "pass")


def _checks_cell(statuses: dict[str, str]) -> Text:
    """``FAIL: batch · ok: runs, rng``: the checks of one row grouped by status, worst first.

    Words, not columns: eleven check columns do not fit 80 columns, and a cell that wraps
    keeps every name whole where a column would cut it to ``ba…``.
    """
    text = Text()
    for status in _STATUS_ORDER:
        names = [CHECKS[c].short for c in _ordered_checks() if statuses.get(c) == status]
        if not names:
            continue
        if text:
            text.append(" · ", style="dim")
        label, style = STATUS_STYLE[status]
        text.append(f"{label}: ", style=style)
        text.append(", ".join(names))
    return text if text else Text("no checks", style="dim")


VERDICT_TITLE = "Verdict: scenario by check"


def verdict_table(result: AuditResult) -> Table:
    """One row per scenario: its worst status, then its checks grouped by status (reads at
    80 columns: the checks cell wraps). Its title, :data:`VERDICT_TITLE`, goes above it."""
    cells: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for scenario in result.scenarios:
        for finding in scenario.findings:
            cells[scenario.scenario.name][finding.check].append(finding.status)
    table = Table(
        header_style="bold",
        box=None,
        padding=(0, 1),
        pad_edge=False,
    )
    # A name is never folded: the checks cell gives way (a name wider than the terminal
    # leaves the table for lines, :class:`Fitted`).
    table.add_column("scenario", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("checks", overflow="fold", ratio=1)
    for scenario in result.scenarios:
        name = scenario.scenario.name
        per_check = {cid: worst(statuses) for cid, statuses in cells[name].items()}
        overall = worst(list(per_check.values())) if per_check else "skip"
        table.add_row(name, _status_text(overall), _checks_cell(per_check))
    return table


def _legend(result: AuditResult) -> Text | None:
    used = {f.check for f in result.findings}
    parts = [f"{CHECKS[c].short}={c}" for c in _ordered_checks() if c in used]
    return Text("checks: " + ", ".join(parts), style="dim") if parts else None


def _tokens_line(side: StreamSide, start: int, position: int) -> Text:
    text = Text("… " if start > 0 else "  ")
    for i, token in enumerate(side.tokens):
        index = start + i
        if index == position:
            text.append(f"[{token}]", style="bold reverse red")
        else:
            text.append(str(token), style="dim" if index > position else "")
        text.append(" ")
    if start + len(side.tokens) <= position:
        text.append("<end>", style="bold red")
    return text


def _event_of(side: StreamSide, key: tuple[str, int]) -> EventState | None:
    return next((e for e in side.events if (e.kind, e.index) == key), None)


def _describe_state(event: EventState | None) -> str:
    if event is None:
        return "no event"
    return (
        f"seed {fmt_seed(event.seed)} subseq {event.subsequence} offset {event.offset} "
        f"(step {event.step}, kernel row {event.kernel_row})"
    )


def render_diff(diff: TokenDiff) -> Group:
    right_name = diff.right_request or diff.request
    tokens = Table.grid(padding=(0, 2))
    tokens.add_column(style="bold")
    tokens.add_column()
    left_label = f"{diff.left.run}" + (f" ({diff.request})" if diff.right_request else "")
    right_label = f"{diff.right.run}" + (f" ({right_name})" if diff.right_request else "")
    tokens.add_row(left_label, _tokens_line(diff.left, diff.window_start, diff.position))
    tokens.add_row(right_label, _tokens_line(diff.right, diff.window_start, diff.position))
    header = Text.assemble(
        (f"{diff.request}", "bold"),
        f" first diverges at token {diff.position}: ",
        (ATTRIBUTION_TEXT[diff.attribution], "bold yellow"),
    )
    keys = diff.event_keys()
    parts: list[RenderableType] = [header, tokens]
    if keys:
        # padding 1 and "row" for "kernel row": with two hex seeds and a run name the table
        # must still fit 80 columns; long run names become A and B.
        short = max(len(diff.left.run), len(diff.right.run)) <= SHORT_RUN_NAME
        names = (diff.left.run, diff.right.run) if short else ("A", "B")
        states = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 1))
        for column in ("event", "run", "seed", "subseq", "offset", "draws", "row", "iter"):
            states.add_column(
                column,
                justify="left" if column in ("event", "run") else "right",
                no_wrap=column != "run",
                overflow="fold",
            )
        for key in keys:
            left, right = _event_of(diff.left, key), _event_of(diff.right, key)
            differs = left is None or right is None or left.triple() != right.triple()
            label = key[0] if key[0] == "accept" else f"{key[0]}[{key[1]}]"
            for n, event in enumerate((left, right)):
                style = "red" if differs and n == 1 else ""
                if event is None:
                    states.add_row(label if n == 0 else "", names[n], "—", style=style)
                    continue
                states.add_row(
                    label if n == 0 else "",
                    names[n],
                    fmt_request_seed(event.seed),
                    str(event.subsequence),
                    str(event.offset),
                    str(event.draws),
                    str(event.kernel_row),
                    str(event.decoding_iter),
                    style=style,
                )
        tag_a, tag_b = ("", "") if short else ("A = ", "B = ")
        parts.append(
            Text(
                f"RNG state behind it ({tag_a}{diff.left.run}: step {diff.left.step}, row "
                f"{diff.left.row}; {tag_b}{diff.right.run}: step {diff.right.step}, row "
                f"{diff.right.row}):",
                style="dim",
            )
        )
        parts.append(states)
    first = diff.first_state_difference
    event = None if first is None else (first[0] or first[1])
    if first is not None and event is not None and event.step != diff.left.step:
        # Only worth a line when it is earlier than the token's own events (shown above).
        a, b = first
        parts.append(
            Text(
                f"earliest RNG difference for {diff.request}: {event.label()} at iteration "
                f"{event.decoding_iter}: {_describe_state(a)} in {diff.left.run}, "
                f"{_describe_state(b)} in "
                f"{diff.right.run}",
                style="yellow",
            )
        )
    fingerprints = Text(
        f"target logits fingerprint: {diff.left.logits_fingerprint or '—'} vs "
        f"{diff.right.logits_fingerprint or '—'}",
        style="red" if diff.left.logits_fingerprint != diff.right.logits_fingerprint else "dim",
    )
    parts.append(fingerprints)
    return Group(*parts)


def _cell(row: OffsetRow, value: object, field: str) -> Text:
    return Text(str(value), style="bold red" if field in row.mismatch else "")


def _expected_cell(row: OffsetRow) -> Text:
    """What the contract expected, only where the engine did something else."""
    expected = {
        "seed": fmt_request_seed(row.expected_seed),
        "subsequence": str(row.expected_subsequence),
        "offset": "—" if row.expected_offset is None else str(row.expected_offset),
    }
    wrong = [f"{field} {expected[field]}" for field in expected if field in row.mismatch]
    return Text(", ".join(wrong), style="yellow") if wrong else Text("as expected", style="dim")


def render_offsets(rows: Sequence[OffsetRow]) -> Group:
    """Per request, the observed RNG state of each event and what the contract expected.

    Observed values are columns; expected values appear only where they differ (one column,
    not a second copy of seed, subsequence and offset), so that two 18-digit hex seeds never
    have to share 80 columns.
    """
    by_request: dict[str, list[OffsetRow]] = defaultdict(list)
    for row in rows:
        by_request[row.request].append(row)
    parts: list[RenderableType] = []
    shown_requests = list(by_request)[:MAX_OFFSET_TABLES]
    for request in shown_requests:
        table_rows = by_request[request]
        first_bad = next((i for i, r in enumerate(table_rows) if r.mismatch), 0)
        start = max(0, first_bad - 2)
        shown = table_rows[start : start + MAX_OFFSET_ROWS]
        table = Table(
            title=f"{request}: RNG state per event vs the contract",
            title_justify="left",
            header_style="bold",
            box=None,
            padding=(0, 1),
        )
        for column in ("step", "iter", "event", "seed", "subseq", "offset", "draws"):
            table.add_column(column, justify="left" if column == "event" else "right", no_wrap=True)
        table.add_column("contract", overflow="fold", ratio=1)
        for r in shown:
            table.add_row(
                str(r.step),
                str(r.decoding_iter),
                r.event,
                _cell(r, fmt_request_seed(r.seed), "seed"),
                _cell(r, r.subsequence, "subsequence"),
                _cell(r, r.offset, "offset"),
                str(r.draws),
                _expected_cell(r),
            )
        parts.append(table)
        hidden = len(table_rows) - len(shown)
        if hidden > 0:
            parts.append(
                Text(f"  … {plural(hidden, 'more event')} (all rows are in --json)", style="dim")
            )
    others = list(by_request)[MAX_OFFSET_TABLES:]
    if others:
        named = ", ".join(others[:MAX_OFFSET_TABLES_NAMED])
        rest = len(others) - MAX_OFFSET_TABLES_NAMED
        more = f" and {plural(rest, 'more request')}" if rest > 0 else ""
        parts.append(Text(f"… tables for {named}{more} are in --json", style="dim"))
    return Group(*parts)


class _TitleRule:
    """A rule with the title in it when the title fits; otherwise the title wraps above a
    plain rule (Rich's Rule cuts a long title with an ellipsis)."""

    def __init__(self, title: str, style: str) -> None:
        self.title = title
        self.style = style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        text = Text.from_markup(self.title)
        if text.cell_len + 6 <= options.max_width:
            yield Rule(text, align="left", style=self.style)
        else:
            yield text
            yield Rule(style=self.style)


def render_finding(finding: Finding) -> Group:
    """One failing finding: a rule with its title, then the evidence, unboxed so that it can
    be pasted into an issue as it is."""
    style = "red" if finding.status == "fail" else "magenta"
    title = f"[bold]{finding.status.upper()}[/] {finding.check} · {escape(finding.scenario)}"
    if finding.runs:
        title += f" · {escape(', '.join(finding.runs))}"
    parts: list[RenderableType] = [_TitleRule(title, style), Text(finding.message)]
    if finding.suspects:
        suspects = Table.grid(padding=(0, 1))
        suspects.add_column(style="bold red")
        suspects.add_column()
        for suspect in finding.suspects:
            suspects.add_row(suspect.defect, suspect.why)
        parts += [Text("suspects:", style="bold"), suspects]
    # A stack trace stays in --json and the bundle: the terminal names its site through the
    # root cause (the innermost frame in the engine's code).
    shown = [line for line in finding.details if not line.startswith("Traceback (most recent")]
    # Detail lines indented, their continuation lines further in: each reads as one item.
    for line in shown[:8]:
        parts.append(Words(Text(line, style="dim"), indent=2, margin=2))
    for diff in finding.diffs[:MAX_DIFFS_SHOWN]:
        parts.append(Text(""))
        parts.append(render_diff(diff))
    for diff in finding.diffs[MAX_DIFFS_SHOWN:]:
        parts.append(Words(Text(_diff_line(diff), style="dim"), indent=2, margin=2))
    if finding.offsets:
        parts.append(Text(""))
        parts.append(render_offsets(finding.offsets))
    parts.append(Text(""))
    return Group(*parts)


def _diff_line(diff: TokenDiff) -> str:
    right = f" ({diff.right_request})" if diff.right_request else ""
    return (
        f"{diff.request} first diverges at token {diff.position} ({diff.left.run} vs "
        f"{diff.right.run}{right}): {ATTRIBUTION_TEXT[diff.attribution]}"
    )


def findings_grid(findings: Sequence[Finding]) -> Table:
    """Failing findings one line each: status and check, then scenario and message."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for finding in findings:
        style = "bold red" if finding.status == "fail" else "bold magenta"
        grid.add_row(
            Text.assemble("  ", (finding.status.upper(), style), " ", (finding.check, "bold")),
            f"{finding.scenario}: {finding.message}",
        )
    return grid


def render_root_causes(causes: Sequence[RootCause]) -> Group:
    """One line per root cause, with what it affects, and the evidence of its suspect: beside
    its label where the labels fit; else under it, indented (a label names a value or a
    crash's file:line, which no column may cut)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold red", no_wrap=True)
    grid.add_column()
    # A cause that is a sentence (a server that stopped, a bug in specseed) reads whole on
    # a line of its own, first; the defect names share the grid.
    sentences: list[RenderableType] = []
    stacked: list[RenderableType] = []
    for cause in causes:
        scenarios, requests, n = len(cause.scenarios), len(cause.requests), len(cause.findings)
        what = Text.assemble(
            f"{plural(n, 'failing finding')}, {plural(scenarios, 'scenario')}, "
            f"{plural(requests, 'request')} ({', '.join(cause.checks)})\n",
            (cause.why, "dim"),
        )
        if cause.kind in ("server", "specseed-bug"):
            sentences.append(Words(Text(cause.label, style="bold red")))
            sentences.append(Words(what, margin=2))
            continue
        grid.add_row(cause.label, what)
        stacked += [Words(Text(cause.label, style="bold red"), indent=2), Words(what, margin=4)]
    title = Text(f"Root causes ({len(causes)}), by suspect defect:", style="bold")
    if not stacked:
        return Group(title, *sentences)
    return Group(title, *sentences, Fitted(grid, Group(*stacked)))


def _option_defaults(engine: str) -> dict[str, object]:
    """The engine's option defaults (options equal to them are not worth a header mention)."""
    from specseed.engine_adapters.registry import get_engine

    try:
        model = get_engine(engine).options_model()
        return model().model_dump(mode="json") if model is not None else {}
    except Exception:  # an options model with required fields, or an unknown plugin
        return {}


def option_text(value: object, *, top: bool = False) -> str:
    """An engine option as the report's header names it: a list as its items (at the top,
    ``defects: a, b``), a mapping as ``{key: value}`` in YAML's flow style, never a Python
    repr (``{'when': ...}``)."""
    if isinstance(value, dict):
        pairs = (f"{k}: {option_text(v)}" for k, v in value.items() if v is not None)
        return "{" + ", ".join(pairs) + "}"
    if isinstance(value, (list, tuple)):
        items = ", ".join(option_text(v) for v in value)
        return items if top else f"[{items}]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render_report(
    result: AuditResult,
    console: Console,
    exit_code: int,
    *,
    summary: bool = False,
    command: str = "audit",
) -> None:
    """Print the whole report (``summary``: the verdict table and root causes only, and a
    count of the skips). ``command``: the specseed command the header names."""
    engine = result.config.engine
    defaults = _option_defaults(engine.name)
    options = "".join(
        f", {key}: {option_text(value, top=True)}"
        for key, value in engine.options.items()
        if value not in (None, [], "") and defaults.get(key, object()) != value
    )
    header = Text.from_markup(
        f"[bold]specseed {command}[/]: engine [bold]{escape(engine.name)}[/] on "
        f"{engine.device}, contract [bold]{escape(result.contract)}[/]{escape(options)}, "
        f"max_draft_len {engine.max_draft_len}, {plural(len(result.scenarios), 'scenario')}, "
        f"{plural(sum(len(s.traces) for s in result.scenarios), 'run')} in {result.seconds:.1f}s"
        + (f" on {result.workers} workers" if result.workers > 1 else "")
    )
    print_words(console, header)  # a URL among the options is never split
    if result.scenarios:  # an audit interrupted before any scenario finished has no table
        # The title on its own line: as the table's, it wrapped at a narrow table's width.
        console.print(Text(VERDICT_TITLE, style="italic"))
        console.print(Fitted(verdict_table(result)), soft_wrap=True)
        legend = _legend(result)
        if legend is not None:
            console.print(legend)
    failing = [f for f in result.findings if f.status in ("fail", "error")]
    causes = root_causes(failing)
    if causes:
        console.print(render_root_causes(causes), soft_wrap=True)
        console.print()
    for cause in causes if not summary else ():
        console.print(render_finding(cause.lead))
        others = [f for f in cause.findings if f is not cause.lead]
        if others:
            console.print(Text(f"Also pointing at {cause.label}:", style="bold"))
            console.print(findings_grid(others))
            console.print()
    if any(len(c.findings) > 1 or c.lead.diffs[1:] for c in causes):
        console.print(
            Text("Every finding, with all its diffs and offsets, is in --json.", style="dim")
        )
    limitations = [f for f in result.findings if f.status == "known-limitation"]
    if limitations:
        console.print(
            Text(
                "Known limitations (stated by the engine's authors, not violations):",
                style="bold yellow",
            )
        )
        seen: set[tuple[str, str | None]] = set()
        for finding in limitations:
            key = (finding.check, finding.limitation)
            if key in seen:
                continue
            seen.add(key)
            console.print(
                f"  [yellow]{finding.check}[/]: {escape(finding.limitation or finding.message)}"
            )
    _print_skips(result, console, summary=summary)
    counts: dict[str, int] = defaultdict(int)
    for finding in result.findings:
        counts[finding.status] += 1
    tally = ", ".join(f"{counts[s]} {s}" for s in STATUS_STYLE if counts[s])
    verdict = "[bold red]FAIL[/]" if result.verdict == "fail" else "[bold green]PASS[/]"
    if checked_nothing(result.findings):
        verdict = "[bold yellow]NOTHING CHECKED[/]"
    elif result.verdict != "fail" and (
        result.unfinished or (command != "audit" and result.missing_evidence)
    ):
        # Judged again from a bundle that lost evidence (a trace missing): what passed is
        # not all. Traces an audit could not write (a full disk) were judged in memory
        # before: its verdict stands.
        verdict = "[bold yellow]INCOMPLETE[/]"
    if result.interrupted:  # a verdict on part of the audit must not read as the whole
        # A bundle's result holds its unfinished scenarios too (their partial findings).
        finished = [s for s in result.scenarios if s.scenario.name not in result.unfinished]
        done = f"finished scenarios {verdict}" if finished else "no scenario finished"
        verdict = f"[bold yellow]INTERRUPTED[/] ({result.interrupted}), {done}"
    # The last line names what the root causes name, not every finding's candidate suspects
    # (those include defects the attribution ruled out).
    named = [d for c in causes for d in c.defects]
    tail = f"; suspects: {', '.join(dict.fromkeys(named))}" if named else ""
    said = f": {tally}{tail}" if tally or tail else ""
    print_words(console, Text.from_markup(f"{verdict}{said} (exit {exit_code})"))


MAX_SKIP_LINES = 8


def _skip_reason(finding: Finding) -> str:
    """A skip's reason without the run name it starts with (so equal reasons group)."""
    for run in finding.runs:
        if finding.message.startswith(f"{run}: "):
            return finding.message[len(run) + 2 :]
    prefix = f"{finding.check}: "
    return finding.message[len(prefix) :] if finding.message.startswith(prefix) else finding.message


def _print_skips(result: AuditResult, console: Console, *, summary: bool = False) -> None:
    """Why checks were skipped, one line per distinct reason: a skip is not a pass
    (``summary``: how many, in one line)."""
    reasons: dict[tuple[str, str], list[str]] = defaultdict(list)
    for finding in result.findings:
        if finding.status == "skip":
            scenarios = reasons[(finding.check, _skip_reason(finding))]
            if finding.scenario not in scenarios:
                scenarios.append(finding.scenario)
    if not reasons:
        return
    if summary:
        skips = sum(f.status == "skip" for f in result.findings)
        console.print(
            f"[bold]Skipped[/] (not judged, not passed): {plural(skips, 'finding')} for "
            f"{plural(len(reasons), 'reason')}; the list is in the full report and --json"
        )
        return
    console.print(Text("Skipped (not judged, not passed):", style="bold"))
    # Checks skipped for one reason in the same scenarios share a line ("not among the checks
    # asked for" is said once, not once per check).
    lines: dict[tuple[str, tuple[str, ...]], list[str]] = defaultdict(list)
    for (check, reason), scenarios in reasons.items():
        key = (reason, tuple(scenarios)) if reason else (f"\0{check}", tuple(scenarios))
        lines[key].append(check)
    # One item per row of a grid: a reason that wraps stays indented under its own line.
    items = Table.grid(padding=(0, 1), pad_edge=False)
    items.add_column(no_wrap=True)
    items.add_column(overflow="fold", ratio=1)
    for (reason, named), checks in list(lines.items())[:MAX_SKIP_LINES]:
        where = ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
        said = "" if reason.startswith("\0") else reason
        items.add_row(
            " -",
            Text.from_markup(f"[dim]{', '.join(checks)}[/] ({escape(where)}): {escape(said)}"),
        )
    console.print(items)
    if len(lines) > MAX_SKIP_LINES:
        console.print(f"  [dim]… {len(lines) - MAX_SKIP_LINES} more reasons in --json[/]")


def render_matrix(matrix: MatrixResult, console: Console) -> None:
    """The detection matrix: defect by check."""
    from specseed.core.defects import get_defect

    table = Table(
        title=f"Detection matrix (contract {matrix.contract}): each defect injected alone",
        title_justify="left",
        header_style="bold",
        box=None,
        padding=(0, 1),
        pad_edge=False,
    )
    # One row per defect with the checks that fail written out: a column per check (eleven)
    # does not fit 80 columns and Rich would cut the headers to "ro…".
    table.add_column("defect injected", overflow="fold")
    table.add_column("audit", no_wrap=True)
    table.add_column("checks that fail", overflow="fold", ratio=1)
    for row in matrix.rows:
        if row.defect is None:
            verdict = Text(
                "passes" if row.verdict == "pass" else "FAILS",
                style="green" if row.verdict == "pass" else "bold red",
            )
        elif row.caught:
            verdict = Text("caught", style="bold green")
        elif row.defect in matrix.stated():
            verdict = Text("stated limitation", style="yellow")
        else:
            verdict = Text("NOT CAUGHT", style="bold red")
        cell = Text()
        naming = [CHECKS[c].short for c in _ordered_checks() if c in row.naming_checks]
        other = [
            CHECKS[c].short
            for c in _ordered_checks()
            if c in row.failing_checks and c not in row.naming_checks
        ]
        if naming:
            cell.append("● " + ", ".join(naming), style="bold green")
        if other:
            cell.append("  " if naming else "")
            cell.append("○ " + ", ".join(other), style="yellow")
        table.add_row(row.defect or "(none)", verdict, cell if cell else Text("—", style="dim"))
    console.print(table)
    console.print(
        Text(
            "● fails and names the injected defect among its suspects   ○ fails, names other "
            "suspects   — every check holds",
            style="dim",
        )
    )
    failing = {c for row in matrix.rows for c in row.failing_checks}
    names = [f"{CHECKS[c].short}={c}" for c in _ordered_checks() if c in failing]
    if names:
        console.print(Text("checks: " + ", ".join(names), style="dim"))
    rows = [r for r in matrix.rows[1:] if r.defect is not None and r.defect not in matrix.stated()]
    extra = [r for r in rows if r.extra]
    wrong = [r for r in rows if r.wrong]
    console.print(
        f"precision: {sum(r.exact for r in rows)} of {len(rows)} defects yield exactly one root "
        f"cause, the injected one ({matrix.precision:.0%}); {len(extra)} with extra causes, "
        f"{len(wrong)} with a wrong cause"
    )
    for row in rows:
        if row.caught and not row.exact:
            console.print(
                f"[red]imprecise:[/] {escape(row.defect or '')} — root causes: "
                f"{escape('; '.join(row.causes) or '(none)')}"
            )
    for row in matrix.rows[1:]:
        if row.caught or row.defect is None:
            continue
        if row.defect in matrix.stated():
            console.print(
                f"[yellow]stated limitation:[/] {row.defect} — {matrix.contract} already lays "
                "its states out this way, so injecting it changes nothing the contract promises"
            )
            continue
        targeted = any(row.defect in spec.targets for spec in CHECKS.values())
        why = "" if targeted else " (no check targets this class yet)"
        console.print(f"[red]not caught:[/] {row.defect}{why} — {get_defect(row.defect).summary}")


def engine_log_note(path: Path) -> str:
    """The line that names the temporary file an engine's log went to."""
    try:
        with path.open("rb") as log:
            lines = sum(chunk.count(b"\n") for chunk in iter(lambda: log.read(1 << 20), b""))
    except OSError:
        return f"The engine's log is in {path}"
    return f"The engine's log ({plural(lines, 'line')}) is in {path}"


class ConsoleReporter(Reporter):
    """The Rich terminal report; with ``progress``, a progress bar on stderr while it runs;
    with ``summary``, only the verdict table and the root causes.

    The notes of an audit's end go to ``err`` after the report, when ``AuditFinished``
    arrives: the interruption, missing evidence, outputs that could not be written, and where
    the traces are."""

    def __init__(
        self, out: Console, err: Console, *, progress: bool, summary: bool = False
    ) -> None:
        self.out = out
        self.err = err
        self.summary = summary
        self.progress = AuditProgress(err) if progress else None
        self._interrupted: AuditInterruptedEvent | None = None
        self._failed: list[OutputFailed] = []

    def __enter__(self) -> ConsoleReporter:
        if self.progress is not None:
            self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.__exit__(*exc)

    def on_event(self, event: AuditEvent) -> None:
        if isinstance(event, AuditSkipped):
            self.err.print(event.reason)
        elif isinstance(event, AuditInterruptedEvent):
            if not event.reported:
                self.err.print(
                    f"Interrupted by {event.signal} before any scenario ran; nothing to report."
                )
            self._interrupted = event
        elif isinstance(event, OutputFailed):
            self._failed.append(event)
        elif isinstance(event, AuditFinished):
            if event.result is not None:
                self._print_notes(event.result, event.bundle)
            if event.engine_log is not None:
                print_message(self.err, engine_log_note(event.engine_log))
        elif self.progress is not None:
            self.progress(event)

    def _print_notes(self, result: AuditResult, bundle: Path | None) -> None:
        notes: list[str] = []
        if self._interrupted is not None:
            finished = self._interrupted.finished
            total = finished + len(self._interrupted.unfinished)
            notes.append(
                f"Interrupted by {self._interrupted.signal}: {finished} of {total} scenarios "
                f"finished and are reported; not finished: "
                f"{', '.join(self._interrupted.unfinished)}."
            )
        notes += [f"Missing evidence: {m}" for m in result.missing_evidence]
        notes += [f"Warning: {problem}" for problem in PLUGIN_PROBLEMS]
        notes += [f"Error: {failed.message}" for failed in self._failed]
        if bundle is not None and (result.interrupted or result.missing_evidence):
            notes.append(
                f"Traces are in {bundle}/<scenario>/<run>.jsonl; a run cut short ends with an "
                "Interrupted failure or reads as truncated."
            )
        for note in notes:
            try:
                print_message(self.err, note)
            except OSError:
                break

    def finish(self, result: AuditResult, exit_code: int) -> None:
        render_report(result, self.out, exit_code, summary=self.summary)
