"""The completion client against servers that attack it (``hostile.py``): each behaviour
ends in a typed error with a message, in bounded time and memory, never a hang or a
traceback. The bounds asserted are generous multiples of the configured limits."""

from __future__ import annotations

import asyncio
import json
import time
import tracemalloc
import zlib

import pytest

from specseed.engine_adapters.openai.client import (
    AUTH_HINT,
    ClientLimits,
    CompletionClient,
    HttpEngineError,
    MalformedResponse,
    RequestRejected,
    SamplingRequest,
    ServerUnavailable,
    detect_dialect,
)
from tests.engine_adapters.openai.hostile import (
    answer,
    endless_body,
    hostile_server,
    slow_headers,
    trickle_body,
)

LIMITS = ClientLimits(
    retries=0, request_timeout_s=1.0, connect_timeout_s=1.0, max_response_bytes=1 << 20
)
REQUEST = SamplingRequest((1, 2, 3), 7, 1.0, 0, 1.0, 4)


def _complete(url: str, limits: ClientLimits = LIMITS) -> object:
    async def go() -> object:
        async with CompletionClient(url, limits=limits) as client:
            return await client.complete(REQUEST, model="m", dialect="return_token_ids")

    return asyncio.run(asyncio.wait_for(go(), timeout=30))


def _error(behaviour, limits: ClientLimits = LIMITS) -> HttpEngineError:  # type: ignore[no-untyped-def]
    with hostile_server(behaviour) as server, pytest.raises(HttpEngineError) as caught:
        _complete(server.url, limits)
    return caught.value


@pytest.mark.parametrize("behaviour", [trickle_body, slow_headers], ids=["body", "headers"])
def test_a_trickle_ends_at_the_request_deadline(behaviour) -> None:  # type: ignore[no-untyped-def]
    # Each byte comes 20 ms after the last, far inside any between-bytes timeout; only a
    # deadline on the whole request ends it. 10 kB at 20 ms a byte would take 200 s.
    started = time.monotonic()
    error = _error(behaviour)
    assert isinstance(error, ServerUnavailable)
    assert "request_timeout_s" in error.message
    assert time.monotonic() - started < 10


def test_an_endless_body_is_cut_off_at_the_size_cap() -> None:
    error = _error(
        endless_body, ClientLimits(retries=0, request_timeout_s=20.0, max_response_bytes=1 << 20)
    )
    assert isinstance(error, MalformedResponse)
    assert "longer than 1048576 bytes" in error.message


def test_deeply_nested_json_is_malformed_not_a_recursion_error() -> None:
    error = _error(answer("200 OK", b"[" * 200_000 + b"]" * 200_000))
    assert isinstance(error, MalformedResponse)
    assert "nests too deep" in error.message


def _completion(choices: object) -> bytes:
    return json.dumps({"choices": choices}).encode()


def _choice(token_ids: object) -> dict[str, object]:
    return {"index": 0, "token_ids": token_ids, "finish_reason": "length"}


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"<html>gateway</html>", "not JSON"),
        (b"\xff\xfe not utf-8", "not JSON"),
        (b'{"choices": [{"token_ids": [NaN]}]}', "valid integer"),
        (_completion([_choice(["1", "2"])]), "valid integer"),
        (_completion([_choice([1.0])]), "valid integer"),
        (_completion([_choice([True])]), "valid integer"),
        (_completion([_choice([2**40])]), "less than"),
        (_completion([_choice([-1])]), "greater than or equal"),
        (b'{"choices": [{"token_ids": [' + b"9" * 5000 + b"]}]}", "not JSON"),
        (_completion([_choice("1 2 3")]), "valid list"),
        (_completion({"0": _choice([1])}), "valid list"),
        (_completion([_choice([1]), _choice([2])]), "2 choices"),
        (_completion([]), "no choices"),
        (b'{"id": "x"}', "choices"),
        (b"[1, 2]", "valid dictionary"),
    ],
    ids=[
        "html",
        "not-utf8",
        "nan",
        "strings",
        "floats",
        "bools",
        "huge",
        "negative",
        "5000-digits",
        "string-ids",
        "dict-choices",
        "two-choices",
        "no-choices",
        "missing-choices",
        "array-body",
    ],
)
def test_wrong_shapes_are_named(body: bytes, says: str) -> None:
    error = _error(answer("200 OK", body))
    assert isinstance(error, MalformedResponse)
    assert says in error.message


