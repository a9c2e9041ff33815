"""Text from outside (servers, bundles, scenario files) made safe to print on a terminal."""

from __future__ import annotations

import re

_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 controls but newline and tab, DEL, and the C1 controls (a terminal acts on them: ESC
starts an escape sequence, CR rewrites the line, U+009B is a one-character CSI)."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character but newline and tab written as ``\\xNN``, so
    that printing it cannot move the cursor, recolour or retitle the terminal."""
    return _CONTROLS.sub(_escape, text)
