"""Start ``specseed serve``: load the engine, bind the socket, run uvicorn until stopped.

The socket is bound here rather than by uvicorn so that ``--port 0`` can take a free port
and say which one it got before serving (tests and scripts read that line).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specseed.core.errors import EngineError, EngineUnavailable, InputError
from specseed.engine_adapters.base import EngineSettings
from specseed.server.limits import ServeLimits


@dataclass(frozen=True)
class ServeOptions:
    """How ``specseed serve`` listens."""

    host: str = "127.0.0.1"
    port: int = 8000
    model_name: str = "specseed-reference"
    api_key: str | None = None
    batch_window_s: float = 0.2
    """How long an idle engine waits for more arrivals before its first step."""
    limits: ServeLimits = field(default_factory=ServeLimits)
    """Connections, queue, request deadline, shutdown grace (``server/limits.py``)."""


HTTP_MODULES = ("fastapi", "uvicorn")
"""What ``specseed serve`` imports beyond the core dependencies (the ``http`` extra)."""


def require_http_extra() -> None:
    """``EngineUnavailable`` (one line and the install hint) when the ``http`` extra is
    missing, instead of an import traceback from deep inside the server."""
    for module in HTTP_MODULES:
        try:
            __import__(module)
        except ImportError as exc:
            raise EngineUnavailable(
                f"specseed serve needs the http extra: {exc}",
                hint="pip install 'specseed[http]'",
            ) from None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: any free port)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise InputError(f"--host {host}: cannot resolve it ({exc.strerror})") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    return sock


def prepare(settings: EngineSettings, options: ServeOptions) -> tuple[Any, socket.socket, str]:
    """The server ``serve`` runs, its bound socket and its URL: the engine loaded, the app
    and uvicorn configured with ``options.limits``. Raises ``EngineError`` if the engine
    cannot load, ``InputError`` if the address cannot be bound."""
    from specseed.engine_adapters.reference.adapter import ReferenceEngine
    from specseed.engine_adapters.reference.live import LiveEngine
    from specseed.server.app import RETRY_AFTER_S, create_app
    from specseed.server.transport import GracefulServer, uvicorn_config

    if settings.name != "reference":
        raise EngineError(
            f"specseed serve runs the reference engine, not {settings.name!r}",
            hint="use a model.yaml with engine.name: reference",
        )
    engine = ReferenceEngine(settings)
    live = LiveEngine(engine, settings, batch_window_s=options.batch_window_s)
    limits = options.limits
    app = create_app(
        live, model_name=options.model_name, api_key=options.api_key, max_queued=limits.max_queued
    )
    sock = bind(options.host, options.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    server = GracefulServer(uvicorn_config(app, limits, RETRY_AFTER_S), live)
    return server, sock, f"http://{shown}:{port}"


def serve(
    settings: EngineSettings,
    options: ServeOptions,
    *,
    on_listening: Callable[[str], None] = lambda _url: None,
) -> None:
    """Serve until interrupted (SIGTERM, Ctrl+C: every request in flight is answered
    first). Raises ``EngineError`` if the engine cannot load."""
    server, sock, url = prepare(settings, options)
    on_listening(url)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
