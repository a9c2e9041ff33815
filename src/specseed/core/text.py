"""Text that came from outside made safe for where it lands: one function per destination.

Outside text is anything specseed did not write itself: a server's error message, a bundle's
fields (findings, environment, scenario text), a model id, a checkpoint's config, a file
name. Each destination has its own dangers, and every writer of that destination passes
outside text through the one function here that knows them:

============================  =================================================================
``for_terminal(text)``        a terminal (Rich consoles call it on everything they print):
                              C0/C1 controls and DEL (escape sequences that retitle, clear or
                              rewrite the terminal), bidi overrides and isolates, zero-width
                              and other invisible format characters (text that reads other
                              than it is), noncharacters and lone surrogates become visible
                              escapes (``\\x1b``, ``\\u202e``); newline and tab stay.
``for_markdown(text)``        inline Markdown (an issue body's prose, a table cell): one line,
                              HTML escaped (``&lt;img&gt;``), Markdown punctuation escaped
                              (no link, image, heading, list, table cell or code span can
                              start inside it), invisible characters escaped.
``markdown_code(text)``       an inline code span in prose, its backtick run longer than any
                              the text holds.
``markdown_fence(text)``      a fenced code block whose fence is longer than any backtick run
                              the text holds, so nothing inside can close it.
``for_html(text)``            HTML text or attribute value (``&``, ``<``, ``>``, quotes).
``for_xml(text)``             XML 1.0 text or attribute value: every character XML forbids
                              (C0 controls, U+FFFE, U+FFFF, lone surrogates) and the invisible
                              ones become visible escapes; ElementTree escapes ``<&>`` itself.
``for_json(value)``           a JSON-like value whose strings (keys too) hold no lone
                              surrogate (each becomes U+FFFD): ``json.dumps`` would write
                              ``\\ud800``, which strict parsers refuse, and UTF-8 cannot
                              encode it at all.
``for_encoding(text, enc)``   text any stream encoding can write (``PYTHONIOENCODING=ascii``,
                              ``LANG=C``): what it cannot encode becomes a backslash escape.
============================  =================================================================

Escapes are text, so each function is idempotent and the result still says what the
outsider sent. ``printable`` is the older name of ``for_terminal``.
"""

from __future__ import annotations

import re
from typing import Any

