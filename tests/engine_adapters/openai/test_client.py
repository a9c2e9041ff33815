"""The completion client: request bodies per dialect, dialect detection, retries, and clear
errors for malformed answers. Servers here are tiny ASGI apps on httpx's in-memory
transport (no sockets), except the refused connection, which is a closed loopback port."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from specseed.engine_adapters.openai.client import (
    ClientLimits,
    CompletionClient,
    MalformedResponse,
    RequestRejected,
    SamplingRequest,
    ServerUnavailable,
    completion_body,
    detect_dialect,
    dialect_from_openapi,
    int64_seed,
)

FAST = ClientLimits(retries=2, backoff_s=0.01, max_backoff_s=0.05, request_timeout_s=5)
REQUEST = SamplingRequest((1, 2, 3), 7, 1.0, 0, 1.0, 4)


def _good(token_ids: list[int]) -> dict:
    return {
        "choices": [{"index": 0, "text": "", "token_ids": token_ids, "finish_reason": "length"}]
    }


def _client(
    handler: Callable[[Request], Response], limits: ClientLimits = FAST
) -> CompletionClient:
    async def endpoint(request: Request) -> Response:
        return handler(request)

    app = Starlette(routes=[Route("/v1/completions", endpoint, methods=["POST"])])
    return CompletionClient("http://server", limits=limits, transport=httpx.ASGITransport(app))


def _run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_bodies_per_dialect() -> None:
    vllm = completion_body(REQUEST, model="m", dialect="return_token_ids")
    assert vllm["return_token_ids"] is True and vllm["top_k"] == -1 and vllm["seed"] == 7
    assert vllm["prompt"] == [1, 2, 3] and vllm["temperature"] == 1.0 and vllm["top_p"] == 1.0
    trt = completion_body(REQUEST, model="m", dialect="detokenize", extra={"ignore_eos": True})
    assert trt["detokenize"] is False and "top_k" not in trt and trt["ignore_eos"] is True
    unseeded = SamplingRequest("text", None, 0.0, 5, 0.9, 4)
    body = completion_body(unseeded, model="m", dialect="detokenize")
    assert "seed" not in body and body["prompt"] == "text" and body["top_k"] == 5


def test_uint64_seeds_go_out_as_their_int64_bits() -> None:
    assert int64_seed(5) == 5
    assert int64_seed((1 << 64) - 1) == -1
    assert int64_seed(-4) == -4
    assert int64_seed(1 << 63) == -(1 << 63)


def _schema(fields: list[str]) -> dict:
    return {
        "paths": {
            "/v1/completions": {
                "post": {
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/CompletionRequest"}
                            }
                        }
                    }
                }
            }
        },
        "components": {"schemas": {"CompletionRequest": {"properties": {f: {} for f in fields}}}},
    }


def test_dialect_from_openapi() -> None:
    assert dialect_from_openapi(_schema(["prompt", "seed", "return_token_ids"])) == (
        "return_token_ids"
    )
    assert dialect_from_openapi(_schema(["prompt", "seed", "detokenize"])) == "detokenize"
    assert dialect_from_openapi(_schema(["prompt", "seed"])) is None
    assert dialect_from_openapi({"openapi": "3.1.0"}) is None
    assert dialect_from_openapi(None) is None


def test_dialect_by_probe_when_there_is_no_openapi() -> None:
    def trtllm_like(request: Request) -> Response:
        return JSONResponse(_good([9]))

    async def detect_with_body_check() -> str:
        seen: list[dict] = []

        async def endpoint(request: Request) -> Response:
            body = await request.json()
            seen.append(body)
            if body.get("detokenize") is False:
                return JSONResponse(_good([9]))
            return JSONResponse({"choices": [{"text": "x"}]})

        app = Starlette(routes=[Route("/v1/completions", endpoint, methods=["POST"])])
        client = CompletionClient("http://s", limits=FAST, transport=httpx.ASGITransport(app))
        async with client:
            found = await detect_dialect(client, "m")
        assert [("return_token_ids" in b, "detokenize" in b) for b in seen] == [
            (True, False),
            (False, True),
        ]
        return f"{found.dialect}/{found.method}"

    assert _run(detect_with_body_check()) == "detokenize/probe"


def test_no_token_ids_in_either_dialect_is_a_clear_error() -> None:
    async def go() -> None:
        async with _client(lambda r: JSONResponse({"choices": [{"text": "hi"}]})) as client:
            await detect_dialect(client, "m")

    with pytest.raises(MalformedResponse, match="no token ids in either dialect"):
        _run(go())


def test_retries_5xx_and_429_then_succeeds() -> None:
    answers = [
        JSONResponse({"error": {"message": "busy"}}, status_code=503),
        JSONResponse({"error": "slow down"}, status_code=429, headers={"Retry-After": "0"}),
        JSONResponse(_good([4, 5])),
    ]

    async def go():  # type: ignore[no-untyped-def]
        async with _client(lambda r: answers.pop(0)) as client:
            return await client.complete(REQUEST, model="m", dialect="return_token_ids")

    completion = _run(go())
    assert completion.token_ids == (4, 5)
    assert completion.attempts == 3


def test_gives_up_after_the_retries_with_the_servers_message() -> None:
    calls = []

    def always_busy(request: Request) -> Response:
        calls.append(1)
        return JSONResponse({"error": {"message": "overloaded"}}, status_code=500)

    async def go() -> None:
        async with _client(always_busy) as client:
            await client.complete(REQUEST, model="m", dialect="return_token_ids")

    with pytest.raises(ServerUnavailable, match=r"HTTP 500: overloaded \(3 attempts\)"):
        _run(go())
    assert len(calls) == 3  # one try and FAST's two retries, no more


def test_4xx_is_not_retried() -> None:
    calls = []

    def refuse(request: Request) -> Response:
        calls.append(1)
        return JSONResponse({"error": {"message": "seed must be an int64"}}, status_code=400)

    async def go() -> None:
        async with _client(refuse) as client:
            await client.complete(REQUEST, model="m", dialect="return_token_ids")

    with pytest.raises(RequestRejected, match=r"HTTP 400.*seed must be an int64"):
        _run(go())
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (PlainTextResponse("<html>gateway</html>"), "not JSON"),
        (JSONResponse({"object": "text_completion"}), "choices"),
        (JSONResponse({"choices": []}), "no choices"),
        (JSONResponse({"choices": [{"text": "no ids"}]}), "no choices\\[0\\].token_ids"),
        (JSONResponse({"choices": [{"token_ids": ["a", "b"]}]}), "token_ids"),
        (JSONResponse(_good([1, 2, 3, 4, 5, 6])), "more than max_tokens"),
        (JSONResponse(_good([-1])), "negative"),
    ],
)
def test_malformed_completions_are_named(answer: Response, says: str) -> None:
    async def go() -> None:
        async with _client(lambda r: answer) as client:
            await client.complete(REQUEST, model="m", dialect="return_token_ids")

    with pytest.raises(MalformedResponse, match=says):
        _run(go())


def test_refused_connection_is_retried_then_reported() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port now.

    async def go() -> None:
        async with CompletionClient(f"http://127.0.0.1:{port}", limits=FAST) as client:
            await client.complete(REQUEST, model="m", dialect="return_token_ids")

    started = time.monotonic()
    with pytest.raises(ServerUnavailable, match=r"ConnectError.*\(3 attempts\)"):
        _run(go())
    assert time.monotonic() - started < 5


def test_api_key_goes_in_the_authorization_header() -> None:
    seen: list[str | None] = []

    async def endpoint(request: Request) -> Response:
        seen.append(request.headers.get("authorization"))
        return JSONResponse(_good([1]))

    async def go() -> None:
        app = Starlette(routes=[Route("/v1/completions", endpoint, methods=["POST"])])
        client = CompletionClient(
            "http://s", api_key="k3y", limits=FAST, transport=httpx.ASGITransport(app)
        )
        async with client:
            await client.complete(REQUEST, model="m", dialect="detokenize")

    _run(go())
    assert seen == ["Bearer k3y"]


def test_the_failures_root_causes_read_as_the_servers_are_the_clients_typed_errors() -> None:
    from specseed.engine_adapters.openai import client
    from specseed.engine_adapters.openai.info import SERVER_FAILURES

    typed = {
        name
        for name, value in vars(client).items()
        if isinstance(value, type)
        and issubclass(value, client.HttpEngineError)
        and value is not client.HttpEngineError
    }
    assert typed == SERVER_FAILURES
