"""Text laid out for a terminal of any width without losing a value: lines broken at spaces
only, and tables that fall back to lines where a column would split or cut a word.

Rich folds a word longer than the space it has ("site-pac" / "kages/torch") and a column that
may not wrap cuts its cell with an ellipsis ("step 1, d…"). Both lose the part of a message
that carries the information: a path, a value, a request name. :class:`Words` breaks a line
only where it has a space and leaves a longer word whole on its own line (print it with
``soft_wrap=True``, so that the console does not crop it: the terminal shows it whole and a
copy of it is whole); :func:`print_message` does so on a terminal and writes a message on one
line to a pipe or a file, where a log reader greps it. :class:`Fitted` shows a table as Rich lays it out when that keeps every
word whole, and otherwise its rows as lines of :class:`Words`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

_BOX = re.compile(r"[\u2500-\u257f]")
"""Box-drawing characters: a table's rules and borders, not words."""
WIDE = 100_000
"""A width no line reaches: the layout of a table with nothing wrapped."""


def words(text: str) -> Counter[str]:
    """The words of rendered text (runs of non-space characters, borders aside): two
    layouts of the same content have the same words unless one split or cut a word."""
    return Counter(_BOX.sub(" ", text).split())


def break_points(text: str, width: int, indent: int = 0) -> list[int]:
    """Offsets at which to break ``text`` (one line, no newline) so that each line is at most
    ``width`` cells, continuation lines ``indent`` cells in; only at spaces, so a word longer
    than a line stays whole on a line of its own."""
    breaks: list[int] = []
    column = 0
    last_end = 0
    for match in re.finditer(r"\S+", text):
        start, end = match.span()
        if not last_end:  # the first word, with the spaces before it
            column = cell_len(text[:end])
        elif column + cell_len(text[last_end:end]) > width:
            breaks.append(start)
            column = indent + cell_len(text[start:end])
        else:
            column += cell_len(text[last_end:end])
        last_end = end
    return breaks


def wrap(text: Text, width: int, indent: int = 0) -> list[Text]:
    """``text``'s lines broken at spaces to ``width`` cells, continuation lines indented
    ``indent`` cells; styles kept, spaces at the breaks dropped, no word split."""
    out: list[Text] = []
    for line in text.split("\n", allow_blank=True):
        if not line.plain.strip():
            out.append(Text(""))
            continue
        pieces = line.divide(break_points(line.plain, max(1, width), indent))
        for n, piece in enumerate(pieces):
            piece.rstrip()
            if n:
                piece = Text(" " * indent) + _lstripped(piece)
            out.append(piece)
    return out


def _lstripped(text: Text) -> Text:
    spaces = len(text.plain) - len(text.plain.lstrip(" "))
    return text[spaces:] if spaces else text


class Words:
    """Text broken at spaces only, at the console's width; every line ``margin`` cells in,
    continuation lines of each line ``indent`` cells further. Print it with
    ``soft_wrap=True`` (or inside a renderable printed so), or a word longer than the width
    is cropped by the console."""

    def __init__(
        self, text: str | Text, indent: int = 0, style: str = "", *, margin: int = 0
    ) -> None:
        self.text = text if isinstance(text, Text) else Text(text, style=style)
        self.indent = indent
        self.margin = margin

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        pad = Segment(" " * self.margin) if self.margin else None
        for line in wrap(self.text, options.max_width - self.margin, self.indent):
            if pad is not None and line.plain:
                yield pad
            yield from line.render(console)
            yield Segment.line()

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        longest = max((len(w) for w in self.text.plain.split()), default=0)
        widest = max((len(line) for line in self.text.plain.split("\n")), default=0)
        return Measurement(
            min(longest + self.margin, options.max_width),
            min(widest + self.margin, options.max_width),
        )


def print_words(console: Console, text: str | Text, indent: int = 0, style: str = "") -> None:
    """``text`` on ``console`` as :class:`Words`: broken at spaces, no word cut or split."""
    console.print(Words(text, indent, style), soft_wrap=True)


def print_message(console: Console, text: str | Text, indent: int = 0, style: str = "") -> None:
    """A message (an error, a problem, a note) on a terminal as :class:`Words`; to a pipe or
    a file on one line, whole, as a log reader greps it."""
    if console.is_terminal:
        print_words(console, text, indent, style)
    else:
        console.print(text if isinstance(text, Text) else Text(text, style=style), soft_wrap=True)


def _cell_text(cell: RenderableType) -> Text:
    if isinstance(cell, Text):
        return cell
    return Text.from_markup(cell) if isinstance(cell, str) else Text(str(cell))


def table_lines(table: Table, indent: int = 4) -> Iterator[Text]:
    """A table as lines: its title, its header, then a line per row with the cells padded to
    their column's widest and two spaces between (the words of the table, none split)."""
    if table.title:
        yield _cell_text(table.title).copy()
    columns = table.columns
    rows: list[list[Text]] = []
    if table.show_header:
        rows.append([_cell_text(c.header) for c in columns])
    cells = [list(c.cells) for c in columns]
    for i in range(table.row_count):
        rows.append([_cell_text(column[i]) if i < len(column) else Text("") for column in cells])
    widths = [
        max((r[i].cell_len for r in rows if "\n" not in r[i].plain), default=0)
        for i in range(len(columns))
    ]
    for row in rows:
        line = Text()
        for i, cell in enumerate(row):
            last = all(not c.plain for c in row[i + 1 :])
            piece = cell.copy()
            if not last:
                piece.pad_right(max(0, widths[i] - piece.cell_len))
            line.append_text(piece)
            if last:
                break
            line.append("  ")
        line.rstrip()
        yield line


class Fitted:
    """``table`` as Rich lays it out when every word stays whole at the console's width;
    otherwise ``fallback`` (default: the table's rows as lines of :class:`Words`). Print it
    with ``soft_wrap=True``: a fallback line may hold a word wider than the console."""

    def __init__(self, table: Table, fallback: RenderableType | None = None) -> None:
        self.table = table
        self.fallback = fallback

    def fits(self, console: Console, options: ConsoleOptions) -> bool:
        return words(_rendered(console, self.table, options.max_width)) == words(
            _rendered(console, self.table, WIDE)
        )

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.fits(console, options):
            yield self.table
        elif self.fallback is not None:
            yield self.fallback
        else:
            for line in table_lines(self.table):
                yield Words(line, indent=4)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.table)


def _rendered(console: Console, renderable: RenderableType, width: int) -> str:
    options = console.options.update(width=width, max_width=width, no_wrap=False)
    lines = console.render_lines(renderable, options, pad=False)
    return "\n".join("".join(s.text for s in line) for line in lines)
