"""``specseed serve`` against clients that hold it, on a real server on loopback (the one
``launch.serve`` runs, in a thread, with limits small enough for a test):

- a connection that sends nothing, or a request's headers or body a little at a time, is
  closed at the request deadline (slowloris held every descriptor for ever);
- past the connection cap a new connection reads a JSON 503 with ``Retry-After``, and once
  the idle ones are dropped clients are served again;
- past the queue bound a completion is a 429 with ``Retry-After``;
- a completion whose client hung up is dropped from the engine (200 hung-up clients were
  all served while a 4-token request waited behind them);
- a shutdown (what uvicorn does on SIGTERM or Ctrl+C) answers every request in flight with its
  completion or a JSON 503, no task cancelled and no traceback (46 ``CancelledError``
  tracebacks and plain-text 500s before).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from specseed.engine_adapters.base import EngineSettings
from specseed.server.launch import ServeOptions, prepare
from specseed.server.limits import ServeLimits

LIMITS = ServeLimits(
    max_connections=10,
    max_queued=2,
    request_timeout_s=0.5,
    keep_alive_s=0.5,
    shutdown_grace_s=1.5,
)
SETTINGS = EngineSettings(max_num_requests=2)
WAIT_S = 20.0
"""Bound on any wait (a busy 2-core machine); the behaviours take a fraction of it."""
LONG = {"prompt": [5, 6, 7], "max_tokens": 200, "seed": 1}
"""A completion that runs many steps (the tiny engine holds 256 positions)."""


@dataclass
class Running:
    server: Any
    url: str
    host: str
    port: int

    def health(self) -> dict[str, Any]:
        return httpx.get(f"{self.url}/health", timeout=WAIT_S).json()  # type: ignore[no-any-return]


@contextmanager
def running_server() -> Iterator[Running]:
    server, sock, url = prepare(SETTINGS, ServeOptions(port=0, batch_window_s=0.0, limits=LIMITS))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + WAIT_S
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        host, port = sock.getsockname()[:2]
        yield Running(server, url, host, port)
    finally:
        server.should_exit = True  # what uvicorn's SIGTERM and SIGINT handlers do
        thread.join(timeout=WAIT_S)
        sock.close()
        assert not thread.is_alive()


@pytest.fixture(scope="module")
def served() -> Iterator[Running]:
    with running_server() as running:
        yield running


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` within WAIT_S (EOF or a reset)."""
    sock.settimeout(WAIT_S)
    try:
        return sock.recv(4096) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _wait_for(condition: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "not within the wait bound"
        time.sleep(0.05)


def test_a_connection_without_a_whole_request_is_closed_at_the_deadline(served: Running) -> None:
    silent = socket.create_connection((served.host, served.port))
    headers = socket.create_connection((served.host, served.port))
    headers.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: a")  # and never the rest
    body = socket.create_connection((served.host, served.port))
    body.sendall(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 100\r\n\r\n{"prompt": '  # 11 of the 100 bytes promised
    )
    try:
        for sock in (silent, headers, body):
            assert _closed_by_server(sock)
    finally:
        for sock in (silent, headers, body):
            sock.close()
    assert httpx.get(f"{served.url}/health", timeout=WAIT_S).status_code == 200


def test_past_the_connection_cap_a_client_reads_a_503_and_is_served_once_idle_ones_go(
    served: Running,
) -> None:
    idle = [socket.create_connection((served.host, served.port)) for _ in range(12)]
    try:
        refused = httpx.get(f"{served.url}/health", timeout=WAIT_S)
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["message"].startswith("the server has too many open")
        # The idle ones reach the request deadline; then a client is served again.
        _wait_for(lambda: httpx.get(f"{served.url}/health", timeout=WAIT_S).status_code == 200)
    finally:
        for sock in idle:
            sock.close()


async def _post_all(url: str, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=len(bodies))
    async with httpx.AsyncClient(base_url=url, timeout=WAIT_S * 3, limits=limits) as client:
        return list(await asyncio.gather(*(client.post("/v1/completions", json=b) for b in bodies)))


def test_past_the_queue_bound_a_completion_is_a_429_with_retry_after(served: Running) -> None:
    # 2 run (max_num_requests) and 2 wait (max_queued): of 8 sent together, 4 are refused.
    bodies = [{**LONG, "max_tokens": 60, "seed": i} for i in range(8)]
    answers = asyncio.run(_post_all(served.url, bodies))
    statuses = sorted(a.status_code for a in answers)
    assert statuses.count(200) >= 4 and set(statuses) == {200, 429}, statuses
    busy = next(a for a in answers if a.status_code == 429)
    assert busy.headers["retry-after"] == "1"
    assert busy.json()["error"]["type"] == "rate_limit_error"
    served_ = [a for a in answers if a.status_code == 200]
    assert all(len(a.json()["choices"][0]["text"]) > 0 for a in served_)


def test_completions_of_clients_that_hung_up_are_dropped(served: Running) -> None:
    before = served.health()

    async def hang_up(i: int) -> None:
        _, writer = await asyncio.open_connection(served.host, served.port)
        body = json.dumps({**LONG, "seed": 100 + i}).encode()
        writer.write(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.close()  # gone before any 200-token completion could finish

    async def all_hang_up() -> None:
        await asyncio.gather(*(hang_up(i) for i in range(6)))

    asyncio.run(all_hang_up())
    _wait_for(lambda: served.health()["in_flight"] == 0)
    after = served.health()
    dropped = after["cancelled"] - before["cancelled"]
    refused = after["refused_busy"] - before["refused_busy"]
    assert dropped >= 1 and dropped + refused == 6, (before, after)
    assert after["completions"] == before["completions"]  # none of them was served
    small = httpx.post(
        f"{served.url}/v1/completions",
        json={"prompt": [1, 2, 3], "max_tokens": 4, "seed": 1, "return_token_ids": True},
        timeout=WAIT_S,
    )
    assert small.status_code == 200 and len(small.json()["choices"][0]["token_ids"]) == 4


def test_a_prompt_with_a_lone_surrogate_is_a_400_naming_it(served: Running) -> None:
    answer = httpx.post(
        f"{served.url}/v1/completions",
        content=b'{"prompt": "a\\ud800b", "max_tokens": 2}',
        headers={"content-type": "application/json"},
        timeout=WAIT_S,
    )
    assert answer.status_code == 400
    assert "lone surrogate" in answer.json()["error"]["message"]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def test_a_shutdown_answers_every_request_in_flight() -> None:
    records = _Records()
    try:
        answers = _shutdown_with_requests_in_flight(records)
    finally:
        logging.getLogger("uvicorn.error").removeHandler(records)
    for answer in answers:
        if answer.status_code == 200:
            assert len(answer.json()["choices"][0]["text"]) > 0
        else:
            assert answer.status_code == 503, answer.text
            assert answer.headers["retry-after"] == "1"
            assert answer.json()["error"]["message"].startswith("the server is shutting down")
    logged = "\n".join(records.lines)
    assert "Shutting down" in logged  # the handler heard uvicorn
    assert "Traceback" not in logged and "CancelledError" not in logged
    assert "Cancel" not in logged  # uvicorn cancels tasks only past its grace period


def _shutdown_with_requests_in_flight(records: logging.Handler) -> list[httpx.Response]:
    with running_server() as running:
        # uvicorn configured its loggers (they do not propagate to the root) when the server
        # was built: listen on its error logger now, its shutdown lines included.
        logger = logging.getLogger("uvicorn.error")
        logger.addHandler(records)
        logger.setLevel(logging.INFO)

        async def in_flight_then_shutdown() -> list[httpx.Response]:
            sent = asyncio.ensure_future(
                _post_all(running.url, [{**LONG, "seed": i} for i in range(4)])
            )
            _wait_for_in_flight = time.monotonic() + WAIT_S
            while running.health()["in_flight"] < 4:
                assert time.monotonic() < _wait_for_in_flight
                await asyncio.sleep(0.02)
            running.server.should_exit = True  # as uvicorn's SIGTERM handler does
            return await sent

        return asyncio.run(in_flight_then_shutdown())