def test_a_redirect_is_not_followed() -> None:
    with hostile_server(answer("200 OK", _completion([_choice([5])]))) as target:
        redirect = answer("302 Found", b"", f"Location: {target.url}/v1/completions\r\n")
        error = _error(redirect)
        assert target.requests == 0  # the other host never saw the request (or the key)
    assert isinstance(error, RequestRejected) and error.status == 302
    assert "redirects are not followed" in error.message


@pytest.mark.parametrize("status", ["401 Unauthorized", "403 Forbidden"])
def test_401_and_403_say_check_the_key(status: str) -> None:
    body = json.dumps({"error": {"message": "bad key"}}).encode()
    with hostile_server(answer(status, body)) as server:

        async def go() -> object:
            async with CompletionClient(server.url, limits=LIMITS) as client:
                return await detect_dialect(client, "m")

        with pytest.raises(RequestRejected) as caught:
            asyncio.run(go())
    assert caught.value.hint == AUTH_HINT
    assert "bad key" in caught.value.message


def test_control_characters_in_server_errors_are_escaped() -> None:
    body = json.dumps({"error": {"message": "boom\x1b]0;owned\x07\x1b[2J" + "x" * 5000}}).encode()
    error = _error(answer("400 Bad Request", body))
    assert "\x1b" not in error.message and "\x07" not in error.message
    assert "\\x1b]0;owned\\x07" in error.message
    assert len(error.message) < 500


def _gzip_of_zeros(mib: int) -> bytes:
    """``mib`` MiB of zeros gzip-compressed, built 1 MiB at a time (about 1 KB per MiB)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1 << 20)
    return b"".join([compressor.compress(zeros) for _ in range(mib)] + [compressor.flush()])


def test_a_gzip_bomb_is_cut_off_at_the_cap_on_decoded_bytes_in_bounded_memory() -> None:
    # 40 KB on the wire, 40 MiB once decoded: the cap must count what the body becomes, and
    # no single network read may expand to more than the cap.
    bomb = _gzip_of_zeros(40)
    assert len(bomb) < 100_000
    limits = ClientLimits(retries=0, request_timeout_s=20.0, max_response_bytes=1 << 20)
    tracemalloc.start()
    try:
        error = _error(answer("200 OK", bomb, "Content-Encoding: gzip\r\n"), limits)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(error, MalformedResponse)
    assert "longer than 1048576 bytes once decoded" in error.message
    assert peak < 4 * (1 << 20) + (4 << 20), f"peak {peak >> 20} MiB under a 1 MiB cap"


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "x-gzip"])
def test_a_compressed_answer_under_the_cap_is_decoded(encoding: str) -> None:
    payload = json.dumps(
        {"choices": [{"token_ids": [5, 6, 7, 8], "finish_reason": "length"}]}
    ).encode()
    wbits = zlib.MAX_WBITS if encoding == "deflate" else 16 + zlib.MAX_WBITS
    compressor = zlib.compressobj(6, zlib.DEFLATED, wbits)
    body = compressor.compress(payload) + compressor.flush()
    with hostile_server(answer("200 OK", body, f"Content-Encoding: {encoding}\r\n")) as server:
        completion = _complete(server.url)
    assert completion.token_ids == (5, 6, 7, 8)  # type: ignore[attr-defined]


def test_an_encoding_the_client_cannot_bound_is_refused() -> None:
    error = _error(answer("200 OK", b"\x00" * 64, "Content-Encoding: br\r\n"))
    assert isinstance(error, MalformedResponse)
    assert "Content-Encoding 'br'" in error.message