_INVISIBLE_RANGES = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 but tab and newline, DEL, C1
    "\u00ad"  # soft hyphen
    "\u034f"  # combining grapheme joiner
    "\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2"  # Arabic format marks, ALM
    "\u115f\u1160\u3164\uffa0"  # Hangul fillers: letters that print nothing
    "\u180e"  # Mongolian vowel separator
    "\u200b-\u200f"  # zero-width space, non-joiner, joiner, LRM, RLM
    "\u2028-\u202e"  # line and paragraph separators, bidi embeddings and overrides
    "\u2060-\u2064\u2066-\u206f"  # word joiner, invisible operators, bidi isolates, ...
    "\ud800-\udfff"  # surrogates (in a str, always lone)
    "\ufdd0-\ufdef\ufeff\ufff9-\ufffb\ufffe\uffff"  # noncharacters, BOM, annotations
    "\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"  # tag characters (hidden ASCII)
    "\U000e0100-\U000e01ef"  # variation selectors 17-256 (hidden bytes)
)
_NONCHARACTERS = "".join(
    chr(plane | 0xFFFE) + chr(plane | 0xFFFF) for plane in range(0x10000, 0x110000, 0x10000)
)
_INVISIBLE = re.compile(f"[{_INVISIBLE_RANGES}{_NONCHARACTERS}]")
"""Characters that act on a terminal or hide: Unicode's format (Cf), line and paragraph
separator, control and surrogate categories, noncharacters and a few invisible letters."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_NEWLINES = re.compile(r"\r\n|[\r\n\t\f\v\x85\u2028\u2029]")
_BACKTICKS = re.compile("`+")
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*\[\]|~#])|(?<![^\W_])_|_(?![^\W_])")
"""Markdown's inline syntax; an underscore only where it could open or close emphasis (not
between two letters or digits, as in ``max_draft_len``)."""
_MARKDOWN_LINE_START = re.compile(r"^(?:[-+=]|\d{1,9}[.)](?=\s|$))")
"""A list item, setext underline or ordered list that the text would start at a line's
start."""


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _escape_invisible(text: str, keep: str) -> str:
    if keep:
        return _INVISIBLE.sub(lambda m: m.group() if m.group() in keep else _visible(m), text)
    return _INVISIBLE.sub(_visible, text)


def _cut(text: str, limit: int | None) -> str:
    if limit is not None and len(text) > limit:
        return text[: max(0, limit - 1)] + "…"
    return text


def for_terminal(text: str, limit: int | None = None) -> str:
    """``text`` for a terminal: every control, bidi, zero-width or otherwise invisible
    character but newline and tab written as a visible escape (``\\x1b``, ``\\u202e``).

    ``limit`` cuts the result to that many characters (with ``…``), for text whose length an
    outsider chose.
    """
    return _cut(_escape_invisible(text, "\n\t"), limit)


printable = for_terminal
"""The older name of :func:`for_terminal`."""


def for_markdown(text: str) -> str:
    """``text`` as inline Markdown that renders as the text itself, on one line.

    Newlines and tabs become spaces (no heading, list, quote or fence can start inside),
    ``& < >`` become entities (no raw HTML), ``@`` too (no mention), Markdown punctuation is backslash-escaped (no
    link, image, emphasis, code span, strikethrough, table cell or ``#`` reference), a
    leading list or heading marker is escaped, and invisible characters are escaped as in
    :func:`for_terminal`. Not for a code span (backslashes show there): use
    :func:`markdown_code`.
    """
    text = _escape_invisible(_NEWLINES.sub(" ", text), "").lstrip(" ")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MARKDOWN_PUNCTUATION.sub(lambda m: "\\" + m.group(), text)
    # "@name" as an entity: it renders as written and notifies no one on GitHub.
    text = text.replace("@", "&commat;")
    return _MARKDOWN_LINE_START.sub(lambda m: m.group()[:-1] + "\\" + m.group()[-1], text)


def markdown_code(text: str) -> str:
    """``text`` as an inline code span (for prose, not a table cell: GitHub splits a cell at
    any ``|``): on one line, invisible characters escaped, delimited by a backtick run
    longer than any in ``text``."""
    text = _escape_invisible(_NEWLINES.sub(" ", text), "")
    fence = "`" * (_longest_backtick_run(text) + 1)
    if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.endswith(" ")):
        text = f" {text} "
    return f"{fence}{text or ' '}{fence}"


def markdown_fence(text: str, info: str = "") -> str:
    """``text`` as a fenced code block (no trailing newline): the fence is a backtick run
    longer than any line of ``text`` holds (at least three), so nothing inside can close
    it; invisible characters but newline and tab are escaped. ``info`` is the language
    (``yaml``, ``text``), written by specseed, never by an outsider."""
    body = _escape_invisible(text.replace("\r\n", "\n").rstrip("\n"), "\n\t")
    fence = "`" * max(3, _longest_backtick_run(body) + 1)
    return f"{fence}{info}\n{body}\n{fence}"


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in _BACKTICKS.findall(text)), default=0)


def for_html(text: str) -> str:
    """``text`` for HTML, as element text or a quoted attribute value: ``& < > " '`` as
    entities, invisible characters but newline and tab escaped."""
    text = _escape_invisible(text, "\n\t")
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#x27;")
    )


def for_xml(text: str) -> str:
    """``text`` that XML 1.0 can hold: characters outside its ``Char`` production (C0 but
    tab, newline and carriage return; U+FFFE, U+FFFF; lone surrogates) and the invisible
    ones of :func:`for_terminal` as visible escapes. The XML writer escapes ``< & >``."""
    return _escape_invisible(text, "\n\t")


def for_json(value: Any) -> Any:
    """A JSON-like value (dicts, lists, tuples, strings, numbers) with every lone surrogate
    in its strings and keys replaced by U+FFFD, so that it encodes as valid UTF-8 JSON.
    Other values pass through unchanged."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {for_json(k): for_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [for_json(v) for v in value]
    return value


def for_encoding(text: str, encoding: str | None) -> str:
    """``text`` that a stream in ``encoding`` can write: each character it cannot encode (a
    lone surrogate in UTF-8, ``…`` in ASCII) as a backslash escape. ``None``: UTF-8."""
    encoding = encoding or "utf-8"
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:
        return text.encode("ascii", "backslashreplace").decode("ascii")
    return text
