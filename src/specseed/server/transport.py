"""The uvicorn side of ``specseed serve``'s limits (``limits.ServeLimits``): what bounds the
server against clients that hold it (slow or idle connections, too many of them) and a
shutdown with requests in flight.

uvicorn's own settings do what they can, and are used: ``timeout_keep_alive`` closes an idle
kept-alive connection, ``h11_max_incomplete_event_size`` bounds the bytes of a request line
and headers, ``timeout_graceful_shutdown`` bounds the wait for requests in flight. Two limits
uvicorn does not have are added to its h11 protocol (:func:`bounded_protocol`):

- a request deadline: a client has ``request_timeout_s`` from the moment its connection opens
  (or its last response ends) to send a whole request, headers and body. Without it, a
  connection that sends nothing, or one byte of header every few seconds (slowloris), is held
  for ever: 1,100 of them took every descriptor of a ``ulimit -n 1024`` server and locked
  every client out;
- a connection cap: past ``max_connections`` open connections, a new one is answered ``503``
  with ``Retry-After`` and closed after a short linger (what the client sends meanwhile is
  read and dropped, so it reads the 503 rather than a reset), so descriptors stay bounded
  whatever arrives.
  (uvicorn's ``limit_concurrency`` answers requests, not connections, with a plain-text 503
  and no ``Retry-After``, while idle connections keep their descriptors: it bounds the wrong
  thing here.)

:class:`GracefulServer` tells the engine first when a shutdown starts (SIGTERM, Ctrl+C):
queued completions end at once with a JSON 503, running ones get most of the grace period to
finish and then end the same way, so every request in flight gets an answer before uvicorn's
deadline and none is cancelled mid-flight (a ``CancelledError`` traceback and a plain-text 500).
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from specseed.engine_adapters.reference.live import LiveEngine
from specseed.server.limits import ServeLimits

_SHUTDOWN_MARGIN_S = 0.5
"""Part of the grace period left to send the 503s after the engine ends what it still runs."""
_REFUSAL_LINGER_S = 0.5
"""How long a refused connection stays open (its input dropped) after its 503 was sent: a
socket closed with unread input answers with a reset, which the client would read instead."""


def _refusal(retry_after_s: int) -> bytes:
    body = json.dumps(
        {
            "error": {
                "message": "the server has too many open connections; retry later",
                "type": "server_error",
                "code": 503,
            }
        }
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        f"retry-after: {retry_after_s}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class _BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request deadline and a connection cap."""

    limits: ServeLimits = ServeLimits()  # replaced by bounded_protocol
    retry_after_s: int = 1

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._refused = len(self.connections) > self.limits.max_connections
        if self._refused:
            transport.write(_refusal(self.retry_after_s))
            if transport.can_write_eof():
                transport.write_eof()
            self._deadline = self.loop.call_later(_REFUSAL_LINGER_S, transport.close)
            return
        self._arm_deadline()

    def data_received(self, data: bytes) -> None:
        if self._refused:  # answered already: the request is read and dropped
            return
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_deadline()  # the next request on this connection has its own

    def _arm_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(self.limits.request_timeout_s, self._deadline_passed)

    def _deadline_passed(self) -> None:
        self._deadline = None
        # IDLE: no request line or headers yet; SEND_BODY: the body is still coming. A
        # request received whole (DONE) is the application's, however long it runs.
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
            self.transport.close()


def bounded_protocol(limits: ServeLimits, retry_after_s: int) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol class with ``limits``' request deadline and connection cap
    (give it as ``uvicorn.Config(http=...)``)."""
    return type(
        "BoundedH11Protocol",
        (_BoundedH11Protocol,),
        {"limits": limits, "retry_after_s": retry_after_s},
    )


def uvicorn_config(app: Any, limits: ServeLimits, retry_after_s: int) -> uvicorn.Config:
    """The uvicorn config of ``specseed serve``: its own settings for what it bounds, the
    bounded h11 protocol for the rest."""
    return uvicorn.Config(
        app,
        log_level="warning",
        http=bounded_protocol(limits, retry_after_s),
        # Seconds as floats (uvicorn annotates int, and hands them to call_later and
        # asyncio.timeout, which take floats): a test's limits are fractions of a second.
        timeout_keep_alive=limits.keep_alive_s,  # type: ignore[arg-type]
        h11_max_incomplete_event_size=limits.max_header_bytes,
        timeout_graceful_shutdown=limits.shutdown_grace_s,  # type: ignore[arg-type]
    )


class GracefulServer(uvicorn.Server):
    """A uvicorn server that tells the engine when it shuts down (see the module doc)."""

    def __init__(self, config: uvicorn.Config, live: LiveEngine) -> None:
        super().__init__(config)
        self.live = live

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        grace = float(self.config.timeout_graceful_shutdown or 0)
        self.live.close(max(0.0, grace - _SHUTDOWN_MARGIN_S))
        await super().shutdown(sockets)
