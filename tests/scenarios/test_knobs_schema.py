"""The sampling knobs in scenarios: validated, inherited from defaults, carried by name into
plans and traces (unset ones nowhere), and children of ``n`` listed as requests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specseed.core.errors import ScenarioError
from specseed.engine_adapters.base import EngineSettings, RequestPlan
from specseed.plan.planning import plan_run
from specseed.scenarios.loader import parse_scenario
from specseed.scenarios.schema import KNOB_NAMES, MAX_LOGIT_BIAS
from specseed.traces.records import (
    REQUEST_KNOBS,
    RunEnd,
    TokenLogprob,
    TraceRecorder,
    read_trace,
)

KNOBS = """\
name: knobs
description: every knob
defaults: {temperature: 0.8, min_p: 0.05, presence_penalty: 0.5, stop_token_ids: [7]}
requests:
  a:
    prompt: [1, 2, 3]
    seed: 3
    logit_bias: {5: 2.5, 4: -100}
    frequency_penalty: -0.25
    repetition_penalty: 1.3
    stop: "\\n"
    ignore_eos: true
    logprobs: 2
    n: 3
  b: {prompt: [4], min_p: 0.0}
  c: {prompt: [4], presence_penalty: null}
runs: [{name: r, requests: [a, b, c]}]
"""


def test_knob_names_are_one_list() -> None:
    assert KNOB_NAMES == REQUEST_KNOBS


def test_knobs_resolve_from_defaults_and_reach_the_plan() -> None:
    scenario = parse_scenario(KNOBS, "knobs.yaml")
    plan = plan_run(scenario, scenario.runs[0], EngineSettings())
    a, b, c = plan.requests
    assert a.knobs() == {
        "min_p": 0.05,
        "logit_bias": ((4, -100.0), (5, 2.5)),
        "presence_penalty": 0.5,
        "frequency_penalty": -0.25,
        "repetition_penalty": 1.3,
        "stop_token_ids": (7,),
        "stop": ("\n",),
        "ignore_eos": True,
        "logprobs": 2,
        "n": 3,
    }
    assert b.min_p == 0.0 and b.presence_penalty == 0.5  # set: sent, even at its off value
    assert c.presence_penalty == 0.5  # null in a request: the default's
    assert [r.request_id for r in a.children()] == ["a", "a#1", "a#2"]
    assert [r.seed for r in a.children()] == [3, 4, 5]
    assert {r.parent for r in a.children()[1:]} == {"a"}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("min_p", 1e-40, "smallest normal float32"),
        ("min_p", 1.5, "less than or equal to 1"),
        ("presence_penalty", 2.5, "less than or equal to 2"),
        ("frequency_penalty", -3, "greater than or equal to -2"),
        ("repetition_penalty", 0, "greater than or equal to 0.01"),
        ("logit_bias", {5: 101}, "less than or equal to 100"),
        ("logit_bias", {-1: 1}, "greater than or equal to 0"),
        ("logit_bias", {i: 1 for i in range(MAX_LOGIT_BIAS + 1)}, "at most 1024"),
        ("stop_token_ids", list(range(65)), "at most 64"),
        ("stop", [""], "1 to 128 characters"),
        ("stop", ["x"] * 9, "at most 8"),
        ("logprobs", 21, "less than or equal to 20"),
        ("n", 0, "greater than or equal to 1"),
        ("n", 17, "less than or equal to 16"),
    ],
)
def test_out_of_range_knobs_are_refused(field: str, value: object, message: str) -> None:
    text = json.dumps(
        {
            "name": "s",
            "description": "d",
            "requests": {"a": {"prompt": [1], field: value}},
            "runs": [{"name": "r", "requests": ["a"]}],
        }
    )
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text, "s.yaml")
    assert any(f"requests.a.{field}" in p and message in p for p in err.value.problems), (
        err.value.problems
    )


def test_a_misspelt_knob_gets_a_did_you_mean() -> None:
    text = KNOBS.replace("frequency_penalty: -0.25", "frequency_penalti: -0.25")
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text, "knobs.yaml")
    assert any("frequency_penalty" in p and ":9:" in p for p in err.value.problems)


def test_children_of_a_copied_request_are_refused() -> None:
    text = KNOBS + "distribution: {samples: 4, requests: [a]}\n"
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text, "knobs.yaml")
    assert any("requests.a.n" in p and "seed + i" in p for p in err.value.problems)


def test_trace_carries_knobs_children_finish_and_logprobs_and_old_traces_read(
    tmp_path: Path,
) -> None:
    from specseed.engine_adapters.base import EngineAdapter

    class Echo(EngineAdapter):
        name = "echo"
        from specseed.traces.records import TOKENS_ONLY as observability

        def encode(self, prompt: tuple[int, ...] | str) -> tuple[int, ...]:
            return prompt if isinstance(prompt, tuple) else ()

        def environment(self) -> dict[str, str]:
            return {}

        def serve(self, plan, recorder):  # type: ignore[no-untyped-def]
            out = {}
            for request in plan.requests:
                for child in request.children():
                    out[child.request_id] = (1, 2)
                    logprobs = (TokenLogprob(-0.5, ((1, -0.5),)),)
                    recorder.finish(child.request_id, "stop", logprobs)
            return out

    scenario = parse_scenario(KNOBS, "knobs.yaml")
    plan = plan_run(scenario, scenario.runs[0], EngineSettings())
    trace = Echo(EngineSettings()).run(plan, TraceRecorder())
    assert set(trace.end.outputs) == {"a", "a#1", "a#2", "b", "c"}
    assert trace.request("a#2").seed == 5 and trace.request("a#2").parent == "a"
    assert trace.end.finish_reasons["a#1"] == "stop"
    from specseed.traces.records import _record_line

    lines = [
        _record_line("header", trace.header),
        _record_line("end", trace.end),
    ]
    again = read_trace(lines)
    assert again.header == trace.header and again.end == trace.end
    written = json.loads(lines[0])["requests"][4]
    assert written["min_p"] == 0.05 and "logprobs" not in written  # unset: not written
    old = json.loads(lines[0])
    old["schema_version"] = "1.2"
    for request in old["requests"]:
        for knob in (*REQUEST_KNOBS, "parent"):
            request.pop(knob, None)
    old_end = {"record": "end", "outputs": {"a": [1]}}
    read = read_trace([json.dumps({**old, "record": "header"}), json.dumps(old_end)])
    assert read.request("a").knobs() == {} and read.end == RunEnd(outputs={"a": (1,)})


def test_a_refused_knob_is_an_unserved_run() -> None:
    from specseed.engine_adapters.base import EngineAdapter, KnobRefused, RunPlan
    from specseed.traces.records import TOKENS_ONLY

    class Refuses(EngineAdapter):
        name = "refuses"
        observability = TOKENS_ONLY

        def encode(self, prompt: tuple[int, ...] | str) -> tuple[int, ...]:
            return ()

        def environment(self) -> dict[str, str]:
            return {}

        def serve(self, plan, recorder):  # type: ignore[no-untyped-def]
            raise KnobRefused("min_p is not supported with speculative decoding")

    request = RequestPlan("a", (1,), 1, 1.0, 0, 1.0, 4, min_p=0.1)
    plan = RunPlan("s", "r", EngineSettings(), (request,))
    trace = Refuses(EngineSettings()).run(plan, TraceRecorder())
    assert not trace.failed
    assert trace.unserved == (
        "the engine refused a sampling knob: min_p is not supported with speculative decoding"
    )
