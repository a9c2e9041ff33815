"""A release audited over HTTP: its vLLM OpenAI server started from its environment on
loopback, audited from this process with the ``openai`` engine, stopped.

Two servers per release when the audit speculates: one with the model.yaml's settings, and
one without speculation (``max_draft_len: 0``) as the variant endpoint that
``greedy-speculation`` and ``losslessness`` compare against. The black-box checks need
nothing from the release but its API, so they run on any release; the RNG checks say skip.
Both servers listen on 127.0.0.1 on free ports, every wait is bounded, and both are stopped
(SIGTERM, then SIGKILL) whatever happens.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specseed.engine_adapters.vllm.server import SERVED_NAME
from specseed.releases.envs import ReleaseEnv, child_environment

START_TIMEOUT_S = 600.0
"""Longest a release's servers may take to answer /health (model load on a busy machine)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2.0) as reply:
            return int(reply.status) == 200
    except OSError:
        return False


def wait_healthy(servers: list[Server], timeout: float) -> str | None:
    """None once every server answers /health; else why not (a server exited, or the time
    ran out), with the end of its log."""
    deadline = time.monotonic() + timeout
    waiting = list(servers)
    while waiting:
        for server in list(waiting):
            if server.process.poll() is not None:
                return f"the server exited ({server.process.returncode}): {_tail(server.log)}"
            if _healthy(server.url):
                waiting.remove(server)
        if waiting and time.monotonic() > deadline:
            return f"the server did not answer within {timeout:.0f} s: {_tail(waiting[0].log)}"
        if waiting:
            time.sleep(0.5)
    return None


def _tail(log: Path, lines: int = 4) -> str:
    try:
        text = log.read_bytes()[-8192:].decode("utf-8", errors="replace")
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())


@contextlib.contextmanager
def started(python: Path, arguments: list[str], log: Path, env: dict[str, str]) -> Iterator[Server]:
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(python), "-I", *arguments],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    port = arguments[arguments.index("--port") + 1]
    server = Server(process, f"http://127.0.0.1:{port}", log)
    try:
        yield server
    finally:
        server.stop()


class ServersFailed(Exception):
    """The release's servers did not come up (the reason, with the end of a log)."""

    def __init__(self, reason: str, seconds: float) -> None:
        super().__init__(reason)
        self.reason = reason
        self.seconds = seconds


@dataclass(frozen=True)
class ReleaseServers:
    main: str
    """The URL of the server with the audit's settings."""
    plain: str | None
    """The URL of the one without speculation (None: the audit does not speculate)."""
    seconds: float
    """From launching them until both answered."""
    version: str | None = None
    """The release the main server says it is (``GET /version``), when it says."""


@contextlib.contextmanager
def release_servers(
    env: ReleaseEnv, settings: Any, version: str, log: Path, timeout_s: float = START_TIMEOUT_S
) -> Iterator[ReleaseServers]:
    """The release's vLLM servers for ``settings`` (``EngineSettings``), healthy, stopped on
    exit. ``EngineError`` for settings the release cannot take; ``ServersFailed`` when a
    server exits or does not answer in time."""
    from specseed.engine_adapters.vllm.server import SERVER_ENVIRONMENT, server_arguments

    main_args = server_arguments(settings, version, free_port())
    plain_args = (
        server_arguments(replace(settings, max_draft_len=0), version, free_port())
        if settings.max_draft_len > 0
        else None
    )
    environment = child_environment(SERVER_ENVIRONMENT)
    launched = time.perf_counter()
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(started(env.python, main_args, log, environment))]
        if plain_args is not None:
            plain_log = log.with_name(log.stem + ".plain.log")
            servers.append(
                stack.enter_context(started(env.python, plain_args, plain_log, environment))
            )
        problem = wait_healthy(servers, timeout_s)
        seconds = time.perf_counter() - launched
        if problem is not None:
            raise ServersFailed(problem, seconds)
        plain = servers[1].url if plain_args else None
        yield ReleaseServers(servers[0].url, plain, seconds, server_version(servers[0].url))


def server_version(url: str) -> str | None:
    """What ``GET /version`` of a vLLM server answers (None: it does not say)."""
    try:
        with urllib.request.urlopen(f"{url}/version", timeout=5.0) as reply:
            data = json.loads(reply.read(4096))
    except (OSError, ValueError):
        return None
    version = data.get("version") if isinstance(data, dict) else None
    return str(version) if version is not None else None


def http_config(config: Any, servers: ReleaseServers) -> dict[str, Any]:
    """The audit's model.yaml (an ``AuditConfig``) with its engine replaced by the release's
    servers (the ``openai`` engine; the plain server as the ``max_draft_len: 0`` variant)."""
    engine = config.engine
    options: dict[str, Any] = {"base_url": servers.main, "model": SERVED_NAME}
    if servers.plain is not None:
        options["variants"] = [
            {"when": {"max_draft_len": 0}, "base_url": servers.plain, "model": SERVED_NAME}
        ]
    data = dict(config.model_dump(mode="json", exclude_unset=True))
    data["engine"] = {
        "name": "openai",
        "max_num_requests": engine.max_num_requests,
        "max_draft_len": engine.max_draft_len,
        "options": options,
    }
    return data


__all__ = [
    "START_TIMEOUT_S",
    "ReleaseServers",
    "ServersFailed",
    "free_port",
    "http_config",
    "release_servers",
    "server_version",
    "wait_healthy",
]
