"""The sampling knobs over HTTP: the ``openai`` adapter sends each in OpenAI's (or vLLM's)
name, ``specseed serve`` serves every one, and the ``knobs`` library scenario passes a correct
server and catches a server with a knob defect, naming it; a server that refuses a knob is a
skip quoting it. Both servers run in this process (uvicorn in a thread): no subprocess."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from specseed.checks.attribution import root_causes
from specseed.engine_adapters.openai.client import SamplingRequest, completion_body
from specseed.plan.planning import plan_audit
from specseed.run.execute import run_audit
from specseed.run.results import AuditResult
from specseed.scenarios.schema import AuditConfig, EngineConfig
from tests.engine_adapters.openai.servers import FAST, asgi_server, reference_server

pytestmark = pytest.mark.slow


def test_each_knob_goes_out_in_its_openai_or_vllm_name() -> None:
    knobs = {
        "min_p": 0.1,
        "logit_bias": ((5, -100.0),),
        "presence_penalty": 0.5,
        "frequency_penalty": 0.25,
        "repetition_penalty": 1.2,
        "stop_token_ids": (7,),
        "stop": ("\n",),
        "ignore_eos": False,
        "logprobs": 2,
        "n": 2,
    }
    request = SamplingRequest((1, 2), 3, 1.0, 0, 1.0, 8, knobs=knobs)
    body = completion_body(
        request, model="m", dialect="return_token_ids", extra={"ignore_eos": True}
    )
    assert body["logit_bias"] == {"5": -100.0} and body["stop"] == ["\n"]
    assert body["ignore_eos"] is False  # the request's own value beats the adapter option
    assert body["return_tokens_as_token_ids"] is True
    assert {k: body[k] for k in ("min_p", "logprobs", "n", "stop_token_ids")} == {
        "min_p": 0.1,
        "logprobs": 2,
        "n": 2,
        "stop_token_ids": [7],
    }
    plain = completion_body(
        SamplingRequest((1,), None, 0.0, 0, 1.0, 4), model="m", dialect="return_token_ids"
    )
    assert not set(knobs) & set(plain)  # unset: not sent


def _audit(main: str, baseline: str) -> AuditResult:
    options = {
        "base_url": main,
        **FAST,
        "variants": [{"when": {"max_draft_len": 0}, "base_url": baseline}],
    }
    config = AuditConfig(engine=EngineConfig(name="openai", options=options), scenarios=["knobs"])
    return run_audit(config, plan_audit(config, Path.cwd()), Path.cwd())


@pytest.fixture(scope="module")
def baseline_url() -> Iterator[str]:
    with reference_server(0) as url:
        yield url


def test_a_correct_server_passes_the_knobs_scenario(baseline_url: str) -> None:
    with reference_server(3) as url:
        result = _audit(url, baseline_url)
    statuses = {f.check: f.status for f in result.findings if f.status != "skip"}
    assert set(statuses.values()) == {"pass"}, [
        f.message for f in result.findings if f.status == "fail"
    ]
    for check in (
        "knob-equivalence",
        "stop-boundaries",
        "logprobs-sane",
        "knobs-honoured",
        "children-distinct",
    ):
        assert statuses[check] == "pass"


@pytest.mark.parametrize("defect", ["tokens-past-stop", "spec-knobs-dropped"])
def test_a_server_with_a_knob_defect_is_caught_and_named(baseline_url: str, defect: str) -> None:
    with reference_server(3, (defect,)) as url:
        result = _audit(url, baseline_url)
    causes = root_causes(result.findings)
    assert [c.defect for c in causes] == [defect], [c.label for c in causes]


def _refusing_app() -> Starlette:
    async def models(_: Request) -> Response:
        return JSONResponse({"data": [{"id": "m"}]})

    async def completions(request: Request) -> Response:
        body = await request.json()
        if "min_p" in body or "logit_bias" in body:
            message = "The min_p and logit_bias sampling parameters are not yet supported with speculative decoding"
            return JSONResponse({"error": {"message": message, "code": 400}}, status_code=400)
        count = body["max_tokens"]
        choices = [
            {"index": i, "token_ids": [100 + i] * count, "finish_reason": "length"}
            for i in range(body.get("n", 1))
        ]
        return JSONResponse({"choices": choices})

    return Starlette(
        routes=[
            Route("/v1/models", models),
            Route("/v1/completions", completions, methods=["POST"]),
        ]
    )


def test_a_refused_knob_is_a_skip_quoting_the_server() -> None:
    with ExitStack() as stack:
        url = stack.enter_context(asgi_server(_refusing_app()))
        options = {"base_url": url, "token_ids": "return_token_ids", **FAST}
        config = AuditConfig(
            engine=EngineConfig(name="openai", options=options), scenarios=["knobs"]
        )
        result = run_audit(config, plan_audit(config, Path.cwd()), Path.cwd())
    refused = [f for f in result.findings if "not yet supported" in f.message]
    assert refused and all(f.status == "skip" for f in refused)
    # The refused runs (logit_bias and min_p have runs of their own) are skips, never a
    # failure or an error; the other runs are still judged (this server's constant tokens
    # and missing log-probabilities fail there, as they should).
    filters = {"filters-no-speculation", "filters-speculative"}
    in_filters = [f for f in result.findings if set(f.runs) & filters]
    assert in_filters and all(f.status == "skip" for f in in_filters), in_filters
    assert any(f.status != "skip" and "speculative" in f.runs for f in result.findings)
