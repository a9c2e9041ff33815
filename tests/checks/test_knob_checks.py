"""The knob checks on token-only traces (what a black-box server gives): each fails on the
evidence of its defect and names it, passes on a correct run, and skips what it cannot see.
(tests/test_detection_matrix.py shows each failing on the reference engine's injection.)"""

from __future__ import annotations

from typing import Any

from specseed.checks.context import CheckContext
from specseed.checks.knobs import (
    children_distinct,
    knob_equivalence,
    knobs_honoured,
    logprobs_sane,
    stop_boundaries,
)
from specseed.engine_adapters.contracts import get_contract
from specseed.scenarios.schema import Expectation, Scenario
from specseed.traces.records import (
    TOKENS_ONLY,
    EngineConfigRecord,
    RequestInfo,
    RunEnd,
    RunHeader,
    RunTrace,
    TokenLogprob,
)

SCENARIO = Scenario.model_validate(
    {
        "name": "s",
        "description": "d",
        "requests": {"a": {"prompt": [1]}},
        "runs": [{"name": "r", "requests": ["a"]}],
    }
)


def _info(rid: str, temperature: float = 0.0, seed: int | None = None, **knobs: Any) -> RequestInfo:
    return RequestInfo(rid, "scenario", (7, 8), seed, temperature, 0, 1.0, 8, 0, **knobs)


def _trace(
    name: str,
    requests: list[RequestInfo],
    outputs: dict[str, tuple[int, ...]],
    k: int = 3,
    **end: Any,
) -> RunTrace:
    header = RunHeader(
        "s",
        name,
        "http",
        EngineConfigRecord(max_draft_len=k),
        "ideal",
        tuple(requests),
        observability=TOKENS_ONLY,
    )
    return RunTrace(header, (), RunEnd(outputs=outputs, **end))


def _ctx(*traces: RunTrace) -> CheckContext:
    return CheckContext(SCENARIO, {t.name: t for t in traces}, get_contract("ideal"))


def _one(found: Any) -> Any:
    (finding,) = list(found)
    return finding


TOKENS = (5, 6, 7, 9, 10, 11, 12, 13)


def test_stop_boundaries() -> None:
    info = _info("a", stop_token_ids=(9,))
    past = _trace("r", [info], {"a": TOKENS}, finish_reasons={"a": "stop"})
    finding = _one(stop_boundaries(_ctx(past), past))
    assert finding.status == "fail" and [s.defect for s in finding.suspects] == ["tokens-past-stop"]
    short = _trace("r", [_info("b")], {"b": (5, 6)}, finish_reasons={"b": "length"})
    assert "finish reason length" in _one(stop_boundaries(_ctx(short), short)).message
    good = _trace("r", [info], {"a": TOKENS[:4]}, finish_reasons={"a": "stop"})
    assert _one(stop_boundaries(_ctx(good), good)).status == "pass"


def test_logprobs_sane() -> None:
    info = _info("a", logprobs=2)
    top = ((5, -0.1), (6, -2.5))
    fake = _trace("r", [info], {"a": (5,)}, logprobs={"a": (TokenLogprob(0.0, top),)})
    finding = _one(logprobs_sane(_ctx(fake), fake))
    assert finding.status == "fail" and [s.defect for s in finding.suspects] == ["fake-logprobs"]
    over = _trace(
        "r", [info], {"a": (5,)}, logprobs={"a": (TokenLogprob(-0.1, ((5, -0.1), (6, -0.2))),)}
    )
    assert "sum past 1" in _one(logprobs_sane(_ctx(over), over)).message
    good = _trace("r", [info], {"a": (5,)}, logprobs={"a": (TokenLogprob(-0.1, top),)})
    assert _one(logprobs_sane(_ctx(good), good)).status == "pass"
    unseen = _trace("r", [info], {"a": (5,)})
    assert _one(logprobs_sane(_ctx(unseen), unseen)).status == "skip"


def test_children_distinct_names_shared_children_only_when_a_control_differs() -> None:
    requests = [
        _info("p", 1.0, 3, n=2),
        RequestInfo("p#1", "scenario", (7, 8), 4, 1.0, 0, 1.0, 8, 0, parent="p"),
        _info("c", 1.0, 5),
    ]
    shared = _trace("r", requests, {"p": TOKENS, "p#1": TOKENS, "c": TOKENS[::-1]})
    finding = _one(children_distinct(_ctx(shared), shared))
    assert [s.defect for s in finding.suspects] == ["children-shared-stream"]
    everyone = _trace("r", requests, {"p": TOKENS, "p#1": TOKENS, "c": TOKENS})
    finding = _one(children_distinct(_ctx(everyone), everyone))
    assert finding.status == "fail" and not finding.suspects  # left to the stream checks
    missing = _trace("r", requests, {"p": TOKENS, "c": TOKENS})
    assert "1 completions returned" in _one(children_distinct(_ctx(missing), missing)).message
    fine = _trace("r", requests, {"p": TOKENS, "p#1": TOKENS[::-1], "c": TOKENS})
    assert _one(children_distinct(_ctx(fine), fine)).status == "pass"


