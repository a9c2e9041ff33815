"""``specseed serve``'s application in-process: the API, errors, auth, and that it serves the
reference engine's exact tokens."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
from specseed.engine_adapters.reference.adapter import ReferenceEngine
from specseed.engine_adapters.reference.live import LiveEngine
from specseed.server.app import create_app
from specseed.server.protocol import decode_text
from specseed.traces.records import TraceRecorder

SETTINGS = EngineSettings()


@pytest.fixture(scope="module")
def engine() -> ReferenceEngine:
    return ReferenceEngine(SETTINGS)


@pytest.fixture
def client(engine: ReferenceEngine) -> Iterator[TestClient]:
    app = create_app(LiveEngine(engine, SETTINGS, batch_window_s=0.0), model_name="m")
    with TestClient(app) as test_client:
        yield test_client


def _complete(client: TestClient, **body: object) -> dict:
    response = client.post("/v1/completions", json={"max_tokens": 6, **body})
    assert response.status_code == 200, response.text
    return response.json()


def test_token_ids_in_both_dialects_and_equal_to_the_engine_in_process(
    client: TestClient, engine: ReferenceEngine
) -> None:
    vllm_style = _complete(client, prompt=[5, 6, 7], seed=11, return_token_ids=True)
    trtllm_style = _complete(client, prompt=[5, 6, 7], seed=11, detokenize=False)
    plain = _complete(client, prompt=[5, 6, 7], seed=11)
    choice = vllm_style["choices"][0]
    assert choice["prompt_token_ids"] == [5, 6, 7]
    assert trtllm_style["choices"][0]["token_ids"] == choice["token_ids"]
    assert "token_ids" not in plain["choices"][0]
    assert plain["choices"][0]["text"] == decode_text(choice["token_ids"])
    # The same request on the engine in-process, on a fresh engine: the same tokens.
    request = RequestPlan("r", (5, 6, 7), 11, 1.0, 0, 1.0, 6)
    trace = engine.run(RunPlan("s", "r", SETTINGS, (request,)), TraceRecorder())
    assert tuple(choice["token_ids"]) == trace.end.outputs["r"]


def test_uint64_seed_and_its_int64_bits_are_one_seed(client: TestClient) -> None:
    big = (1 << 64) - 59
    a = _complete(client, prompt="same seed", seed=big, return_token_ids=True)
    b = _complete(client, prompt="same seed", seed=big - (1 << 64), return_token_ids=True)
    assert a["choices"][0]["token_ids"] == b["choices"][0]["token_ids"]


def test_models_and_health(client: TestClient) -> None:
    assert [m["id"] for m in client.get("/v1/models").json()["data"]] == ["m"]
    health = client.get("/health").json()
    assert health["status"] == "ok"
    schema = client.get("/openapi.json").json()
    assert "return_token_ids" in schema["components"]["schemas"]["CompletionRequest"]["properties"]


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"prompt": [1, 2, 99999]}, 400, "outside the vocabulary"),
        ({"prompt": []}, 400, "prompt is empty"),
        ({"prompt": [1], "max_tokens": "many"}, 400, "max_tokens"),
        ({"prompt": [1], "seed": 1 << 64}, 400, "seed"),
        ({"prompt": [1], "stream": True}, 400, "streaming"),
        ({"prompt": [1], "n": 17}, 400, "n"),
        ({"prompt": [1], "model": "other"}, 404, "does not exist"),
        ({}, 400, "prompt"),
    ],
)
def test_bad_requests_get_openai_errors(
    client: TestClient, body: dict, status: int, says: str
) -> None:
    response = client.post("/v1/completions", json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert says in error["message"]
    assert error["code"] == status


def test_api_key(engine: ReferenceEngine) -> None:
    app = create_app(LiveEngine(engine, SETTINGS), api_key="s3cret")
    with TestClient(app) as client:
        assert client.get("/health").status_code == 200  # probes need no key
        assert client.get("/v1/models").status_code == 401
        wrong = client.get("/v1/models", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert "API key" in wrong.json()["error"]["message"]
        right = client.get("/v1/models", headers={"Authorization": "Bearer s3cret"})
        assert right.status_code == 200


def test_an_engine_step_that_raises_fails_its_requests_and_the_server_goes_on(
    engine: ReferenceEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specseed.engine_adapters.reference import adapter as engine_module

    real = engine_module._EngineRun._compute
    calls = {"n": 0}

    def crash_once(self, rows):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            raise IndexError("index 9 is out of bounds for dimension 0 with size 8")
        return real(self, rows)

    monkeypatch.setattr(engine_module._EngineRun, "_compute", crash_once)
    live = LiveEngine(engine, SETTINGS, batch_window_s=0.0)
    with TestClient(create_app(live)) as client:
        failed = client.post("/v1/completions", json={"prompt": [1, 2], "max_tokens": 3})
        assert failed.status_code == 500
        assert "IndexError: index 9 is out of bounds" in failed.json()["error"]["message"]
        again = client.post("/v1/completions", json={"prompt": [1, 2], "max_tokens": 3})
        assert again.status_code == 200 and len(again.json()["choices"][0]["text"]) > 0
        assert client.get("/health").json()["engine_failures"] == 1


def test_requests_sent_together_start_together_however_slowly_they_arrive(
    engine: ReferenceEngine,
) -> None:
    # Over HTTP a server's batches are all the audit can shape: four requests a client sent
    # together but that reach an idle engine 30 ms apart (a loaded machine) must still start
    # in one step, in the order they came. A window counted from the first arrival (50 ms)
    # split them, and a batch that splits with the load gives another batch each audit.
    import threading
    import time

    live = LiveEngine(engine, SETTINGS, batch_window_s=0.05)
    done: list[str] = []
    finished = threading.Event()

    def deliver(name: str) -> object:
        def record(_result: object) -> None:
            done.append(name)
            if len(done) == 4:
                finished.set()

        return record

    live.start()
    try:
        for i in range(4):
            live.submit(
                RequestPlan(f"q{i}", (5, 6, 7 + i), 11 + i, 1.0, 0, 1.0, 3), deliver(f"q{i}")
            )  # type: ignore[arg-type]
            time.sleep(0.03)
        assert finished.wait(60)
    finally:
        live.stop()
    assert live.largest_batch == 4
