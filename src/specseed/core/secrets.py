"""The one scrubber: secrets removed from text wherever it leaves the process.

Every writer (``core.files``, trace files) and every console (``SafeConsole``) passes its text
through :func:`scrub_text`, which removes

- the values this process holds: an API key read from the variable ``api_key_env`` names is
  registered with :func:`hold` when it is read, and that exact string is removed wherever it
  appears (a server that echoes the Authorization header in an error, a URL, a stack trace);
- URL userinfo (``https://user:password@host``) and credential-like query parameters
  (``?token=``, ``&api_key=``, ``sig=``, ...);
- ``Authorization``/``Bearer`` values, ``X-API-Key: ...`` and ``NAME_KEY=value`` assignments,
  and the shapes of well-known keys (``sk-...``, ``hf_...``, ``ghp_...``, ``AKIA...``).

Structured data is scrubbed by key too (:func:`scrub`): a value under a secret-looking key.
"""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.segment import Segment
from rich.text import Text

from specseed.core.text import printable

REMOVED = "<removed>"
_SECRET_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "credential", "credentials"}
)
_QUERY_WORDS = frozenset(
    {
        *_SECRET_WORDS,
        "sig",
        "signature",
        "auth",
        "authorization",
        "pwd",
        "pass",
        "session",
        "code",
        "jwt",
    }
)
_SECRET_VALUE = re.compile(
    r"(?i:bearer)\s+[A-Za-z0-9._~+/=-]+"  # HTTP Authorization schemes
    r"|\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}"  # OpenAI-style keys
    r"|\bhf_[A-Za-z0-9]{16,}"  # Hugging Face tokens
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|\bAKIA[A-Z0-9]{16}"  # AWS access key ids
)
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@?#]*@")
"""``scheme://user:password@`` (the userinfo is dropped whole: a user name can be a token)."""
_QUERY = re.compile(r"([?&;])([^=&#\s;]+)=([^&#\s;\"'<>]*)")
_ASSIGNMENT = re.compile(r"(\b[A-Za-z][\w.-]*)(\s*[=:]\s*)(\S+)")
_HEADER = re.compile(r"(?i)\b(authorization|proxy-authorization)(\"?\s*[=:]\s*\"?)([^\r\n\",]+)")

_held: set[str] = set()
_lock = threading.Lock()
_MIN_HELD = 4
"""Shorter held values are not scrubbed by value (they would match ordinary text)."""


def hold(value: str | None) -> None:
    """Remember a secret this process read (an API key), so that every output drops it."""
    if value and len(value) >= _MIN_HELD:
        with _lock:
            _held.add(value)


def hold_url_credentials(url: str | None) -> None:
    """Hold the userinfo of ``url`` (``https://user:password@host``): the password, the pair,
    and the pair as HTTP Basic sends it (base64), so an echo of any of them is removed."""
    if not url:
        return
    from urllib.parse import unquote, urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return
    if parts.username is None and parts.password is None:
        return
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    pair = f"{user}:{password}"
    hold(password)
    hold(pair)
    hold(base64.b64encode(pair.encode()).decode())


def held() -> tuple[str, ...]:
    with _lock:
        return tuple(sorted(_held, key=len, reverse=True))


def is_secret_name(name: str) -> bool:
    """A field, flag or environment variable name that usually holds a secret: its last word
    is key, token, secret, password or credential (``OPENAI_API_KEY``, ``--api-key``,
    ``hf_token``, ``apiKey``; not ``max_tokens``, ``return_token_ids`` or ``api_key_env``,
    which names the variable, not its value)."""
    words = _words(name)
    return bool(words) and words[-1] in _SECRET_WORDS


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name.lstrip("-"))
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]


def _query(match: re.Match[str]) -> str:
    words = _words(match.group(2))
    if words and (words[-1] in _QUERY_WORDS or words[0] in _QUERY_WORDS) and match.group(3):
        return f"{match.group(1)}{match.group(2)}={REMOVED}"
    return match.group(0)


def scrub_text(text: str, *, by_name: bool = True) -> str:
    """Text with held secrets, URL credentials, Authorization values and API keys removed,
    and (``by_name``) ``NAME_KEY=value`` assignments. Files are scrubbed with ``by_name``
    off: a record field such as ``last_token: 5`` is data, and the secrets a file could
    carry are the ones this process holds or a URL or header shows."""
    if not text:
        return text
    for value in held():
        if value in text:
            text = text.replace(value, REMOVED)
    text = _USERINFO.sub(lambda m: m.group(1) + REMOVED + "@", text)
    text = _QUERY.sub(_query, text)
    text = _HEADER.sub(lambda m: m.group(1) + m.group(2) + REMOVED, text)
    text = _SECRET_VALUE.sub(REMOVED, text)
    if not by_name:
        return text
    return _ASSIGNMENT.sub(
        lambda m: (
            m.group(1) + m.group(2) + REMOVED
            if is_secret_name(m.group(1)) and m.group(3) != REMOVED
            else m.group(0)
        ),
        text,
    )


def scrub(value: Any) -> Any:
    """A JSON-like value with secrets removed: values under secret-looking keys, and
    secret-looking strings anywhere."""
    if isinstance(value, Mapping):
        return {
            k: (REMOVED if is_secret_name(str(k)) and v not in (None, "") else scrub(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    if isinstance(value, str):
        return scrub_text(value)
    return value


def scrub_command(argv: Sequence[str]) -> list[str]:
    """A command line with the values of secret-looking flags removed
    (``--api-key X``, ``--token=X``) and secret-looking strings anywhere."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REMOVED)
            hide_next = False
            continue
        if arg.startswith("-") and is_secret_name(arg.split("=", 1)[0]):
            if "=" in arg:
                out.append(arg.split("=", 1)[0] + "=" + REMOVED)
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(scrub_text(arg))
    return out


def safe_text(text: str) -> str:
    """Text for a terminal: secrets removed and control characters escaped."""
    return printable(scrub_text(text))


# Spaces before a newline, with any style codes that close the line kept.
_LINE_END_PADDING = re.compile(r" +(?=(?:\x1b\[[0-9;]*m)*\n)")


class SafeConsole(Console):
    """A Rich console that scrubs secrets and escapes control characters twice: in every
    string before Rich lays it out (``render_str``: messages, table cells, markup), and in
    every piece of text it finally writes (``_render_buffer``: what Rich built from ``Text``
    objects too). Text from a server or a bundle can neither leak a secret nor drive the
    terminal; Rich's own colour codes are added after, from styles, and stay."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if kwargs.get("width") is None:
            # Rich fixes the width from COLUMNS when the console is built, and the CLI's
            # consoles are built at import: read it at each print instead, so a caller that
            # sets COLUMNS later (an API user, a test runner) gets the width it asked for.
            self._width = None

    def render_str(self, text: str, *args: Any, **kwargs: Any) -> Text:
        return super().render_str(safe_text(text), *args, **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        cleaned = (
            segment if segment.control else Segment(safe_text(segment.text), segment.style)
            for segment in buffer
        )
        rendered = super()._render_buffer(cleaned)
        if self.is_terminal:
            return rendered
        # To a pipe or a file: Rich pads table cells and wrapped lines out to the width; the
        # padding is noise there (diffs, goldens, copied text). Only spaces before a line's
        # end go: a print that ends without a newline keeps its last space for the next.
        return _LINE_END_PADDING.sub("", rendered)
