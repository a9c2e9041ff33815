"""``specseed serve`` against requests that used to break it for everyone: each bad request
gets a 400 or 413 naming its problem, and the requests in flight beside it are served."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from specseed.engine_adapters.base import EngineSettings
from specseed.engine_adapters.reference.adapter import ReferenceEngine
from specseed.engine_adapters.reference.live import LiveEngine
from specseed.server.app import create_app
from specseed.server.protocol import MAX_BODY_BYTES

SETTINGS = EngineSettings()


@pytest.fixture(scope="module")
def engine() -> ReferenceEngine:
    return ReferenceEngine(SETTINGS)


@pytest.fixture
def live(engine: ReferenceEngine) -> LiveEngine:
    # A window long enough that the requests sent together share their first step.
    return LiveEngine(engine, SETTINGS, batch_window_s=0.2)


@pytest.fixture
def client(live: LiveEngine) -> Iterator[TestClient]:
    with TestClient(create_app(live, model_name="m")) as test_client:
        yield test_client


def _post(client: TestClient, body: dict) -> tuple[int, dict]:
    response = client.post("/v1/completions", json=body)
    return response.status_code, response.json()


def test_a_request_past_the_kv_capacity_is_400_and_the_others_are_served(
    client: TestClient, live: LiveEngine
) -> None:
    capacity = live.capacity
    good = {"prompt": [5, 6, 7], "max_tokens": 8, "seed": 1, "return_token_ids": True}
    too_big = {"prompt": [5] * (capacity - 10), "max_tokens": 64, "seed": 2}
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda b: _post(client, b), [good, too_big, good]))
    (s1, a1), (s2, a2), (s3, a3) = answers
    assert s2 == 400, a2
    assert "KV positions" in a2["error"]["message"] and str(capacity) in a2["error"]["message"]
    assert s1 == s3 == 200, (a1, a3)
    assert len(a1["choices"][0]["token_ids"]) == 8
    assert client.get("/health").json()["engine_failures"] == 0


def test_a_request_that_exactly_fits_is_served(client: TestClient, live: LiveEngine) -> None:
    max_tokens = 16
    prompt = [5] * (live.capacity - max_tokens - live.lookahead)
    status, answer = _post(client, {"prompt": prompt, "max_tokens": max_tokens, "seed": 3})
    assert status == 200, answer
    assert client.get("/health").json()["engine_failures"] == 0


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ('"temperature": 1e-300', "temperature: Value error, must be 0 (greedy) or at least"),
        ('"temperature": -1', "temperature: Input should be greater than or equal to 0"),
        ('"temperature": NaN', "temperature: Input should be a finite number"),
        ('"temperature": Infinity', "temperature: Input should be a finite number"),
        ('"top_p": 1e-300', "top_p: Value error, must be at least"),
        ('"top_p": 0', "top_p: Input should be greater than 0"),
        ('"top_p": NaN', "top_p: Input should be a finite number"),
        ('"top_k": 100000000000000000000', "top_k: Input should be less than or equal to"),
        ('"top_k": -5', "top_k: Input should be greater than or equal to -1"),
    ],
)
def test_extreme_sampling_values_are_400_not_a_crashed_step(
    client: TestClient, raw: str, says: str
) -> None:
    content = '{"prompt": [5, 6], "max_tokens": 4, "seed": 1, ' + raw + "}"
    response = client.post(
        "/v1/completions", content=content, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400, response.text
    assert says in response.json()["error"]["message"]
    assert client.get("/health").json()["engine_failures"] == 0


def test_top_k_past_the_vocabulary_means_no_filter(
    client: TestClient, engine: ReferenceEngine
) -> None:
    body = {"prompt": [5, 6], "max_tokens": 6, "seed": 9, "return_token_ids": True}
    plain = _post(client, {**body, "top_k": 0})
    huge = _post(client, {**body, "top_k": engine.vocab_size + 1000})
    assert plain[0] == huge[0] == 200
    assert plain[1]["choices"][0]["token_ids"] == huge[1]["choices"][0]["token_ids"]


def test_a_body_past_the_limit_is_413_declared_or_streamed(client: TestClient) -> None:
    big = b'{"prompt": "' + b"a" * (MAX_BODY_BYTES + 10) + b'"}'
    declared = client.post(
        "/v1/completions", content=big, headers={"content-type": "application/json"}
    )
    assert declared.status_code == 413
    assert "larger than" in declared.json()["error"]["message"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked
        for start in range(0, len(big), 65536):
            yield big[start : start + 65536]

    streamed = client.post(
        "/v1/completions", content=chunks(), headers={"content-type": "application/json"}
    )
    assert streamed.status_code == 413
    ok = client.post("/v1/completions", json={"prompt": [5], "max_tokens": 2})
    assert ok.status_code == 200
