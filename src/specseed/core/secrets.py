"""The one scrubber: secrets removed from text wherever it leaves the process.

Every writer (``core.files``, trace files) and every console (``SafeConsole``) passes its text
through :func:`scrub_text`. It removes secrets by their value and by their place in data,
never by a word in prose ("sent as a Bearer token", "missing or wrong API key" and
"export SPECSEED_KEY=<key>" stay as written):

- by value: an API key read from the variable ``api_key_env`` names (registered with
  :func:`hold` when it is read), a URL's password, and the value of every environment
  variable whose name holds a secret (``OPENAI_API_KEY``, ``HF_TOKEN``): each removed
  wherever it appears (a server that echoes the Authorization header in an error, a stack
  trace, an engine's log). Values shorter than 8 characters are not removed by value: they
  would match words;
- by place: URL userinfo (``https://user:password@host``) and credential query parameters
  (``?token=``, ``&api_key=``, ``sig=``, ...); the value of an ``Authorization`` header and a
  ``Bearer`` credential; with ``by_name``, the value assigned to a secret-named identifier
  (``OPENAI_API_KEY=...``, ``"api_key": "..."``, ``x-api-key: ...``);
- by shape: well-known key formats (``sk-...``, ``hf_...``, ``ghp_...``, ``AKIA...``).

A placeholder in a secret's place (``...``, ``<key>``, ``KEY``, ``$VAR``) is text, not a
secret, and stays. Structured data is scrubbed by key too (:func:`scrub`): a value under a
secret-looking key.
"""

from __future__ import annotations

import base64
import functools
import os
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
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "credential",
        "credentials",
        "authorization",
    }
)
_QUERY_WORDS = frozenset(
    {
        *_SECRET_WORDS,
        "sig",
        "signature",
        "auth",
        "pwd",
        "pass",
        "session",
        "code",
        "jwt",
    }
)
_KEY_SHAPES = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}"  # OpenAI-style keys
    r"|\bhf_[A-Za-z0-9]{16,}"  # Hugging Face tokens
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|\bAKIA[A-Z0-9]{16}"  # AWS access key ids
)
_BEARER = re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9._~+/-]+=*)")
"""A Bearer credential outside a header (a log line, a curl command in an error)."""
_HEADER = re.compile(
    r"(?i)\b(authorization|proxy-authorization)(['\"]?\s*[=:]\s*['\"]?)"
    r"((?:basic|bearer|token|digest|negotiate)\s+)?([^\s'\",;)]+)"
)
_SCHEMES = frozenset({"basic", "bearer", "token", "digest", "negotiate"})
"""An Authorization header's value, in any quoting (a header line, a dict's repr, JSON)."""
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@?#]*@")
"""``scheme://user:password@`` (the userinfo is dropped whole: a user name can be a token)."""
_QUERY = re.compile(r"([?&;])([^=&#\s;]+)=([^&#\s;\"'<>]*)")
_ASSIGNMENT = re.compile(r"(?<![\w.-])(['\"]?)([A-Za-z][\w.-]*)\1(\s*[=:]\s*)(\S+)")
_PLACEHOLDER = re.compile(r"\.\.\.|…|<[^<>\s]*>|\$\S*|[A-Z][A-Z_]*|\*+|[xX]+|" + re.escape(REMOVED))
"""What stands in a secret's place in prose and hints: ``...``, ``<key>``, ``KEY``,
``YOUR_API_KEY``, a shell expansion (``$VAR``, ``$(cat key.txt)``), ``***``, ``xxx``."""
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_EDGE = "\"'()[]{}.,;:"

_held: set[str] = set()
_lock = threading.Lock()
MIN_SECRET_LENGTH = 8
"""Shorter values are not scrubbed by value: "wrong", "test" or "1234" would match words and
numbers in every report."""


def hold(value: str | None) -> None:
    """Remember a secret this process read (an API key), so that every output drops it."""
    if value and len(value) >= MIN_SECRET_LENGTH:
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
    """Every value removed wherever it appears, longest first: those held, and the values of
    the environment's secret-named variables."""
    with _lock:
        values = _held | _environment_secrets()
    return tuple(sorted(values, key=len, reverse=True))


_environment: tuple[dict[Any, Any], frozenset[str]] = ({}, frozenset())


