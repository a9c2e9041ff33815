"""The reference engine implements every sampling knob exactly under speculation: the K = 3
run gives the K = 0 run's greedy tokens, finish reasons and log-probabilities, stops mid-step,
and gives each child of ``n`` a stream of its own."""

from __future__ import annotations

from typing import Any

import pytest

from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
from specseed.engine_adapters.reference.adapter import ReferenceEngine
from specseed.engine_adapters.reference.options import ReferenceOptions
from specseed.traces.records import RunTrace, TraceRecorder

LOOP = (261, 376, 346, 348, 116, 298)
"""A prompt whose greedy tokens loop (the penalties must break the loop)."""


def _plan(rid: str, seed: int | None = None, temperature: float = 0.0, **knobs: Any) -> RequestPlan:
    return RequestPlan(rid, LOOP, seed, temperature, 0, 1.0, 32, **knobs)


REQUESTS = (
    _plan("plain"),
    _plan("presence", presence_penalty=1.5, logprobs=3),
    _plan("repetition", repetition_penalty=1.5),
    _plan("ban", logit_bias=((153, -100.0),)),
    _plan("eos", logit_bias=((2, 100.0),), ignore_eos=False),
    _plan("eos-ignored", logit_bias=((2, 100.0),), ignore_eos=True),
    _plan("eos-unset", logit_bias=((2, 100.0),)),
    _plan("stop", stop_token_ids=(327,)),
    _plan("stop-text", stop=("\n",)),
    _plan("min-p", seed=5, temperature=1.0, min_p=1.0),
    _plan("kids", seed=40, temperature=1.0, n=3),
    _plan("alone", seed=41, temperature=1.0),
)


def _run(max_draft_len: int, defects: tuple[str, ...] = ()) -> RunTrace:
    settings = EngineSettings(
        max_draft_len=max_draft_len, options=ReferenceOptions(defects=list(defects))
    )
    plan = RunPlan("knobs", f"k{max_draft_len}", settings, REQUESTS)
    return ReferenceEngine(settings).run(plan, TraceRecorder())


@pytest.fixture(scope="module")
def runs() -> tuple[RunTrace, RunTrace]:
    return _run(0), _run(3)


GREEDY = [r.request_id for r in REQUESTS if r.temperature == 0.0]


@pytest.mark.parametrize("request_id", GREEDY)
def test_greedy_knobs_give_the_k0_tokens_and_finish_reason(
    runs: tuple[RunTrace, RunTrace], request_id: str
) -> None:
    k0, k3 = runs
    assert k3.end.outputs[request_id] == k0.end.outputs[request_id]
    assert k3.end.finish_reasons[request_id] == k0.end.finish_reasons[request_id]


def test_each_knob_changes_the_output_as_it_should(runs: tuple[RunTrace, RunTrace]) -> None:
    _, out = runs
    tokens = out.end.outputs
    assert tokens["presence"] != tokens["plain"] and tokens["repetition"] != tokens["plain"]
    assert 153 in tokens["plain"] and 153 not in tokens["ban"]
    assert tokens["eos"] == (2,) and out.end.finish_reasons["eos"] == "stop"
    assert tokens["eos-ignored"] == (2,) * 32 and out.end.finish_reasons["eos-ignored"] == "length"
    assert tokens["eos-unset"] == (2,) * 32  # the engine's default: ignore_eos (its option)
    assert tokens["min-p"] == tokens["plain"]  # min_p 1 keeps only the most probable token
    stop = tokens["plain"].index(327)
    assert tokens["stop"] == tokens["plain"][: stop + 1]
    assert out.end.finish_reasons["stop"] == "stop"
    newline = tokens["plain"].index(10)  # byte "\n"
    assert tokens["stop-text"] == tokens["plain"][: newline + 1]


def test_a_stop_token_ends_the_request_mid_step(runs: tuple[RunTrace, RunTrace]) -> None:
    _, k3 = runs
    last = [row for _, row in k3.rows_of("stop")][-1]
    assert last.emitted[-1] == 327
    assert last.accepted >= len(last.emitted)  # drafts accepted past the stop were dropped


def test_penalties_count_the_drafts_accepted_earlier_in_the_step(
    runs: tuple[RunTrace, RunTrace],
) -> None:
    k0, _ = runs
    stale = _run(3, ("penalty-stale-in-step",))
    assert stale.end.outputs["presence"] != k0.end.outputs["presence"]


def test_logprobs_of_the_processed_target_agree_with_k0(runs: tuple[RunTrace, RunTrace]) -> None:
    k0, k3 = runs
    a, b = k0.end.logprobs["presence"], k3.end.logprobs["presence"]
    assert len(a) == len(b) == 32 and all(len(x.top) == 3 for x in a)
    assert all(abs(x.logprob - y.logprob) < 1e-4 for x, y in zip(a, b, strict=True))
    # Greedy: the chosen token is the most probable after the penalty.
    assert all(x.top[0][1] == x.logprob for x in a)
    assert "plain" not in k3.end.logprobs  # not asked, not reported


def test_children_have_streams_of_their_own(runs: tuple[RunTrace, RunTrace]) -> None:
    _, k3 = runs
    kids = [k3.end.outputs[i] for i in ("kids", "kids#1", "kids#2")]
    assert len(set(kids)) == 3
    # Child 1 samples under seed 40 + 1: exactly the request of seed 41 on its own.
    assert kids[1] == k3.end.outputs["alone"]
    assert _run(3).end.outputs["kids#2"] == kids[2]


def test_logprobs_do_not_depend_on_how_many_steps_are_reported_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Log-probabilities wait to be computed for many steps at once (``LOGPROB_BATCH``); a
    report per step gives the same values bit for bit, under every processor (penalties,
    min_p, top-k) and with several requests asking."""
    from specseed.engine_adapters.reference import adapter

    plans = (
        *REQUESTS,
        RequestPlan("sampled", LOOP, 7, 0.8, 20, 1.0, 32, logprobs=5),
        _plan("min-p-lp", seed=8, temperature=1.0, min_p=0.2, logprobs=2),
        RequestPlan("greedy-lp", LOOP, None, 0.0, 0, 1.0, 9, logprobs=0),
    )
    settings = EngineSettings(max_draft_len=3, options=ReferenceOptions())
    plan = RunPlan("knobs", "k3", settings, plans)

    def reported() -> dict[str, Any]:
        return dict(ReferenceEngine(settings).run(plan, TraceRecorder()).end.logprobs)

    together = reported()
    monkeypatch.setattr(adapter, "LOGPROB_BATCH", 1)  # a report per step
    assert reported() == together
    assert set(together) == {"presence", "sampled", "min-p-lp", "greedy-lp"}
    assert len(together["greedy-lp"]) == 9 and all(not t.top for t in together["greedy-lp"])
