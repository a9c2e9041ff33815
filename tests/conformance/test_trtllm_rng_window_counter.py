"""specseed's TensorRT-LLM contracts held to TensorRT-LLM's own unit test, assert for assert.

Every assert of the six stored versions of upstream's
``tests/unittest/_torch/speculative/hw_agnostic/test_rng_window_counter.py`` is a row of
``tests/data/trtllm/rng_window_counter_asserts.json``: its version and commit, test, line,
the setup it runs, the upstream expected numbers (copied as data), and the question it asks
of a contract in specseed's terms (a request's seed, which counter gave its window and the
window's index, the event kind and row, a tree's ``max_total_draft_tokens``). Three things
are checked:

- the contract's answer to each question equals upstream's number;
- the reference engine's RNG bookkeeping (``RngAssigner``), following the contract as its
  ``rng_profile``, reproduces the same numbers when driven through the setup's passes (slots,
  request ids, seeded or not), which tests the counter rules rather than the question;
- whole reference-engine runs under each contract put those offsets in their traces.

Asserts that ask no RNG question (object identity, buffer sentinels) are reported as
skipped with the reason, and counted.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from specseed.core.contracts import RngContract
from specseed.engine_adapters.contracts import get_contract
from specseed.engine_adapters.reference.rng_assignment import EventRequest, RngAssigner

DATA = json.loads(
    (Path(__file__).parents[1] / "data" / "trtllm" / "rng_window_counter_asserts.json").read_text()
)
K: int = DATA["K"]
ROWS: list[dict[str, Any]] = DATA["rows"]
SETUPS: dict[str, list[list[dict[str, Any]]]] = DATA["setups"]

# The per-version counts (assert statements, runtime evaluations) of the stored versions.
UPSTREAM_COUNTS = {
    "V1": (13, 13),
    "V2": (27, 27),
    "V3": (32, 32),
    "V4": (30, 54),
    "V5": (31, 58),
    "V6": (33, 60),
}


def _row_id(row: dict[str, Any]) -> str:
    return f"{row['version']}-L{row['line']}-{row['test'].removeprefix('test_')[:40]}"


def _pairs(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    return [(row, name) for row in rows for name in row["contracts"]]


MAPPED = [r for r in ROWS if r["unmappable"] is None]
UNMAPPED = [r for r in ROWS if r["unmappable"] is not None]
DRIVEN = [r for r in MAPPED if r["passes"] is not None and "offsets" in r["question"]]


# -- the contract's answer -------------------------------------------------------------


def _counter_of(contract: RngContract, seed: int | None) -> str:
    """Which counter gives this request's windows under the contract."""
    if seed is None and contract.unseeded_offsets == "shared-counter":
        return "shared"
    return "slot" if contract.window_counter == "slot" else "request"


def _offset(contract: RngContract, q: dict[str, Any], tree: int | None) -> int:
    counter = _counter_of(contract, q["seed"])
    # V1's requests carry no request id: every slot serves one request, so the slot's count
    # is the request's own iteration and trtllm-pr17599 (fresh slots) answers the same.
    assert counter == q["counter"] or (q["counter"], counter) == ("slot", "request"), (
        f"{contract.name} takes this window from the {counter} counter, upstream from the "
        f"{q['counter']} counter"
    )
    base = contract.unseeded_offset_base if counter == "shared" else 0
    return base + contract.offset(q["window"], q["kind"], q["index"], K, tree)


def _answer(contract: RngContract, row: dict[str, Any]) -> Any:
    question, tree = row["question"], row["tree"]
    if "offsets" in question:
        return [_offset(contract, q, tree) for q in question["offsets"]]
    if "seeds" in question:
        return [contract.seed_for(s) for s in question["seeds"]]
    if "differ" in question:
        first, second = ([_offset(contract, q, tree) for q in p] for p in question["differ"])
        return first != second
    if "distinct" in question:
        seen = [_offset(contract, q, tree) for q in question["distinct"]]
        return len(set(seen)) == len(seen)
    if "disjoint" in question:
        slots = [contract.slot(kind, index, K, tree) for kind, index in question["disjoint"]]
        span = contract.slot_stride
        stretches = [set(range(s * span, (s + 1) * span)) for s in slots]
        assert all(a.isdisjoint(b) for i, a in enumerate(stretches) for b in stretches[i + 1 :]), (
            "two slots' stretches overlap"
        )
        return {"slots": slots, "span": span}
    if "window_holds" in question:
        window = contract.window_size(K, tree)
        used = max(contract.slot(kind, index, K, tree) for kind, index in question["window_holds"])
        assert (used + 1) * contract.slot_stride - 1 < window
        return window
    if "ordered" in question:
        seeded, unseeded = zip(
            *([_offset(contract, q, tree) for q in pair] for pair in question["ordered"]),
            strict=True,
        )
        base = contract.unseeded_offset_base
        assert all(s < base <= u for s, u in zip(seeded, unseeded, strict=True))
        return {"seeded": list(seeded), "unseeded": list(unseeded), "base": base}
    if "block" in question:
        block = question["block"]
        return [
            base + contract.slot("draft", r, K, tree) * contract.slot_stride
            for base in block["bases"]
            for r in range(block["rows"])
        ]
    raise AssertionError(f"unknown question {question}")


