"""Requests per second through the ``openai`` adapter, and its own overhead per request.

    python benchmarks/bench_http.py [--requests N] [--rounds R] [--concurrency C]

Two servers, each started here as a subprocess on 127.0.0.1 (a free port) and stopped at
the end:

1. ``specseed serve`` (the reference engine, tiny model, CPU): requests/second of one run
   plan of N seeded requests (16 tokens each) sent through the adapter (``OpenAIEngine``:
   trace header, traffic replay, parsing), beside a bare ``httpx.AsyncClient`` posting the
   same bodies with the same concurrency. The engine's time dominates here.
2. a stub server that answers every completion at once with a canned body: the same two
   clients, so the difference is the adapter's own cost per request (its ratio to the bare
   client, and microseconds per request), in wall time and in the client process's CPU
   time (which the rest of a shared machine does not inflate).

Figures are the best of ``--rounds``, the two clients alternating (the machine may be
shared); nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from perf_page import add_write_docs, docs_section

from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
from specseed.engine_adapters.openai.adapter import OpenAIEngine
from specseed.engine_adapters.openai.client import completion_body
from specseed.engine_adapters.openai.options import OpenAIOptions
from specseed.engine_adapters.openai.traffic import _sampling
from specseed.traces.records import TraceRecorder

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_TOKENS = 16
CANNED = (
    b'{"id":"cmpl-0","object":"text_completion","created":0,"model":"stub","choices":'
    b'[{"index":0,"text":"","token_ids":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],'
    b'"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":16,'
    b'"total_tokens":19}}'
)
STUB_OPENAPI = (
    b'{"paths":{"/v1/completions":{"post":{"requestBody":{"content":{"application/json":'
    b'{"schema":{"properties":{"return_token_ids":{}}}}}}}}}}'
)


def stub_app() -> object:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def completions(request: Request) -> Response:
        await request.body()
        return Response(CANNED, media_type="application/json")

    async def models(request: Request) -> Response:
        return Response(b'{"object":"list","data":[{"id":"stub"}]}', media_type="application/json")

    async def openapi(request: Request) -> Response:
        return Response(STUB_OPENAPI, media_type="application/json")

    return Starlette(
        routes=[
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/models", models),
            Route("/openapi.json", openapi),
            Route("/health", models),
        ]
    )


def run_stub(port_file: str) -> None:
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    Path(port_file).write_text(str(sock.getsockname()[1]))
    uvicorn.Server(uvicorn.Config(stub_app(), log_level="error")).run(sockets=[sock])  # type: ignore[arg-type]


@contextmanager
def server(command: list[str], url_from: Path | None = None) -> Iterator[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        deadline = time.monotonic() + 120
        if url_from is None:
            assert process.stdout is not None
            url = process.stdout.readline().strip()
        else:
            while not url_from.exists() or not url_from.read_text():
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("stub server did not start")
                time.sleep(0.05)
            url = f"http://127.0.0.1:{url_from.read_text()}"
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def plan(count: int, settings: EngineSettings) -> RunPlan:
    requests = tuple(
        RequestPlan(f"r{i}", (5 + i % 7, 6, 7 + i % 11), 1000 + i, 0.9, 0, 1.0, MAX_TOKENS)
        for i in range(count)
    )
    return RunPlan("bench", "http", settings, requests)


Timing = tuple[float, float]
"""(wall seconds, client-process CPU seconds) of one round."""


def through_adapter(engine: OpenAIEngine, run: RunPlan) -> Timing:
    started, cpu = time.perf_counter(), time.process_time()
    trace = engine.run(run, TraceRecorder())
    assert trace.end.failure is None, trace.end.failure
    assert len(trace.end.outputs) == len(run.requests)
    return time.perf_counter() - started, time.process_time() - cpu


async def _bare(url: str, model: str, run: RunPlan, concurrency: int) -> None:
    limit = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:

        async def one(request: RequestPlan) -> list[int]:
            body = completion_body(
                _sampling(request),
                model=model,
                dialect="return_token_ids",
                extra={"ignore_eos": True},
            )
            async with limit:
                response = await client.post("/v1/completions", json=body)
            response.raise_for_status()
            return list(response.json()["choices"][0]["token_ids"])

        results = await asyncio.gather(*(one(r) for r in run.requests))
    assert len(results) == len(run.requests)


def bare_httpx(url: str, model: str, run: RunPlan, concurrency: int) -> Timing:
    started, cpu = time.perf_counter(), time.process_time()
    asyncio.run(_bare(url, model, run, concurrency))
    return time.perf_counter() - started, time.process_time() - cpu


def measure(url: str, count: int, rounds: int, concurrency: int) -> tuple[Timing, Timing]:
    options = OpenAIOptions(base_url=url, concurrency=concurrency, arrival_step_s=0.0)
    settings = EngineSettings(name="openai", options=options)
    engine = OpenAIEngine(settings)
    model = engine.main.model
    run = plan(count, settings)
    through_adapter(engine, run)  # warm both paths (connections, the engine's first steps)
    bare_httpx(url, model, run, concurrency)
    # Alternate the two so that a burst of load on the shared machine hits both alike.
    adapter_times, bare_times = [], []
    for _ in range(rounds):
        adapter_times.append(through_adapter(engine, run))
        bare_times.append(bare_httpx(url, model, run, concurrency))
    # Best wall time and best CPU time of each client (CPU time is what the client itself
    # spends, whatever else the shared machine is doing).
    best = lambda times: (min(t[0] for t in times), min(t[1] for t in times))  # noqa: E731
    return best(adapter_times), best(bare_times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--stub-requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--stub-server", help=argparse.SUPPRESS)
    add_write_docs(parser)
    args = parser.parse_args()
    if args.stub_server:
        run_stub(args.stub_server)
        return

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"python {platform.python_version()}, httpx {httpx.__version__}"
    )
    serve = [sys.executable, "-m", "specseed", "serve", "--port", "0"]
    with server(serve) as url:
        adapter, bare = measure(url, args.requests, args.rounds, args.concurrency)
    report(
        f"specseed serve, {args.requests} seeded requests x {MAX_TOKENS} tokens",
        args,
        args.requests,
        adapter,
        bare,
    )

    port_file = Path(f"/tmp/specseed-bench-stub-{os.getpid()}")
    port_file.unlink(missing_ok=True)
    stub = [sys.executable, __file__, "--stub-server", str(port_file)]
    try:
        with server(stub, url_from=port_file) as url:
            adapter, bare = measure(url, args.stub_requests, args.rounds, args.concurrency)
    finally:
        port_file.unlink(missing_ok=True)
    report(
        f"stub server (canned answer), {args.stub_requests} requests",
        args,
        args.stub_requests,
        adapter,
        bare,
    )


def report(title: str, args: argparse.Namespace, n: int, adapter: Timing, bare: Timing) -> None:
    print(f"\n{title}, concurrency {args.concurrency}:")
    print("  client      wall s  requests/s  wall us/req  client CPU us/req")
    for name, (wall, cpu) in (("adapter", adapter), ("bare httpx", bare)):
        print(
            f"  {name:10} {wall:7.3f} {n / wall:11.1f} {wall / n * 1e6:12.1f} {cpu / n * 1e6:18.1f}"
        )
    print(
        f"  adapter/bare: wall {adapter[0] / bare[0]:.3f}, client CPU {adapter[1] / bare[1]:.3f} "
        f"({(adapter[1] - bare[1]) / n * 1e6:+.1f} us CPU per request)"
    )


if __name__ == "__main__":
    with docs_section(__file__):
        main()
