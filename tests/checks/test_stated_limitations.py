"""A known limitation is only what an engine's authors stated, quoted with its source; every
other way a layout departs from the ideal fails, naming the upstream report or fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specseed.core.contracts import Limitation
from specseed.engine_adapters.contracts import all_contracts, get_contract
from specseed.plan.planning import plan_audit
from specseed.run.execute import run_audit
from specseed.scenarios.schema import AuditConfig, EngineConfig

UPSTREAM = re.compile(r"\b(issue|PR|commit) [0-9a-f]{4,}")


def _audit(contract: str, scenario: str, defects: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    config = AuditConfig(
        engine=EngineConfig(contract=contract, options={"defects": list(defects)}),
        scenarios=[scenario],
    )
    return run_audit(config, plan_audit(config, Path.cwd()), Path.cwd())


def test_a_limitation_without_the_authors_words_and_their_source_is_refused() -> None:
    with pytest.raises(ValueError, match="quoted with its source"):
        Limitation("row-subsequence", ("position-invariance",), "why", stated="", source="")


def test_every_contract_quotes_its_limitations_and_names_upstream_for_its_departures() -> None:
    for contract in all_contracts().values():
        for limitation in contract.limitations:
            assert limitation.stated and UPSTREAM.search(limitation.source), limitation
            assert f"\u201c{limitation.stated}\u201d" in limitation.quoted
        for departure in contract.departures:
            assert UPSTREAM.search(departure.upstream), departure


def test_pr17599_states_two_limits_and_nothing_else() -> None:
    contract = get_contract("trtllm-pr17599")
    assert {lim.defect for lim in contract.limitations} == {"row-subsequence", "row0-seed"}
    assert all("PR 17599" in lim.source for lim in contract.limitations)
    # The two things the PR never stated are upstream bugs, with their report and fix.
    unseeded = contract.departure_for("unseeded-shared-stream")
    slots = contract.departure_for("draw-overlap")
    assert unseeded is not None and "issue 19487" in unseeded.upstream
    assert "PR 19505" in unseeded.upstream
    assert slots is not None and "slot-span" in slots.upstream


def test_unseeded_requests_on_one_stream_fail_under_pr17599_naming_the_upstream_bug() -> None:
    result = _audit("trtllm-pr17599", "unseeded")
    found = [f for f in result.findings if f.check == "unseeded-independence"]
    assert found and all(f.status == "fail" for f in found), found  # was known-limitation
    why = found[0].suspects[0].why
    assert found[0].suspects[0].defect == "unseeded-shared-stream"
    assert "issue 19487" in why and "PR 19505" in why and "not a stated limitation" in why


@pytest.mark.parametrize(("contract", "status"), [("trtllm-pr17599", "known-limitation"),
                                                  ("ideal", "fail")])  # fmt: skip
def test_a_kernel_reading_element_0_is_excused_only_where_the_contract_states_it(
    contract: str, status: str
) -> None:
    # The probe keeps kernel row 1 while its row-0 neighbour's seed changes: same recorded
    # state and logits, another token. PR 17599 states that its flashinfer reads element 0.
    result = _audit(contract, "batch-composition", ("row0-seed",))
    [batch] = [f for f in result.findings if f.check == "batch-invariance"]
    assert batch.status == status, batch.message
    if status == "known-limitation":
        assert "seed at kernel row 0" in batch.message
        assert "stated in TensorRT-LLM PR 17599" in (batch.limitation or "")
        assert "element 0" in (batch.limitation or "")
        assert any(d.attribution == "sampler" for d in batch.diffs)
    else:
        assert "row0-seed" in {s.defect for s in batch.suspects}
