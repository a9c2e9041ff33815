"""Control characters from outside never reach the terminal raw."""

from __future__ import annotations

from specseed.core.text import printable


def test_escapes_c0_c1_and_del_but_keeps_newline_and_tab() -> None:
    raw = "a\x1b]0;owned\x07b\x1b[2Jc\x9bd\x7fe\r\n\tf\x00"
    safe = printable(raw)
    assert safe == "a\\x1b]0;owned\\x07b\\x1b[2Jc\\x9bd\\x7fe\\x0d\n\tf\\x00"
    assert not any(ord(c) < 32 and c not in "\n\t" for c in safe)


def test_plain_text_is_unchanged_and_limit_cuts() -> None:
    assert printable("résumé ok") == "résumé ok"
    assert printable("x" * 50, limit=10) == "x" * 9 + "…"
