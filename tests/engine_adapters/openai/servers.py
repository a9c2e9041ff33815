"""Servers for the HTTP tests: ``specseed serve`` as a real subprocess or on a thread of the
test's process, and tiny in-process ASGI apps (rewriting proxies, a malformed server)
under uvicorn in a thread.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

SRC = Path(__file__).resolve().parents[3] / "src"
FAST = {"retries": 1, "backoff_s": 0.01, "max_backoff_s": 0.05, "request_timeout_s": 60}
"""The openai adapter's options for servers on this machine: one retry, short backoffs."""
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
def specseed_serve_here(model_yaml: str, batch_window_s: float = 0.2) -> Iterator[str]:
    """``specseed serve MODEL_YAML --port 0`` on a thread of this process: the server the
    command runs (``server.launch.prepare``: the engine, the app, uvicorn; the default
    gathering window unless ``batch_window_s``), without a second interpreter importing
    torch; yields its URL."""
    from specseed.plan.resolve import resolve_audit
    from specseed.server.launch import ServeOptions, prepare

    settings = resolve_audit(Path(model_yaml), scenarios=False).engine
    server, sock, url = prepare(settings, ServeOptions(port=0, batch_window_s=batch_window_s))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_healthy(url, time.monotonic() + START_TIMEOUT_S)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


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


def rewriting_proxy(
    upstream: str,
    request: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    answer: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> object:
    """A gateway that forwards everything to ``upstream``, passing each completion request's
    JSON body through ``request`` and each successful completion's JSON through ``answer``."""
    import json

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def forward(incoming: Request) -> Response:
        body = await incoming.body()
        completion = incoming.url.path == "/v1/completions"
        if completion and request is not None:
            body = json.dumps(request(json.loads(body))).encode()
        async with httpx.AsyncClient(base_url=upstream, timeout=60) as client:
            reply = await client.request(
                incoming.method,
                incoming.url.path,
                content=body,
                headers={"content-type": "application/json"},
            )
        content = reply.content
        if completion and answer is not None and reply.status_code == 200:
            content = json.dumps(answer(reply.json())).encode()
        return Response(content, reply.status_code, media_type="application/json")

    return Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST"])])


def seed_dropping_proxy(upstream: str) -> object:
    """A gateway that forwards everything to ``upstream`` but drops ``seed`` from completions."""

    def drop_seed(body: dict[str, Any]) -> dict[str, Any]:
        body.pop("seed", None)
        return body

    return rewriting_proxy(upstream, request=drop_seed)


@contextmanager
def reference_server(max_draft_len: int, defects: tuple[str, ...] = ()) -> Iterator[str]:
    """The reference engine (``defects`` planted) served as ``specseed serve`` serves it, on a
    thread of this process, gathering no bursts; yields its URL."""
    from specseed.engine_adapters.base import EngineSettings
    from specseed.engine_adapters.reference.adapter import ReferenceEngine
    from specseed.engine_adapters.reference.live import LiveEngine
    from specseed.engine_adapters.reference.options import ReferenceOptions
    from specseed.server.app import create_app

    settings = EngineSettings(
        max_draft_len=max_draft_len, options=ReferenceOptions(defects=list(defects))
    )
    live = LiveEngine(ReferenceEngine(settings), settings, batch_window_s=0.0)
    live.start()
    try:
        with asgi_server(create_app(live, model_name="m")) as url:
            yield url
    finally:
        live.stop()


def malformed_server(kind: str) -> object:
    """A server that speaks the OpenAI API badly, in one of several ways."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "bad"}]})

    async def openapi(request: Request) -> Response:
        schema = {
            "paths": {
                "/v1/completions": {
                    "post": {
                        "requestBody": {
                            "content": {
                                "application/json": {
                                    "schema": {"properties": {"return_token_ids": {}}}
                                }
                            }
                        }
                    }
                }
            }
        }
        return JSONResponse(schema)

    async def completions(request: Request) -> Response:
        if kind == "no-token-ids":
            return JSONResponse({"choices": [{"index": 0, "text": "hello"}]})
        if kind == "not-json":
            return PlainTextResponse("<html>502 from the gateway</html>")
        if kind == "always-500":
            return JSONResponse({"error": {"message": "engine crashed"}}, status_code=500)
        if kind == "always-400":
            return JSONResponse({"error": {"message": "bad request"}}, status_code=400)
        raise AssertionError(kind)

    routes = [
        Route("/v1/models", models),
        Route("/v1/completions", completions, methods=["POST"]),
    ]
    if kind != "no-token-ids":  # that one has no schema: the client must probe
        routes.append(Route("/openapi.json", openapi))
    return Starlette(routes=routes)


def _openapi_with_token_ids() -> dict[str, object]:
    body = {"application/json": {"schema": {"properties": {"return_token_ids": {}}}}}
    return {"paths": {"/v1/completions": {"post": {"requestBody": {"content": body}}}}}


@contextmanager
def dying_server(max_in_flight: int) -> Iterator[str]:
    """A server that serves completions (token ids a function of prompt, seed and position)
    until more than ``max_in_flight`` requests are in flight at once: then, like an engine
    core that crashed on a batch it could not hold taking ``vllm serve`` down with it, it
    answers those with HTTP 500 and stops listening. Yields its URL."""
    import asyncio

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    state = {"in_flight": 0, "dead": False}
    server: uvicorn.Server | None = None

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "dies"}]})

    async def openapi(request: Request) -> Response:
        return JSONResponse(_openapi_with_token_ids())

    async def completions(request: Request) -> Response:
        body = await request.json()
        state["in_flight"] += 1
        try:
            await asyncio.sleep(0.05)  # a burst arrives together
            if state["in_flight"] > max_in_flight or state["dead"]:
                state["dead"] = True
                assert server is not None
                server.should_exit = True  # the process goes: nothing listens any more
                # Answer once uvicorn's shutdown has closed the listening socket (its first
                # step): a client's next look finds nothing there, as after a process exit.
                await asyncio.sleep(0.3)
                return JSONResponse({"error": {"message": "engine core died"}}, status_code=500)
        finally:
            state["in_flight"] -= 1
        prompt = body["prompt"] if isinstance(body["prompt"], list) else [len(body["prompt"])]
        seed = body.get("seed") or 0
        ids = [(sum(prompt) + seed + 7 * i) % 500 for i in range(body["max_tokens"])]
        return JSONResponse(
            {"choices": [{"index": 0, "token_ids": ids, "finish_reason": "length"}]}
        )

    app = Starlette(
        routes=[
            Route("/v1/models", models),
            Route("/openapi.json", openapi),
            Route("/v1/completions", completions, methods=["POST"]),
        ]
    )
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="off"))  # type: ignore[arg-type]
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