def test_every_stored_assert_is_a_row() -> None:
    statements = Counter((r["version"], r["line"]) for r in ROWS)
    for version, (n_statements, n_evaluations) in UPSTREAM_COUNTS.items():
        rows = [r for r in ROWS if r["version"] == version]
        assert len({r["line"] for r in rows}) == n_statements, version
        assert sum(r["evaluations"] for r in rows) == n_evaluations, version
    assert all(n >= 1 for n in statements.values())
    # Unmappable: the graph copy's identity in every version, V3's two sentinel asserts.
    assert Counter(r["version"] for r in UNMAPPED) == {
        "V1": 1,
        "V2": 1,
        "V3": 3,
        "V4": 1,
        "V5": 1,
        "V6": 1,
    }
    assert all(r["kind"] == "NON" for r in UNMAPPED)


@pytest.mark.parametrize(
    ("row", "name"), _pairs(MAPPED), ids=[f"{_row_id(r)}-{n}" for r, n in _pairs(MAPPED)]
)
def test_the_contract_answers_the_upstream_number(row: dict[str, Any], name: str) -> None:
    assert _answer(get_contract(name), row) == row["expected"]


@pytest.mark.parametrize("row", UNMAPPED, ids=[_row_id(r) for r in UNMAPPED])
def test_unmappable_asserts_say_why(row: dict[str, Any]) -> None:
    pytest.skip(f"unmappable: {row['unmappable']}")


def test_the_old_assumed_span_disagrees() -> None:
    # The check can fail: the span once assumed (1024) misses every nonzero slot-span offset.
    wrong = replace(get_contract("trtllm-slot-span"), slot_stride=1024)
    rows = [r for r in MAPPED if "trtllm-slot-span" in r["contracts"]]
    disagree = [r for r in rows if _safe_answer(wrong, r) != r["expected"]]
    assert len(disagree) >= len(rows) // 2


def _safe_answer(contract: RngContract, row: dict[str, Any]) -> Any:
    try:
        return _answer(contract, row)
    except AssertionError:
        return None


def test_a_contract_of_another_era_disagrees() -> None:
    # The K + 1 window against the slot-span asserts, and the reverse: each era's numbers
    # belong to its own contract only.
    for name, era in (("trtllm-pr19601", "V5"), ("trtllm-slot-span", "V2")):
        contract = get_contract(name)
        rows = [r for r in MAPPED if r["version"] == era and "offsets" in r["question"]]
        assert any(_safe_answer(contract, r) != r["expected"] for r in rows), name


# -- the engine's bookkeeping driven through the setups -----------------------------------


def _drive(contract: RngContract, setup: str, tree: int | None = None) -> list[list[int]]:
    """Window bases (target row 0) the reference engine's RNG bookkeeping gives each request
    of each pass of an upstream setup. A request is its (slot, id); its own iteration counts
    its passes, so a new id on a slot starts at 0, as the engine's requests do."""
    rng = RngAssigner(contract, (), K, tree)
    iterations: Counter[tuple[int | None, int]] = Counter()
    out = []
    for batch in SETUPS[setup]:
        rows = []
        for request in batch:
            key = (request["slot"], request["id"])
            window = rng.take_window(request["seed"], request["slot"])
            rows.append(
                EventRequest(
                    request_seed=request["seed"],
                    engine_seed=rng.seed_for_new_request(request["seed"]),
                    slot=-1 if request["slot"] is None else request["slot"],
                    decoding_iter=iterations[key],
                    kind="target",
                    index=0,
                    shared_window=window,
                )
            )
            iterations[key] += 1
        out.append([state.offset for state in rng.assign(rows)])
    return out


