"""The CLI's consoles are built when their modules are imported; the width they print at must
be the one COLUMNS says when they print, not when they were built."""

from __future__ import annotations

import pytest
from rich.console import Console

from specseed.core.secrets import SafeConsole


def test_a_console_built_under_one_width_prints_at_the_width_set_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    built_early = SafeConsole()
    plain = Console()
    monkeypatch.setenv("COLUMNS", "300")
    assert plain.width == 40  # Rich's own console keeps the width of its birth
    assert built_early.width == 300
    with built_early.capture() as captured:
        built_early.print("x" * 250)
    assert captured.get().rstrip("\n") == "x" * 250


def test_an_explicit_width_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    assert SafeConsole(width=50).width == 50


def test_a_failed_write_is_not_printed_again_with_the_next_output() -> None:
    """A console outlives one command (the CLI builds its consoles at import): a write to a
    closed stream must not leave its text behind for the next command's output."""
    import io

    console = SafeConsole(width=80)
    closed = io.StringIO()
    closed.close()
    console.file = closed
    with pytest.raises(ValueError, match="closed"):
        console.print("the first command's table")
    fresh = io.StringIO()
    console.file = fresh
    console.print("the second command's table")
    assert fresh.getvalue() == "the second command's table\n"