def _environment_secrets() -> frozenset[str]:
    """The values of the environment's secret-named variables. Every console segment and
    trace line is scrubbed, and decoding the environment costs more than the rest of the
    scrub: the values are read again only when the environment changed."""
    global _environment
    raw = getattr(os.environ, "_data", None)  # CPython's undecoded copy of the environment
    seen, values = _environment
    if isinstance(raw, dict) and raw == seen:
        return values
    values = frozenset(
        value
        for name, value in os.environ.items()
        if len(value) >= MIN_SECRET_LENGTH and is_secret_name(name)
    )
    _environment = (dict(raw) if isinstance(raw, dict) else {}, values)
    return values


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """A field, flag, header or environment variable name that usually holds a secret: its
    last word is key, token, secret, password, credential or authorization
    (``OPENAI_API_KEY``, ``--api-key``, ``hf_token``, ``apiKey``; not ``max_tokens``,
    ``return_token_ids`` or ``api_key_env``, which names the variable, not its value)."""
    words = _words(name)
    return bool(words) and words[-1] in _SECRET_WORDS


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name.lstrip("-"))
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]


def is_placeholder(value: str) -> bool:
    """``value`` (punctuation around it aside) stands in a secret's place rather than being
    one: ``...``, ``<key>``, ``KEY``, ``$VAR``, ``<removed>``."""
    core = value.strip(_EDGE) or value
    return bool(_PLACEHOLDER.fullmatch(core) or _PLACEHOLDER.fullmatch(value.strip("\"'")))


def _looks_like_credential(value: str) -> bool:
    """A Bearer word that is a credential, not a word of prose ("Bearer token"): at least 8
    characters with a digit, a capital after the first letter or a token character."""
    if len(value) < MIN_SECRET_LENGTH or is_placeholder(value):
        return False
    return any(c.isdigit() or c in "._~+/=-" for c in value) or any(c.isupper() for c in value[1:])


def _query(match: re.Match[str]) -> str:
    words = _words(match.group(2))
    if words and (words[-1] in _QUERY_WORDS or words[0] in _QUERY_WORDS) and match.group(3):
        return f"{match.group(1)}{match.group(2)}={REMOVED}"
    return match.group(0)


def _header(match: re.Match[str]) -> str:
    name, sep, scheme, value = match.group(1), match.group(2), match.group(3) or "", match.group(4)
    # A scheme alone is no credential (a console scrubs each styled piece of a line too,
    # and Rich may have cut "Bearer" from what follows it).
    if is_placeholder(value) or (not scheme and value.lower() in _SCHEMES):
        return match.group(0)
    return f"{name}{sep}{scheme}{REMOVED}"


def _bearer(match: re.Match[str]) -> str:
    if not _looks_like_credential(match.group(2)):
        return match.group(0)
    return match.group(1) + REMOVED


def _assignment(match: re.Match[str]) -> str:
    quote, name, sep, value = match.groups()
    if not is_secret_name(name):
        return match.group(0)
    # One word of prose ("key: temperature", "token: 17") is not a field: a secret's place is
    # a compound identifier (api_key, OPENAI_API_KEY, x-api-key), a quoted key or NAME=value.
    if len(_words(name)) < 2 and not quote and sep != "=":
        return match.group(0)
    core = value.strip(_EDGE)
    if is_placeholder(value) or _NUMBER.fullmatch(core) or REMOVED in value:
        return match.group(0)
    if core.lower() in _SCHEMES:  # a header's scheme: the header rule took its credential
        return match.group(0)
    opening = value[0] if value[0] in "\"'" else ""
    return f"{quote}{name}{quote}{sep}{opening}{REMOVED}{opening}"


def scrub_text(text: str, *, by_name: bool = True) -> str:
    """Text with held secrets, URL credentials, Authorization values and API keys removed,
    and (``by_name``) values assigned to secret-named identifiers. Files are scrubbed with
    ``by_name`` off: a record field such as ``"hf_token": null`` is data the file's schema
    names, and the secrets a file could carry are the ones this process holds or a URL or
    header shows."""
    if not text:
        return text
    for value in held():
        if value in text:
            text = text.replace(value, REMOVED)
    text = _USERINFO.sub(lambda m: m.group(1) + REMOVED + "@", text)
    text = _QUERY.sub(_query, text)
    text = _HEADER.sub(_header, text)
    text = _BEARER.sub(_bearer, text)
    text = _KEY_SHAPES.sub(REMOVED, text)
    if not by_name:
        return text
    return _ASSIGNMENT.sub(_assignment, text)


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

    def _write_buffer(self) -> None:
        try:
            super()._write_buffer()
        finally:
            # Rich empties its buffer only after a write that succeeded: a closed or broken
            # stream, or an encoding error, left the text there, and a long-lived console
            # (the CLI's are built at import) printed it again before its next output.
            if self._buffer_index == 0:
                del self._buffer[:]

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