@pytest.mark.parametrize(
    ("row", "name"), _pairs(DRIVEN), ids=[f"{_row_id(r)}-{n}" for r, n in _pairs(DRIVEN)]
)
def test_the_engine_following_the_contract_gives_the_upstream_offsets(
    row: dict[str, Any], name: str
) -> None:
    passes = _drive(get_contract(name), row["setup"], row["tree"])
    observed = [offset for p in row["passes"] for offset in passes[p]]
    # A question about several target rows of one request reads the same window base.
    rows_per_request = len(row["expected"]) // len(observed)
    expected = row["expected"][::rows_per_request] if rows_per_request > 1 else row["expected"]
    assert observed == expected


def test_the_engine_reuses_an_unreset_slot_counter_only_under_pr17599_as_merged() -> None:
    # upstream's D asserts (V2..V6) under the layout that preceded them: the second request on
    # slot 0 continues the first one's stream instead of starting at 0.
    merged = _drive(get_contract("trtllm-pr17599-as-merged"), "reuse")
    assert merged == [[0], [4], [8], [12]]
    assert _drive(get_contract("trtllm-pr19601"), "reuse") == [[0], [4], [0], [4]]


def test_the_engine_places_tree_slots_after_max_total_draft_tokens_plus_one_targets() -> None:
    contract = get_contract("trtllm-slot-span")
    rng = RngAssigner(contract, (), K, 10)

    def at(kind: str, index: int) -> int:
        row = EventRequest(7, 7, 0, 1, kind, index)  # type: ignore[arg-type]
        return rng.assign([row])[0].offset

    # window 15 * 32 = 480; targets 0..10, drafts 11..13, accept 14
    assert [at("target", 10), at("draft", 0), at("draft", 2), at("accept", 0)] == [
        480 + 320,
        480 + 352,
        480 + 416,
        480 + 448,
    ]
    # The K + 1 layouts ignore trees: the window stays K + 1.
    old = RngAssigner(get_contract("trtllm-pr19601"), (), K, 10)
    assert old.assign([EventRequest(7, 7, 0, 1, "draft", 2)])[0].offset == 4 + 3


def test_fused_per_row_subsequence_follows_each_commits_kernel() -> None:
    # The fused kernel with per-row entries: subsequence 0 and Philox offset = offset at
    # 740c856b; subsequence 2^63 | offset and Philox offset 0 at 8de196e3 (kernel source).
    assert get_contract("trtllm-740c856b").fused_per_row_state(7, 1128) == (7, 0, 1128)
    assert get_contract("trtllm-8de196e3").fused_per_row_state(7, 1128) == (
        7,
        (1 << 63) | 1128,
        0,
    )
    assert get_contract("trtllm-pr19601").fused_per_row_state(7, 4) is None


# -- whole reference-engine runs, read back from their traces ------------------------------


@pytest.fixture(scope="module")
def engine() -> Any:
    from specseed.engine_adapters.base import EngineSettings
    from specseed.engine_adapters.reference.adapter import ReferenceEngine

    return ReferenceEngine(EngineSettings())


def _run(engine: Any, contract: str, requests: list[tuple[str, int | None]], slots: int) -> Any:
    from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
    from specseed.engine_adapters.reference.options import ReferenceOptions
    from specseed.traces.records import TraceRecorder

    plans = tuple(
        RequestPlan(
            request_id=rid,
            prompt=(10, 20, 30, 40),
            seed=seed,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_tokens=6,
        )
        for rid, seed in requests
    )
    settings = EngineSettings(contract=contract, max_num_requests=slots, options=ReferenceOptions())
    return engine.run(RunPlan("conformance", contract, settings, plans), TraceRecorder(None))


def _bases(trace: Any, contract: RngContract, request_id: str) -> list[int]:
    """The window base of each of a request's iterations, from its first traced event."""
    bases = []
    for _step, row in trace.rows_of(request_id):
        event = row.events[0]
        bases.append(event.offset - contract.offset(0, event.kind, event.index, K))
    return bases


def _expected(version: str, test: str, line_key: int) -> list[int]:
    rows = [r for r in ROWS if r["version"] == version and r["test"] == test]
    return sorted(rows, key=lambda r: r["line"])[line_key]["expected"]


