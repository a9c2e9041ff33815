"""distinct-seeds and unseeded-independence find shared streams through an index built once
per run; here they are held to the plain pairwise scan they replaced (every pair, every event),
on runs where the reference engine shares streams on purpose."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pytest

from specseed.checks import request_streams as streams
from specseed.checks.context import CheckContext
from specseed.checks.findings import Suspect
from specseed.engine_adapters.contracts import get_contract
from specseed.plan.planning import plan_audit
from specseed.run.execute import run_audit
from specseed.scenarios.loader import load_audit_config
from specseed.traces.records import RequestInfo, RunTrace, load_trace

SEEDED, UNSEEDED = 10, 5


def _scenario(tmp_path: Path, defect: str | None, contract: str) -> RunTrace:
    seeded = [f"s{i}: {{prompt: [5, 6, 7], seed: {i % 7 + 1}}}" for i in range(SEEDED)]
    unseeded = [f"u{i}: {{prompt: [5, 6, 7]}}" for i in range(UNSEEDED)]
    names = [f"s{i}" for i in range(SEEDED)] + [f"u{i}" for i in range(UNSEEDED)]
    # Interleaved, so that seeded rows have unseeded neighbours in every kernel call.
    order = [n for pair in zip(names[:UNSEEDED], names[SEEDED:], strict=True) for n in pair]
    order += names[UNSEEDED:SEEDED]
    (tmp_path / "s.yaml").write_text(
        "name: streams\ndescription: shared streams\n"
        "defaults: {max_tokens: 10, temperature: 1.0}\nrequests:\n"
        + "".join(f"  {line}\n" for line in seeded + unseeded)
        + f"runs:\n  - name: all\n    requests: [{', '.join(order)}]\n"
    )
    defects = f"[{defect}]" if defect else "[]"
    (tmp_path / "model.yaml").write_text(
        f"engine: {{max_num_requests: 16, contract: {contract}, options: {{defects: {defects}}}}}\n"
        "scenarios: [s.yaml]\n"
    )
    config = load_audit_config(tmp_path / "model.yaml")
    run_audit(config, plan_audit(config, tmp_path), tmp_path, trace_dir=tmp_path / "t")
    return load_trace(tmp_path / "t" / "streams" / "all.jsonl")


def _pairwise_shared(trace: RunTrace, a: str, b: str) -> list[tuple[object, object]]:
    """The scan the index replaced: a's events against an index of b's drawing events."""
    index = {item[0].triple(): item for item in streams._events(trace, b) if item[0].draws > 0}
    return [
        (item, index[item[0].triple()])
        for item in streams._events(trace, a)
        if item[0].triple() in index
    ]


def _pairwise(
    trace: RunTrace, requests: list[RequestInfo], contract: str
) -> list[tuple[str, str, str, list[Suspect]]]:
    """Every problem pair of the plain scan: the two requests, the message, the suspects."""
    index = streams._StreamIndex(trace, requests)  # only for its events, read by the message
    found = []
    for x, y in combinations(requests, 2):
        if x.seed is not None and x.seed == y.seed:
            continue
        shared = _pairwise_shared(trace, x.request_id, y.request_id)
        problem = streams._shared_stream(index, x, y, shared, get_contract(contract))  # type: ignore[arg-type]
        if problem is not None:
            found.append((x.request_id, y.request_id, *problem))
    return found


def _expected(trace: RunTrace, requests: list[RequestInfo], contract: str) -> list[str]:
    return [message for _, _, message, _ in _pairwise(trace, requests, contract)]


@pytest.mark.parametrize(
    ("defect", "contract"),
    [
        (None, "ideal"),
        ("engine-counter", "ideal"),
        ("row0-seed", "ideal"),
        ("neighbor-unseeded", "ideal"),
        ("unseeded-shared-stream", "ideal"),
        ("row-subsequence", "ideal"),
    ],
)
def test_index_finds_the_pairs_the_pairwise_scan_finds(
    tmp_path: Path, defect: str | None, contract: str
) -> None:
    trace = _scenario(tmp_path, defect, contract)
    ctx = CheckContext(scenario=None, traces={"all": trace}, contract=get_contract(contract))  # type: ignore[arg-type]
    scenario = [r for r in trace.header.requests if r.phase == "scenario"]
    seeded = [r for r in scenario if r.seed is not None]
    unseeded = [r for r in scenario if r.seed is None]
    for check, requests in (
        (streams.distinct_seeds, seeded),
        (streams.unseeded_independence, unseeded),
    ):
        (finding,) = check(ctx, trace)
        expected = _expected(trace, requests, contract)
        if finding.status == "fail":
            assert list(finding.details) == expected, check.__name__
        else:
            assert expected == [], check.__name__


def test_a_defect_here_does_share_streams(tmp_path: Path) -> None:
    # The comparison above must not be vacuous: engine-counter shares streams between pairs.
    trace = _scenario(tmp_path, "engine-counter", "ideal")
    seeded = [r for r in trace.header.requests if r.phase == "scenario" and r.seed is not None]
    assert len(_expected(trace, seeded, "ideal")) >= 3


@pytest.mark.parametrize("defect", ["engine-counter", "row0-seed", "unseeded-shared-stream"])
def test_past_the_described_pairs_every_pair_is_counted_and_every_request_heard(
    tmp_path: Path, defect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A defect that gives N requests one stream makes N(N-1)/2 pairs; a finding describes
    # the first DETAILED_PAIRS and counts the rest, and still names every request, every
    # suspect and every kind of sharing (recorded states, tokens alone) the pairs show.
    monkeypatch.setattr(streams, "DETAILED_PAIRS", 3)
    trace = _scenario(tmp_path, defect, "ideal")
    ctx = CheckContext(scenario=None, traces={"all": trace}, contract=get_contract("ideal"))  # type: ignore[arg-type]
    scenario = [r for r in trace.header.requests if r.phase == "scenario"]
    told = 0
    for check, requests in (
        (streams.distinct_seeds, [r for r in scenario if r.seed is not None]),
        (streams.unseeded_independence, [r for r in scenario if r.seed is None]),
    ):
        (finding,) = check(ctx, trace)
        pairs = _pairwise(trace, requests, "ideal")
        if len(pairs) <= 3:
            continue
        told += 1
        assert finding.status == "fail"
        assert f"{len(pairs)} pairs" in finding.message
        assert f"({len(finding.details)} of them described)" in finding.message
        messages = [message for _, _, message, _ in pairs]
        assert list(finding.details[:3]) == messages[:3]
        assert set(finding.details) <= set(messages)
        kinds = {streams.IDENTICAL_DESPITE_STATES in m for m in messages}
        assert {streams.IDENTICAL_DESPITE_STATES in m for m in finding.details} == kinds
        assert set(finding.requests) == {r for x, y, _, _ in pairs for r in (x, y)}
        heard = {s.defect for _, _, _, suspects in pairs for s in suspects}
        assert {s.defect for s in finding.suspects} == heard or not heard
    assert told  # the scenario makes more pairs than are described


def _request(name: str) -> RequestInfo:
    return RequestInfo(
        request_id=name, phase="scenario", prompt_ids=(5, 6, 7), seed=None, temperature=1.0,
        top_k=0, top_p=1.0, max_tokens=10, arrival_step=0,
    )  # fmt: skip


def test_past_the_described_pairs_a_pair_is_heard_for_a_new_request_or_kind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The rule itself, on a sequence no single defect of the reference engine makes: past
    # the first pairs, a pair that names a request no described pair named is heard for its
    # suspects (not listed), and one of a kind of sharing not yet listed is listed too.
    monkeypatch.setattr(streams, "DETAILED_PAIRS", 2)
    problems = streams._PairFindings()
    a, b, c, d = (_request(n) for n in "abcd")
    sequence = [
        (a, b, True, "ab"),  # described: the first two pairs
        (a, c, True, "ac"),
        (b, c, True, None),  # counted: nothing new
        (a, d, True, "ad"),  # d is new: heard for its suspects, not listed
        (b, d, False, "bd"),  # tokens alone, a kind not yet listed: listed
        (c, d, False, None),  # counted
    ]
    for x, y, shares_state, described in sequence:
        assert problems.wants(x, y, shares_state) is (described is not None), (x, y)
        found = (described, [Suspect(described, "why")]) if described else None
        problems.add(x, y, shares_state, found)
    assert problems.count == 6
    assert problems.details == ["ab", "ac", "bd"]
    assert [s.defect for s in problems.suspects] == ["ab", "ac", "ad", "bd"]
    assert problems.affected == {"a", "b", "c", "d"}
    assert problems.untold == 3
