"""Knob defects the reference engine does not plant, put between specseed and a correct
speculative ``specseed serve`` by a rewriting gateway on loopback: each is caught by the
built-in scenario that reaches it and named by its evidence, as one root cause. The K = 0
server behind ``variants`` is reached directly, as a deployment that broke only its
speculative servers would be."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from specseed.checks.attribution import root_causes
from specseed.plan.planning import plan_audit
from specseed.run.execute import run_audit
from specseed.run.results import AuditResult
from specseed.scenarios.schema import AuditConfig, EngineConfig
from tests.engine_adapters.openai.servers import (
    FAST,
    asgi_server,
    reference_server,
    rewriting_proxy,
)

pytestmark = pytest.mark.slow

Body = dict[str, Any]


def drop_penalties(body: Body) -> Body:
    """Every penalty dropped (TensorRT-LLM PR 17701's one-model speculation ignored them)."""
    for knob in ("presence_penalty", "frequency_penalty", "repetition_penalty"):
        body.pop(knob, None)
    return body


def drop_min_p(body: Body) -> Body:
    body.pop("min_p", None)
    return body


def cold_top_k(body: Body) -> Body:
    """A sampled request with a top_k field (the adapter always sends one) decoded at the
    greedy sentinel 1e-5 (TensorRT-LLM PR 19390)."""
    if "top_k" in body and body.get("temperature", 1.0) > 0:
        body["temperature"] = 1e-5
    return body


def drop_n(body: Body) -> Body:
    body.pop("n", None)
    return body


def _reports(answer: Body) -> Iterator[Body]:
    """Each choice's ``logprobs`` object that is there."""
    for choice in answer.get("choices", []):
        if choice.get("logprobs"):
            yield choice["logprobs"]


def zero_logprobs(answer: Body) -> Body:
    """Every reported log-probability 0.0, the top lists' too (llama.cpp issue 27972)."""
    for reported in _reports(answer):
        reported["token_logprobs"] = [0.0 for _ in reported["token_logprobs"]]
        reported["top_logprobs"] = [{k: 0.0 for k in top} for top in reported["top_logprobs"]]
    return answer


def flat_logprobs(answer: Body) -> Body:
    """Each position's reported tokens given one plausible value, uniform over them and the
    rest: probabilities that sum to less than 1, yet are not the target's."""
    for reported in _reports(answer):
        tops = [{k: -math.log(len(top) + 1) for k in top} for top in reported["top_logprobs"]]
        reported["top_logprobs"] = tops
        reported["token_logprobs"] = [-math.log(len(top) + 1) for top in tops]
    return answer


Rewrite = Callable[[Body], Body]


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str]]:
    """(K = 0, K = 3) correct servers, shared by the cases."""
    with reference_server(0) as baseline, reference_server(3) as speculative:
        yield baseline, speculative


def _audit(
    servers: tuple[str, str],
    scenarios: list[str],
    request: Rewrite | None = None,
    answer: Rewrite | None = None,
) -> AuditResult:
    baseline, speculative = servers
    with asgi_server(rewriting_proxy(speculative, request, answer)) as gateway:
        options = {
            "base_url": gateway,
            **FAST,
            "variants": [{"when": {"max_draft_len": 0}, "base_url": baseline}],
        }
        config = AuditConfig(
            engine=EngineConfig(name="openai", options=options), scenarios=scenarios
        )
        return run_audit(config, plan_audit(config, Path.cwd()), Path.cwd())


def test_a_gateway_that_changes_nothing_passes(servers: tuple[str, str]) -> None:
    result = _audit(servers, ["knobs", "losslessness"], lambda b: b, lambda a: a)
    assert not root_causes(result.findings)
    assert {f.status for f in result.findings} <= {"pass", "skip"}


@pytest.mark.parametrize(
    ("scenarios", "request_rewrite", "answer_rewrite", "defect", "evidence"),
    [
        pytest.param(
            ["knobs"],
            drop_penalties,
            None,
            "spec-knobs-dropped",
            "never acted on the speculative path",
            id="penalties-dropped",
        ),
        pytest.param(
            ["knobs"],
            drop_min_p,
            None,
            "spec-knobs-dropped",
            "min-p's min_p held in filters-no-speculation",
            id="min-p-dropped",
        ),
        pytest.param(
            ["knobs"],
            cold_top_k,
            None,
            "unset-temperature-greedy",
            "emitted its greedy twin's tokens",
            id="top-k-greedy",
        ),
        pytest.param(
            ["losslessness"],
            cold_top_k,
            None,
            "unset-temperature-greedy",
            "speculative copies of hot (T=1) emitted one stream",
            id="copies-greedy",
        ),
        pytest.param(
            ["losslessness"],
            None,
            zero_logprobs,
            "fake-logprobs",
            "sound in baseline, without speculation",
            id="logprobs-zero",
        ),
        pytest.param(
            ["knobs"],
            None,
            flat_logprobs,
            "fake-logprobs",
            "in speculative for the same token after the same tokens",
            id="logprobs-flat",
        ),
    ],
)
def test_an_unseen_knob_defect_is_one_cause_named_by_its_evidence(
    servers: tuple[str, str],
    scenarios: list[str],
    request_rewrite: Rewrite | None,
    answer_rewrite: Rewrite | None,
    defect: str,
    evidence: str,
) -> None:
    result = _audit(servers, scenarios, request_rewrite, answer_rewrite)
    causes = root_causes(result.findings)
    assert [c.defect for c in causes] == [defect], [c.label for c in causes]
    whys = [s.why for f in causes[0].findings for s in f.suspects if s.defect == defect]
    assert any(evidence in why for why in whys), whys


def short_logprobs(answer: Body) -> Body:
    """One log-probability fewer than tokens: a reply the adapter cannot read."""
    for reported in _reports(answer):
        for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
            if key in reported:
                reported[key] = reported[key][:-1]
    return answer


@pytest.mark.parametrize(
    ("scenarios", "request_rewrite", "answer_rewrite", "error"),
    [
        pytest.param(["knobs"], drop_n, None, "1 choices where 3 were asked for", id="n-dropped"),
        pytest.param(
            ["knobs", "losslessness"],
            None,
            short_logprobs,
            "logprobs cover",
            id="logprobs-short",
        ),
    ],
)
def test_a_gateway_failing_bursts_of_every_size_is_its_failure_not_a_buffer_size(
    servers: tuple[str, str],
    scenarios: list[str],
    request_rewrite: Rewrite | None,
    answer_rewrite: Rewrite | None,
    error: str,
) -> None:
    """Replies the adapter cannot read, to bursts above max_num_requests (14 rows, 150) and
    within it (2 or 5 rows): the small ones rule the burst size out, in the scenario and
    across scenarios, so there is one cause, the server's error."""
    result = _audit(servers, scenarios, request_rewrite, answer_rewrite)
    causes = root_causes(result.findings)
    assert len(causes) == 1, [c.label for c in causes]
    assert causes[0].defect is None
    assert error in causes[0].label
    assert not any(
        s.defect == "warmup-overflow" for c in causes for f in c.findings for s in f.suspects
    )
