"""The search's strategies: every field of the scenario model is drawn, every drawn case is a
valid scenario whose expectations name its own runs, and the edges the issue lists are
reached (issue 37). No engine runs here."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from specseed.scenarios.schema import INT64_MIN, KNOB_NAMES, UINT64_MAX, RequestSpec, Scenario
from specseed.search.coverage import case_coverage, seed_class
from specseed.search.strategies import (
    CORE_FIELDS,
    EDGE_SEEDS,
    K0_FIRST,
    MAX_KNOBS,
    REQUEST_FIELDS,
    UNSET,
    VARIANT_CHECKS,
    TrafficBounds,
    cases,
    field_strategies,
    generic_field,
    invariance_cases,
    requests,
    statistical_cases,
)

BOUNDS = TrafficBounds(vocab_size=512, context_length=256)
FAST = settings(
    max_examples=30,
    derandomize=True,  # the same cases every run
    deadline=None,
    database=None,
    phases=(Phase.generate,),
    suppress_health_check=list(HealthCheck),
)


def test_every_request_field_of_the_model_is_drawn() -> None:
    strategies = field_strategies()
    assert set(strategies) == set(RequestSpec.model_fields)
    assert all(strategies.values()), [n for n, s in strategies.items() if s is None]
    # The named entries cover the fields the model has today, each by its own strategy.
    assert set(RequestSpec.model_fields) <= set(REQUEST_FIELDS)


class FutureKnobs(BaseModel):
    """Fields a later scenario model may add, with the bounds pydantic states."""

    penalty: float | None = Field(None, ge=-2.0, le=2.0)
    count: int | None = Field(None, ge=1, le=16)
    flag: bool | None = None
    ids: list[int] | None = None


@pytest.mark.parametrize("name", list(FutureKnobs.model_fields))
@FAST
@given(data=st.data())
def test_a_field_without_an_entry_is_drawn_from_its_type_and_bounds(
    name: str, data: st.DataObject
) -> None:
    strategy = generic_field(name, FutureKnobs.model_fields[name])
    assert strategy is not None
    value = data.draw(strategy(BOUNDS, "seeded"))
    assert value is not UNSET  # a knob: whether it is set at all is chosen before
    FutureKnobs.model_validate({name: value})  # within the field's bounds


@FAST
@given(
    request=st.sampled_from(("seeded", "greedy", "unseeded")).flatmap(
        lambda kind: st.tuples(st.just(kind), requests(BOUNDS, kind))
    )
)
def test_requests_are_of_their_kind_and_validate(request: tuple[str, dict[str, Any]]) -> None:
    kind, spec = request
    RequestSpec.model_validate(spec)
    assert len(set(spec) - set(CORE_FIELDS)) <= MAX_KNOBS
    assert (spec.get("temperature") == 0.0) == (kind == "greedy")
    assert (spec.get("seed") is not None) == (kind == "seeded")
    prompt = spec["prompt"]
    length = len(prompt.encode()) if isinstance(prompt, str) else len(prompt)
    assert 1 <= length <= BOUNDS.longest_prompt
    assert all(0 <= t < BOUNDS.vocab_size for t in prompt if isinstance(prompt, list))


def _check_case(case: dict[str, Any], bounds: TrafficBounds) -> Scenario:
    scenario = Scenario.model_validate(case)
    runs = {run.name: run for run in scenario.runs}
    assert scenario.runs[0].name == "base"
    for expectation in scenario.expect:
        first, other = expectation.runs
        if expectation.check in K0_FIRST:  # the K = 0 run first, the speculative one after
            first, other = other, first
        assert first == "base"
        assert expectation.check in VARIANT_CHECKS[other]
        assert runs[other].requests  # the run exists and serves something
    if bounds.fixed_settings:
        assert all(not run.engine.model_dump(exclude_none=True) for run in scenario.runs)
    return scenario


@FAST
@given(case=invariance_cases(BOUNDS))
def test_invariance_cases_are_valid_scenarios_with_their_runs(case: dict[str, Any]) -> None:
    scenario = _check_case(case, BOUNDS)
    assert 1 <= len(scenario.requests) <= BOUNDS.max_requests
    base = scenario.runs[0]
    for run in scenario.runs[1:]:
        if run.name in ("again", "uptime", "overlap", "k0", "permuted"):
            assert sorted(run.requests) == sorted(base.requests)
        if run.name == "alone":
            (alone,) = run.requests
            request = scenario.resolved_request(alone)
            assert request.seed is not None or request.greedy  # what batch-invariance compares


@FAST
@given(case=invariance_cases(TrafficBounds(fixed_settings=True)))
def test_a_server_s_settings_are_never_changed(case: dict[str, Any]) -> None:
    scenario = _check_case(case, TrafficBounds(fixed_settings=True))
    assert {run.name for run in scenario.runs} <= {"base", "again", "alone", "permuted", "uptime"}


@FAST
@given(case=statistical_cases(BOUNDS))
def test_statistical_cases_copy_seeded_sampled_requests(case: dict[str, Any]) -> None:
    scenario = _check_case(case, BOUNDS)
    assert scenario.distribution is not None
    for name in scenario.requests:
        request = scenario.resolved_request(name)
        assert request.seed is not None and not request.greedy
    if len(scenario.runs) == 2:
        assert scenario.runs[1].baseline_of == "base"
        assert scenario.runs[1].engine.max_draft_len == 0


def test_the_search_reaches_the_edges_the_issue_names() -> None:
    # Every dimension the issue lists, over one modest draw of cases (no engine).
    seen: dict[str, set[str]] = {}
    twins: list[tuple[int, int]] = []

    @settings(FAST, max_examples=300)
    @given(case=cases(BOUNDS))
    def draw(case: dict[str, Any]) -> None:
        coverage = case_coverage(
            case,
            longest_prompt=BOUNDS.longest_prompt,
            max_num_requests=8,
            max_draft_len=3,
            sampling_fields=RequestSpec.model_fields,
        )
        for dimension, bins in coverage.counts.items():
            seen.setdefault(dimension, set()).update(bins)
        seeds = [r["seed"] & UINT64_MAX for r in case["requests"].values() if r.get("seed")]
        twins.extend(
            (a, b) for a in seeds for b in seeds if a != b and a & 0xFFFFFFFF == b & 0xFFFFFFFF
        )

    draw()
    assert {"greedy+seeded+unseeded"} <= seen["mix"]
    edges = {seed_class(seed) for seed in EDGE_SEEDS} - {"< 2^32", ">= 2^32", "negative"}
    assert len(seen["seeds"] & edges) >= 4 and ">= 2^32" in seen["seeds"], seen["seeds"]
    assert twins and "pair differing in high bits only" in seen["seeds"]
    assert {"1", "near the context length"} <= seen["prompt"]
    assert "warmup above max" in seen["warmup"] and "prior traffic" in seen["warmup"]
    assert any(b.endswith(", slots reused") for b in seen["slots"])
    assert {"K=0", "K=1", "K=4"} <= seen["drafts"]
    assert {"again", "alone", "permuted", "uptime", "overlap", "k0"} <= seen["runs"]
    assert "staggered" in seen["arrivals"]
    assert seen.get("statistical")
    # Every sampling knob of the scenario model is set somewhere.
    assert set(KNOB_NAMES) <= seen["knobs"], set(KNOB_NAMES) - seen["knobs"]


@FAST
@given(case=invariance_cases(replace(BOUNDS, knobs=("min_p", "logprobs"))))
def test_a_knob_the_engine_refuses_is_never_sent(case: dict[str, Any]) -> None:
    for request in case["requests"].values():
        assert set(request) - set(CORE_FIELDS) <= {"min_p", "logprobs"}


def test_a_case_with_greedy_requests_and_a_k0_run_holds_knobs_to_it() -> None:
    # knob-equivalence names the K = 0 run first; it rides with greedy-spec-equivalence.
    found: list[dict[str, Any]] = []

    @settings(FAST, max_examples=100)
    @given(case=invariance_cases(BOUNDS))
    def draw(case: dict[str, Any]) -> None:
        found.extend(e for e in case.get("expect", ()) if e["check"] == "knob-equivalence")

    draw()
    assert found and all(e["runs"] == ["k0", "base"] for e in found)


@pytest.mark.parametrize("seed", EDGE_SEEDS)
def test_edge_seeds_are_valid_request_seeds(seed: int) -> None:
    assert INT64_MIN <= seed <= UINT64_MAX
    RequestSpec.model_validate({"prompt": [1], "seed": seed})
    assert seed_class(seed)


@FAST
@given(case=cases(replace(BOUNDS, kinds=("greedy",))))
def test_greedy_kinds_draw_greedy_requests_and_no_statistical_case(case: dict[str, Any]) -> None:
    """--kinds greedy: every request greedy, so a known bug of the sampled path is not met."""
    assert all(r.get("temperature") == 0.0 for r in case["requests"].values()), case
    assert "distribution" not in case


def test_kinds_are_read_and_a_wrong_one_is_named() -> None:
    from specseed.core.errors import InputError
    from specseed.workflows.search import parse_kinds

    assert parse_kinds("greedy, seeded") == ("seeded", "greedy")
    with pytest.raises(InputError, match="not a kind: 'sampled'"):
        parse_kinds("greedy,sampled")
    with pytest.raises(InputError):
        parse_kinds(" , ")
