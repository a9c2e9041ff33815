"""A defect that touches every request of a large run still makes a finding of a few lines:
the rng-contract message groups the requests by what differs past a handful, and the
console names a handful of the RNG state tables it leaves to --json."""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Console

from specseed.checks import rng_state
from specseed.checks.context import CheckContext
from specseed.engine_adapters.contracts import get_contract
from specseed.reporting.console import MAX_OFFSET_TABLES, MAX_OFFSET_TABLES_NAMED, render_offsets
from tests.checks.test_stream_index import SEEDED, UNSEEDED, _scenario

GROUP = re.compile(
    r"(?P<fields>[a-z, ]+): (?P<count>\d+) requests \((?P<names>.+?)(?: and (?P<more>\d+) more)?\)"
)


def test_rng_contract_groups_the_requests_past_a_handful(tmp_path: Path) -> None:
    trace = _scenario(tmp_path, "engine-counter", "ideal")
    ctx = CheckContext(scenario=None, traces={"all": trace}, contract=get_contract("ideal"))  # type: ignore[arg-type]
    (finding,) = rng_state.rng_contract(ctx, trace)
    assert finding.status == "fail"
    assert len(finding.requests) == SEEDED + UNSEEDED > rng_state.MAX_DETAIL_LINES
    summary = finding.message.split(" (", 1)[1].removesuffix(")")
    # Every request is counted in some group, at most three named in each.
    groups = [GROUP.fullmatch(part) for part in summary.split("; ")]
    assert all(groups), summary
    total = 0
    for group in groups:
        assert group is not None
        names = group["names"].split(", ")
        assert len(names) <= 3
        assert int(group["count"]) == len(names) + int(group["more"] or 0)
        total += int(group["count"])
    assert total == len(finding.requests)
    # Each request's rows are still all in the finding.
    assert {row.request for row in finding.offsets} == set(finding.requests)


def test_a_few_requests_are_each_named_with_what_differs(tmp_path: Path) -> None:
    trace = _scenario(tmp_path, "engine-counter", "ideal")
    ctx = CheckContext(scenario=None, traces={"all": trace}, contract=get_contract("ideal"))  # type: ignore[arg-type]
    (finding,) = rng_state.rng_contract(ctx, trace)
    few = {request: {"seed"} for request in finding.requests[: rng_state.MAX_DETAIL_LINES]}
    assert rng_state._mismatch_summary(few) == "; ".join(f"{r}: seed" for r in sorted(few))


def test_the_console_names_a_handful_of_the_tables_it_leaves_to_json(tmp_path: Path) -> None:
    trace = _scenario(tmp_path, "engine-counter", "ideal")
    ctx = CheckContext(scenario=None, traces={"all": trace}, contract=get_contract("ideal"))  # type: ignore[arg-type]
    (finding,) = rng_state.rng_contract(ctx, trace)
    console = Console(width=80, record=True, color_system=None)
    console.print(render_offsets(finding.offsets))
    text = console.export_text()
    (line,) = [line for line in text.replace("\n", " ").split("… tables for ")[1:]]
    left = len(finding.requests) - MAX_OFFSET_TABLES
    assert f"and {left - MAX_OFFSET_TABLES_NAMED} more requests are in --json" in line
