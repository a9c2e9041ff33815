"""``specseed serve`` refuses what it does not serve with a 400 that names it: a list of prompts
(it used to answer it with a raw validation message). Log-probabilities and stop sequences,
once refused the same way, are served (tests/server/test_knobs_served.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from specseed.engine_adapters.base import EngineSettings
from specseed.engine_adapters.reference.adapter import ReferenceEngine
from specseed.engine_adapters.reference.live import LiveEngine
from specseed.server.app import create_app

SETTINGS = EngineSettings()


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    live = LiveEngine(ReferenceEngine(SETTINGS), SETTINGS, batch_window_s=0.0)
    with TestClient(create_app(live, model_name="m")) as test_client:
        yield test_client


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"prompt": ["one", "two"]}, "a list of 2 prompts is not served"),
        ({"prompt": [[1, 2], [3]]}, "a list of 2 prompts is not served"),
    ],
)
def test_unserved_fields_get_a_clear_400(
    client: TestClient,
    extra: dict,
    says: str,
) -> None:
    response = client.post("/v1/completions", json={"prompt": [1, 2], **extra})
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert says in message, message
    assert "Input should be" not in message  # not pydantic's raw union message


def test_their_empty_values_are_served(client: TestClient) -> None:
    body = {"prompt": [1, 2], "max_tokens": 3, "return_token_ids": True}
    for extra in ({}, {"logprobs": None}, {"stop": None}, {"stop": []}):
        response = client.post("/v1/completions", json={**body, **extra})
        assert response.status_code == 200, response.text
        assert len(response.json()["choices"][0]["token_ids"]) == 3
