"""Servers for the HTTP tests: ``specseed serve`` as a real subprocess, and tiny in-process
ASGI apps (a seed-dropping proxy, a malformed server) under uvicorn in a thread.

Everything listens on 127.0.0.1 on a free port, every wait is bounded, and every server is
stopped when its ``with`` block ends, whatever happened inside it.
"""

from __future__ import annotations

import os
import selectors
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn

SRC = Path(__file__).resolve().parents[3] / "src"
START_TIMEOUT_S = 90.0
"""Bound on a server's start (torch import and model build on a busy 2-core machine)."""


@dataclass
class ServerProcess:
    process: subprocess.Popen[str]
    url: str

    def kill(self) -> None:
        """Kill the server at once (SIGKILL): a crash, not a shutdown."""
        self.process.kill()
        self.process.wait(timeout=10)


def _read_line(process: subprocess.Popen[str], deadline: float) -> str:
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    try:
        while time.monotonic() < deadline:
            if selector.select(timeout=0.2):
                return process.stdout.readline().strip()
            if process.poll() is not None:
                break
    finally:
        selector.close()
    return ""


def wait_healthy(url: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url}/health did not answer in time")


@contextmanager
def specseed_serve(*args: str, env: dict[str, str] | None = None) -> Iterator[ServerProcess]:
    """``python -m specseed serve --port 0 ARGS`` until the block ends (then killed)."""
    command = [sys.executable, "-m", "specseed", "serve", "--port", "0", *args]
    environment = {**os.environ, "PYTHONPATH": str(SRC), **(env or {})}
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=environment,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        url = _read_line(process, deadline)
        if not url.startswith("http://"):
            process.kill()
            _, err = process.communicate(timeout=10)
            raise RuntimeError(f"specseed serve did not start: {url!r} {err[-2000:]}")
        wait_healthy(url, deadline)
        yield ServerProcess(process, url)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


@contextmanager
def asgi_server(app: object) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on a free loopback port in a thread; yields its URL."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off"))  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
