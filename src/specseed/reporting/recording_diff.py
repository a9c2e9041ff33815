"""Console rendering of a recording diff (``specseed diff`` and ``specseed replay``): one line
per request that differs, then the first divergences with their tokens and RNG states side by
side."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from specseed.bundle.compare import RecordingDiff, RequestComparison
from specseed.checks.findings import EventState
from specseed.core.seeds import fmt_seed
from specseed.reporting.layout import Fitted, Words, print_words

MAX_DETAILED = 3
"""Differing requests shown with tokens and RNG states; the others get their line only."""


def _result(item: RequestComparison, left: str, right: str) -> Text:
    if item.status == "equal":
        return Text("equal", style="green")
    if item.status == "missing":
        where = left if item.missing_from == "left" else right
        return Text(f"missing in {where}", style="bold red")
    if item.status == "rng-differs":
        return Text(f"same tokens, RNG differs at event {item.rng_index}", style="yellow")
    if item.status == "reports-differ":
        return Text(f"same tokens, {item.report}", style="yellow")
    return Text(f"diverged at token {item.position}", style="bold red")


def _tokens(tokens: tuple[int, ...], start: int, position: int | None) -> Text:
    text = Text("… " if start > 0 else "")
    for i, token in enumerate(tokens):
        if position is not None and start + i == position:
            text.append(f"[{token}]", style="bold reverse red")
        else:
            text.append(str(token))
        text.append(" ")
    return text


def _state_cells(event: EventState | None) -> list[str]:
    if event is None:
        return ["—", "", "", "", "", ""]
    return [
        event.label(),
        str(event.step),
        fmt_seed(event.seed),
        str(event.subsequence),
        str(event.offset),
        str(event.draws),
    ]


def render_detail(item: RequestComparison, left: str, right: str) -> Group:
    parts: list[RenderableType] = [
        Text.assemble(
            (f"{item.scenario}/{item.run}/{item.request}", "bold"),
            ": ",
            _result(item, left, right),
        )
    ]
    if item.left_tokens or item.right_tokens:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        grid.add_row("A", _tokens(item.left_tokens, item.window_start, item.position))
        grid.add_row("B", _tokens(item.right_tokens, item.window_start, item.position))
        parts.append(grid)
    if item.rng:
        table = Table(box=None, header_style="bold", pad_edge=False)
        for column in ("#", "side", "event", "step", "seed", "subseq", "offset", "draws"):
            table.add_column(column, justify="left" if column in ("side", "event") else "right")
        for n, (a, b) in enumerate(item.rng):
            differs = a is None or b is None or a != b
            table.add_row(str(item.rng_index + n), "A", *_state_cells(a))
            table.add_row("", "B", *_state_cells(b), style="red" if differs else "")
        parts.append(Text("RNG states side by side, from the first that differs:", style="dim"))
        parts.append(table)
    return Group(*parts)


def render_recording_diff(diff: RecordingDiff, console: Console, *, show_all: bool = False) -> None:
    counts = diff.counts()
    print_words(console, Text.assemble(("A", "bold"), f" = {diff.left}"), indent=4)
    print_words(console, Text.assemble(("B", "bold"), f" = {diff.right}"), indent=4)
    shown = [r for r in diff.requests if show_all or r.differs]
    if shown:
        table = Table(header_style="bold", title_justify="left", box=None, pad_edge=False)
        for column in ("scenario", "run", "request"):
            table.add_column(column, no_wrap=True)
        table.add_column("A vs B")
        for item in shown:
            table.add_row(item.scenario, item.run, item.request, _result(item, "A", "B"))
        # Names are never cut ("unseeded-neig…"): where they do not fit, a line per request.
        lines = [Text("scenario/run/request: A vs B", style="bold")] + [
            Words(Text.assemble(f"{r.scenario}/{r.run}/{r.request}: ", _result(r, "A", "B")), 4)
            for r in shown
        ]
        console.print(Fitted(table, Group(*lines)), soft_wrap=True)
    detailed = [r for r in diff.requests if r.status in ("diverged", "rng-differs")]
    for item in detailed[:MAX_DETAILED]:
        console.print()
        console.print(render_detail(item, "A", "B"))
    if len(detailed) > MAX_DETAILED:
        console.print(
            Text(f"… {len(detailed) - MAX_DETAILED} more differing requests above", style="dim")
        )
    runs = len({(r.scenario, r.run) for r in diff.requests})
    verdict = "[bold red]DIFFER[/]" if diff.differs else "[bold green]SAME[/]"
    console.print(
        f"{verdict}: {runs} runs, {len(diff.requests)} requests: {counts['equal']} equal, "
        f"{counts['diverged']} diverged, {counts['rng-differs']} same tokens with other RNG "
        f"states, {counts['reports-differ']} same tokens with other reports, "
        f"{counts['missing']} missing"
    )