ERAS = {
    "trtllm-pr19601": "V2",
    "trtllm-slot-span-740c856b": "V4",
    "trtllm-slot-span": "V5",
}


@pytest.mark.parametrize("name", [*ERAS, "trtllm-pr17599-as-merged"])
def test_engine_traces_advance_a_seeded_window_each_pass(engine: Any, name: str) -> None:
    version = ERAS.get(name, "V1")
    test = (
        "test_seeded_offsets_advance_across_passes"
        if version != "V1"
        else "test_offsets_advance_across_passes"
    )
    upstream = [_expected(version, test, i)[0] for i in range(3)]
    contract = get_contract(name)
    trace = _run(engine, name, [("a", 7), ("b", 11)], slots=8)
    assert _bases(trace, contract, "a")[:3] == upstream
    assert _bases(trace, contract, "b")[:3] == upstream


@pytest.mark.parametrize("name", [*ERAS, "trtllm-pr17599-as-merged"])
def test_engine_traces_a_seeded_request_on_a_reused_slot(engine: Any, name: str) -> None:
    # One slot: b waits for a, then takes a's slot (upstream's D setup: same seed, new id).
    contract = get_contract(name)
    trace = _run(engine, name, [("a", 7), ("b", 7)], slots=1)
    a, b = _bases(trace, contract, "a"), _bases(trace, contract, "b")
    window = contract.window_size(K)
    if name == "trtllm-pr17599-as-merged":
        # The slot's counter carries on: b starts where a stopped, and draws other tokens.
        assert b[0] == len(a) * window
        assert trace.end.outputs["a"] != trace.end.outputs["b"]
    else:
        version = ERAS[name]
        d = [_expected(version, "test_seeded_slot_reuse_resets_the_stream", i) for i in range(4)]
        assert [a[0], a[1], b[0], b[1]] == [x[0] for x in d]
        assert trace.end.outputs["a"] == trace.end.outputs["b"]


@pytest.mark.parametrize("name", list(ERAS))
def test_engine_traces_unseeded_windows_from_the_shared_counter(engine: Any, name: str) -> None:
    version = ERAS[name]
    test = "test_unseeded_requests_in_one_batch_get_distinct_windows"
    first, second = _expected(version, test, 0), _expected(version, test, 1)
    contract = get_contract(name)
    trace = _run(engine, name, [("u0", None), ("u1", None), ("u2", None)], slots=8)
    bases = [_bases(trace, contract, f"u{i}") for i in range(3)]
    assert [b[0] for b in bases] == first
    assert [b[1] for b in bases] == second


# -- the consequence on that release -------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "verdict"),
    [("trtllm-pr17599-as-merged", "fail"), ("trtllm-pr19601", "pass"), ("trtllm-pr17599", "pass")],
)
def test_slot_reuse_scenario_under_each_contract(name: str, verdict: str) -> None:
    # The engine follows the contract (rng_profile = engine.contract). Under PR 17599 as
    # merged, the seeded request drew from further into its stream on the reused slot: the
    # audit reports a failing uptime-invariance, which is what a user of that release sees.
    from specseed.plan.planning import plan_audit
    from specseed.run.execute import run_audit
    from specseed.scenarios.schema import AuditConfig, EngineConfig

    config = AuditConfig(engine=EngineConfig(contract=name), scenarios=["slot-reuse"])
    result = run_audit(config, plan_audit(config, Path.cwd()), Path.cwd())
    uptime = [f for f in result.findings if f.check == "uptime-invariance"]
    assert [f.status for f in uptime] == [verdict]
    # Anything else that fails is an upstream bug the layout carries (its one-draw slots),
    # never excused and naming upstream's fix: no limitation its authors did not state.
    contract = get_contract(name)
    others = [f for f in result.findings if f.status == "fail" and f.check != "uptime-invariance"]
    for finding in others:
        departures = [contract.departure_for(s.defect) for s in finding.suspects]
        assert departures and all(departures), (finding.check, finding.suspects)
        assert all(
            d is not None and d.upstream in s.why
            for d, s in zip(departures, finding.suspects, strict=True)
        ), finding
    # The RNG states themselves follow the contract: the divergence is the layout's.
    rng = [f for f in result.findings if f.check == "rng-contract"]
    assert rng and all(f.status in ("pass", "known-limitation") for f in rng)