def test_knobs_honoured() -> None:
    greedy = _info("g")
    ban = _info("ban", logit_bias=((6, -100.0),))
    minp = _info("m", 1.0, 1, min_p=1.0)
    top_k = [RequestInfo(f"k{i}", "scenario", (7, 8), i, 1.0, 50, 1.0, 8, 0) for i in range(2)]
    requests = [greedy, ban, minp, *top_k]
    outputs = {"g": TOKENS, "ban": TOKENS, "m": TOKENS[:3] + (1,) * 5, "k0": TOKENS, "k1": TOKENS}
    bad = _trace("r", requests, outputs)
    finding = _one(knobs_honoured(_ctx(bad), bad))
    assert finding.status == "fail" and len(finding.details) == 4
    assert {s.defect for s in finding.suspects} == {"unset-temperature-greedy"}
    assert not _one(knobs_honoured(_ctx(bad), _trace("r0", requests, outputs, k=0))).suspects
    good_outputs = {**outputs, "ban": (5, 7, 7, 9, 10, 11, 12, 13), "m": TOKENS, "k1": (1,) * 8}
    good = _trace("r", requests, good_outputs)
    assert _one(knobs_honoured(_ctx(good), good)).status == "pass"


def test_knobs_honoured_judges_a_penalty_by_its_twins_logprobs() -> None:
    loop = (5, 6, 5, 6, 5, 6, 5, 6)
    # At position 2 the twin repeats 5 (log-probability -0.5); 9 is at -0.9: a presence
    # penalty of 1 puts 9 first, one of 0.2 does not.
    lp = tuple(TokenLogprob(-0.5, ((t, -0.5), (9, -0.9))) for t in loop)
    twin = _info("twin", logprobs=2)
    for penalty, penalised, status in (
        (1.0, loop, "fail"),
        (0.2, loop, "skip"),  # never asked to act: nothing shown either way
        (1.0, (5, 6, 9), "pass"),
    ):
        request = _info("pen", presence_penalty=penalty)
        trace = _trace(
            "r", [twin, request], {"twin": loop, "pen": penalised}, logprobs={"twin": lp}
        )
        finding = _one(knobs_honoured(_ctx(trace), trace))
        assert finding.status == status, (penalty, finding.message)
    assert (
        "puts token 9 above it"
        in _one(
            knobs_honoured(
                _ctx(trace),
                _trace(
                    "r",
                    [twin, _info("pen", presence_penalty=1.0)],
                    {"twin": loop, "pen": loop},
                    logprobs={"twin": lp},
                ),
            )
        ).message
    )


def test_knob_equivalence() -> None:
    requests = [_info("pen", presence_penalty=1.0), _info("bias", logit_bias=((3, 2.0),))]
    base = _trace("k0", requests, {"pen": TOKENS, "bias": TOKENS}, k=0)
    expect = Expectation(check="knob-equivalence", runs=["k0", "k3"])
    stale = _trace("k3", requests, {"pen": TOKENS[:4] + (1,) * 4, "bias": TOKENS})
    finding = _one(knob_equivalence(_ctx(base, stale), expect))
    # The logit_bias request held: the penalties, not every knob, went wrong.
    assert finding.suspect_groups == (("penalty-stale-in-step",),)
    dropped = _trace("k3", requests, {"pen": TOKENS[:4] + (1,) * 4, "bias": (1,) * 8})
    finding = _one(knob_equivalence(_ctx(base, dropped), expect))
    assert finding.suspect_groups[1] == ("spec-knobs-dropped",)
    same = _trace("k3", requests, {"pen": TOKENS, "bias": TOKENS})
    assert _one(knob_equivalence(_ctx(base, same), expect)).status == "pass"
    flipped = Expectation(check="knob-equivalence", runs=["k3", "k0"])
    assert _one(knob_equivalence(_ctx(base, same), flipped)).status == "skip"


def test_knob_equivalence_past_stop_and_fake_logprobs() -> None:
    info = _info("a", logprobs=1)
    lp = tuple(TokenLogprob(-0.5, ((t, -0.5),)) for t in TOKENS[:4])
    base = _trace(
        "k0", [info], {"a": TOKENS[:4]}, k=0, finish_reasons={"a": "stop"}, logprobs={"a": lp}
    )
    expect = Expectation(check="knob-equivalence", runs=["k0", "k3"])
    past = _trace("k3", [info], {"a": TOKENS}, finish_reasons={"a": "length"})
    finding = _one(knob_equivalence(_ctx(base, past), expect))
    assert [s.defect for s in finding.suspects] == ["tokens-past-stop"]
    fake = tuple(TokenLogprob(0.0 if i else -0.5, x.top) for i, x in enumerate(lp))
    zero = _trace(
        "k3", [info], {"a": TOKENS[:4]}, finish_reasons={"a": "stop"}, logprobs={"a": fake}
    )
    finding = _one(knob_equivalence(_ctx(base, zero), expect))
    assert [s.defect for s in finding.suspects] == ["fake-logprobs"]


