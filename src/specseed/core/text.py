"""Text that came from outside (a server's error, a bundle's field) made safe to print.

A terminal obeys escape sequences: an error body holding ``ESC ]`` or ``ESC [2J`` would
retitle, clear or rewrite the user's terminal if it were printed raw. ``printable`` keeps
newlines and tabs and writes every other C0/C1 control character (and DEL) as a visible
escape, so the text still says what the server said.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}"


def printable(text: str, limit: int | None = None) -> str:
    """``text`` with control characters other than newline and tab escaped (``\\x1b``).

    ``limit`` cuts the result to that many characters (with ``…``), for text whose length an
    outsider chose.
    """
    safe = _CONTROL.sub(_escape, text)
    if limit is not None and len(safe) > limit:
        return safe[: max(0, limit - 1)] + "…"
    return safe
