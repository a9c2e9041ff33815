"""Text laid out without losing a value: lines break at spaces only, a word longer than a line
stays whole on its own line, and a table that would split or cut a word becomes lines."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from specseed.reporting.layout import Fitted, Words, print_message, print_words, words

PATH = "/a/rather/long/path/to/site-packages/some-engine/module/file.py:412"


def _console(width: int, terminal: bool = True) -> Console:
    return Console(width=width, record=True, color_system=None, force_terminal=terminal)


def test_lines_break_at_spaces_and_a_long_word_stays_whole() -> None:
    console = _console(30)
    text = f"Error: cannot read {PATH} because it is gone for good"
    print_words(console, text, indent=2)
    shown = console.export_text()
    lines = shown.splitlines()
    assert lines[0] == "Error: cannot read"
    assert f"  {PATH}" in lines  # longer than the console: alone, whole
    assert all(len(line) <= 30 for line in lines if PATH not in line)
    assert all(line.startswith("  ") for line in lines[1:])
    assert words(shown) == words(text)


def test_styles_and_margins_are_kept() -> None:
    console = _console(20)
    console.print(Words(Text.assemble(("FAIL", "bold"), " one two three four five"), margin=4))
    lines = console.export_text().splitlines()
    assert lines == ["    FAIL one two", "    three four five"]


def test_a_message_to_a_pipe_is_one_line() -> None:
    console = _console(30, terminal=False)
    print_message(console, f"hint: look at {PATH} first", indent=2)
    assert console.export_text() == f"hint: look at {PATH} first\n"


def _table() -> Table:
    table = Table(title="Packages", title_justify="left")
    for column in ("package", "version", "from"):
        table.add_column(column)
    table.add_row("torch", "2.13.0", PATH)
    table.add_row("vllm", "0.32.0", "—")
    return table


def test_a_table_that_fits_is_the_table() -> None:
    console = _console(120)
    console.print(Fitted(_table()), soft_wrap=True)
    shown = console.export_text()
    assert "┃ package" in shown and PATH in shown


def test_a_table_that_would_split_a_word_becomes_lines_with_the_same_words() -> None:
    narrow, wide = _console(50), _console(200)
    narrow.print(Fitted(_table()), soft_wrap=True)
    wide.print(_table())
    text = narrow.export_text()
    assert "┃" not in text and PATH in text.splitlines()[-2].strip()
    assert words(text) == words(wide.export_text())