def test_a_penalty_whose_twin_never_repeats_is_not_judged() -> None:
    # The twin's stream repeats no token: no position asks the penalty to act, so a request
    # following the twin shows nothing either way (a dropped penalty looks the same).
    fresh = (5, 6, 7, 9)
    lp = tuple(TokenLogprob(-0.5, ((t, -0.5), (3, -0.6))) for t in fresh)
    twin, request = _info("twin", logprobs=2), _info("pen", presence_penalty=1.5)
    trace = _trace("r", [twin, request], {"twin": fresh, "pen": fresh}, logprobs={"twin": lp})
    finding = _one(knobs_honoured(_ctx(trace), trace))
    assert finding.status == "skip" and "pen" in finding.message


def test_equivalence_checks_skip_when_no_run_speculates() -> None:
    from specseed.checks.invariance import greedy_spec_equivalence

    requests = [_info("pen", presence_penalty=1.0), _info("plain")]
    outputs = {"pen": TOKENS, "plain": TOKENS}
    base, again = _trace("k0", requests, outputs, k=0), _trace("k0b", requests, outputs, k=0)
    for check, function in (
        ("knob-equivalence", knob_equivalence),
        ("greedy-spec-equivalence", greedy_spec_equivalence),
    ):
        expect = Expectation(check=check, runs=["k0", "k0b"])
        finding = _one(function(_ctx(base, again), expect))
        assert finding.status == "skip" and "speculates" in finding.message, check


def test_a_request_asking_only_logprobs_is_a_control_for_knob_equivalence() -> None:
    # Both diverge at one position with the same (unrecorded) logits; the control that only
    # asks log-probabilities diverged too, so the divergence fits greedy-drift, and the
    # request that only asks log-probabilities is not blamed on a knob.
    requests = [_info("pen", presence_penalty=1.0), _info("lp", logprobs=2)]
    base = _trace("k0", requests, {"pen": TOKENS, "lp": TOKENS}, k=0)
    drifted = _trace("k3", requests, {"pen": TOKENS[:4] + (1,) * 4, "lp": TOKENS[:4] + (1,) * 4})
    expect = Expectation(check="knob-equivalence", runs=["k0", "k3"])
    finding = _one(knob_equivalence(_ctx(base, drifted), expect))
    groups = finding.suspect_groups or ((s.defect for s in finding.suspects),)
    groups = [tuple(g) for g in groups]
    assert len(groups) == 2 and all("greedy-drift" in g for g in groups), groups


def test_children_distinct_asks_only_broad_sampling_and_needs_no_control() -> None:
    same = {f"a#{i}" if i else "a": TOKENS for i in range(3)}
    for narrow, expected in (({"top_k": 1}, []), ({}, ["fail"])):
        parent = RequestInfo("a", "scenario", (7,), 1, 1.0, narrow.get("top_k", 0), 1.0, 8, 0, n=3)
        children = [
            RequestInfo(f"a#{i}", "scenario", (7,), 1 + i, 1.0, 0, 1.0, 8, 0, parent="a")
            for i in (1, 2)
        ]
        trace = _trace("r", [parent, *children], same)
        found = list(children_distinct(_ctx(trace), trace))
        assert [f.status for f in found] == expected, (narrow, found)
    # No request of its own beside them: the identical children are still named.
    assert found[0].suspects[0].defect == "children-shared-stream"


def test_a_bias_beside_a_penalty_is_not_judged() -> None:
    # Found by specseed search on the correct reference engine: logit_bias {1: +100} with
    # repetition_penalty 2 on prompt [1] (the penalty halves token 1's logit) emits token 0.
    request = _info("r", logit_bias=((0, 48.0), (1, 100.0)), repetition_penalty=2.0)
    trace = _trace("r", [request], {"r": (0,)})
    assert [f.status for f in knobs_honoured(_ctx(trace), trace)] in ([], ["skip"])
    alone = _info("r", logit_bias=((1, 100.0),))
    trace = _trace("r", [alone], {"r": (0,)})
    assert _one(knobs_honoured(_ctx(trace), trace)).status == "fail"


def test_a_forced_token_beside_another_lifted_one_is_not_judged() -> None:
    # Found by specseed search on the correct reference engine: {0: +100, 7: +91} emits 7.
    request = _info("r", logit_bias=((0, 100.0), (7, 91.0)))
    trace = _trace("r", [request], {"r": (7,)})
    assert [f.status for f in knobs_honoured(_ctx(trace), trace)] in ([], ["skip"])


def test_a_penalty_that_rewards_repetition_is_not_broad_sampling() -> None:
    """Children of a request whose penalty feeds loops (found by a search of a correct
    server: repetition_penalty 0.5 at T 0.8, two children alike for 8 tokens) may agree by
    chance: no identity is asked of them."""
    from specseed.checks.request_streams import broad

    plain = _info("r", temperature=0.8)
    assert broad(plain)
    for knobs in (
        {"repetition_penalty": 0.5},
        {"presence_penalty": -1.0},
        {"frequency_penalty": -0.5},
    ):
        assert not broad(_info("r", temperature=0.8, **knobs)), knobs
    assert broad(_info("r", temperature=0.8, repetition_penalty=1.5, presence_penalty=1.0))
