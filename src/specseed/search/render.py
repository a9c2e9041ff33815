"""What ``specseed search`` shows a person: a header, progress while it searches (scenarios
judged, candidates, confirmed failures, shrinking), the coverage table and the verdict.

Everything goes to the notes console (stderr) at the terminal's width (80 columns read
well). On a terminal the progress is one status line that updates in place, with a line
printed above it for each candidate, confirmation and shrinking step; elsewhere (a pipe, a
CI log) those lines are printed as they come, and a line of totals every
:data:`PLAIN_EVERY` seconds.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.status import Status
from rich.table import Table
from rich.text import Text

from specseed.core.wording import plural
from specseed.search.coverage import Coverage

PLAIN_EVERY = 30.0
"""Seconds between lines of totals when the progress is not on a terminal."""


def clock(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` past an hour)."""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def duration(seconds: float) -> str:
    """A budget as a person writes it: ``90s``, ``5m``, ``1h30m``."""
    seconds = round(seconds)
    if seconds % 3600 == 0 and seconds >= 3600:
        return f"{seconds // 3600}h"
    if seconds >= 3600:
        return f"{seconds // 3600}h{(seconds % 3600) // 60}m"
    if seconds % 60 == 0 and seconds >= 60:
        return f"{seconds // 60}m"
    return f"{seconds}s"


@dataclass
class Totals:
    """The counts the progress line shows."""

    scenarios: int = 0
    runs: int = 0
    candidates: int = 0
    confirmed: int = 0
    refuted: int = 0
    shrinking: str | None = None
    """The check being shrunk, while one is."""

    def line(self, elapsed: float) -> str:
        text = (
            f"{clock(elapsed)}  {plural(self.scenarios, 'scenario')} "
            f"({plural(self.runs, 'run')})  candidates {self.candidates}  "
            f"confirmed {self.confirmed}"
        )
        if self.shrinking:
            text += f"  shrinking {self.shrinking}"
        return text


class SearchProgress:
    """The search's progress on ``console`` (None: silent)."""

    def __init__(self, console: Console | None, *, show: bool = True) -> None:
        self.console = console
        """Where the header and the progress go (None: nowhere)."""
        self.show = show and console is not None
        self.live = self.show and console is not None and console.is_terminal
        self.started = time.time()
        self.totals = Totals()
        self._status: Status | None = None
        self._last_plain = self.started

    def __enter__(self) -> SearchProgress:
        if self.live and self.console is not None:
            self._status = self.console.status(self.totals.line(0))
            self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)
            self._status = None

    def note(self, text: str, *, always: bool = False) -> None:
        """A line above the status (Rich markup); ``always``: even without progress."""
        if (self.show or always) and self.console is not None:
            self.console.print(text)

    def update(self) -> None:
        """The status line with the current totals (or, off a terminal, a line now and then)."""
        if not self.show:
            return
        elapsed = time.time() - self.started
        if self._status is not None:
            self._status.update(self.totals.line(elapsed))
        elif time.time() - self._last_plain >= PLAIN_EVERY:
            self._last_plain = time.time()
            self.note(self.totals.line(elapsed))


def coverage_table(coverage: Coverage, unexplored: Sequence[str] = ()) -> Table:
    """What the search explored along each dimension: bins, most frequent first, with the
    number of judged cases (or requests, or runs) in each."""
    table = Table(
        title="Coverage: what the search explored",
        title_justify="left",
        header_style="bold",
        box=None,
        padding=(0, 1),
        pad_edge=False,
    )
    table.add_column("dimension", overflow="fold", max_width=24)
    table.add_column("explored (count)", overflow="fold", ratio=1)
    for label, bins in coverage.rows():
        cell = Text()
        for i, (name, count) in enumerate(bins):
            if i:
                cell.append(" · ", style="dim")
            cell.append(name)
            cell.append(f" ({count})", style="dim")
        table.add_row(label, cell)
    if unexplored:
        table.add_row("not explored", Text(", ".join(unexplored) + " (no strategy)", style="dim"))
    return table


def failure_line(check: str, size: str, steps: int, found_after: float) -> str:
    """The line of a confirmed failure (Rich markup)."""
    return (
        f"[red]FAIL[/] {escape(check)}: found after {clock(found_after)}, shrunk in "
        f"{plural(steps, 'step')} to {escape(size)}"
    )


__all__ = [
    "SearchProgress",
    "Totals",
    "clock",
    "coverage_table",
    "duration",
    "failure_line",
]
