"""The bounds of ``specseed serve``, as one value (no uvicorn import: the CLI builds it before
it checks that the http extra is installed).

What enforces each: the app (``app.py``) bounds the completions queued for the engine and drops
those whose clients hung up; ``transport.py`` configures uvicorn and adds what uvicorn lacks.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServeLimits:
    """The bounds of ``specseed serve`` (defaults for a server a few audits share)."""

    max_connections: int = 256
    """Open connections at once; one more is a 503 with ``Retry-After``, closed at once."""
    max_queued: int = 64
    """Completions waiting for an engine slot (beyond ``max_num_requests`` running); one more
    is a 429 with ``Retry-After``."""
    request_timeout_s: float = 10.0
    """Time a client has to send a whole request, from its connection (or its last response)
    on."""
    keep_alive_s: float = 5.0
    """An idle kept-alive connection is closed after this long (uvicorn's
    ``timeout_keep_alive``)."""
    max_header_bytes: int = 16 * 1024
    """Largest request line and headers (uvicorn's ``h11_max_incomplete_event_size``)."""
    shutdown_grace_s: float = 3.0
    """On SIGTERM or Ctrl+C, how long requests in flight may run before they are answered
    503 (uvicorn's ``timeout_graceful_shutdown``, less a margin to send the answers)."""

    def __post_init__(self) -> None:
        for name in ("max_connections", "max_queued", "max_header_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        for name in ("request_timeout_s", "keep_alive_s", "shutdown_grace_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
