"""A malicious HTTP server on 127.0.0.1: a real socket server in a thread that answers each
request with one hostile behaviour (a trickled body, an endless body, slow headers, JSON
nested 200,000 deep, a redirect, wrong types).

Every behaviour ends on its own within ``MAX_TALK_S`` even if the client never hangs up, so a
test that fails cannot leave a thread writing forever.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

MAX_TALK_S = 15.0
"""The longest any behaviour keeps a connection (bounds a failing test)."""

Behaviour = Callable[[socket.socket], None]


def _read_request(sock: socket.socket) -> None:
    """Read one request's headers and its Content-Length body (ignored)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return
        rest += chunk


def answer(status: str, body: bytes, headers: str = "") -> Behaviour:
    """A complete, well-framed answer with ``body`` (which may itself be hostile)."""

    def behave(sock: socket.socket) -> None:
        sock.sendall(
            f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n{headers}\r\n".encode()
            + body
        )

    return behave


def trickle_body(sock: socket.socket) -> None:
    """Headers at once, then a 10 kB body one byte every 20 ms (each gap short)."""
    sock.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n"
    )
    _drip(sock, b"[" * 10000)


def slow_headers(sock: socket.socket) -> None:
    """The status line and headers themselves one byte every 20 ms, never finished."""
    _drip(sock, b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 10000)


def _drip(sock: socket.socket, data: bytes) -> None:
    ends = time.monotonic() + MAX_TALK_S
    for byte in data:
        if time.monotonic() > ends:
            return
        sock.sendall(bytes([byte]))
        time.sleep(0.02)


def endless_body(sock: socket.socket) -> None:
    """A chunked body that never ends (until the client hangs up or MAX_TALK_S)."""
    sock.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"[" * 65536
    framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    ends = time.monotonic() + MAX_TALK_S
    while time.monotonic() < ends:
        sock.sendall(framed)


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        self.server.requests += 1
        sock: socket.socket = self.request
        sock.settimeout(MAX_TALK_S)
        try:
            _read_request(sock)
            self.server.behaviour(sock)
        except OSError:
            pass  # the client hung up: that is what the test wants


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, behaviour: Behaviour) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.behaviour = behaviour
        self.requests = 0
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


@contextmanager
def hostile_server(behaviour: Behaviour) -> Iterator[_Server]:
    """Serve ``behaviour`` for every request until the block ends; ``.url`` is its address."""
    server = _Server(behaviour)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
