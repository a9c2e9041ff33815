"""Seed collisions from tokens alone (``checks/seed_collisions.py``): a seed kept in 32 bits
fails, a correct engine passes, whether chance is bounded by the target's probabilities or,
with no model, by control pairs."""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specseed.checks.seed_collisions import (
    MIN_TOKENS,
    _any_same,
    _count_pairs,
    _hypergeometric_tail,
    _same_seed,
)
from specseed.plan.planning import plan_audit
from specseed.run.execute import evaluate, run_audit
from specseed.run.results import ScenarioResult
from specseed.scenarios.schema import AuditConfig, EngineConfig
from specseed.traces.records import RequestInfo


def _distinct_seeds(*defects: str) -> ScenarioResult:
    config = AuditConfig(
        engine=EngineConfig(options={"defects": list(defects)}), scenarios=["distinct-seeds"]
    )
    return run_audit(config, plan_audit(config, Path.cwd()), Path.cwd()).scenarios[0]


@pytest.fixture(scope="module")
def truncated() -> ScenarioResult:
    return _distinct_seeds("seed-high-bits-dropped")


def _collisions(findings: list) -> object:  # type: ignore[type-arg]
    [finding] = [f for f in findings if f.check == "seed-collisions"]
    return finding


def test_a_correct_engine_passes_and_a_seed_kept_in_32_bits_fails(
    truncated: ScenarioResult,
) -> None:
    good = _collisions(list(_distinct_seeds().findings))
    assert good.status == "pass" and "28 pairs" in good.message  # type: ignore[attr-defined]
    bad = _collisions(list(truncated.findings))
    assert bad.status == "fail"  # type: ignore[attr-defined]
    assert {s.defect for s in bad.suspects} == {"seed-high-bits-dropped"}  # type: ignore[attr-defined]
    assert len(bad.details) == 4 and all(  # type: ignore[attr-defined]
        "the target's probabilities" in line
        for line in bad.details  # type: ignore[attr-defined]
    )
    assert set(bad.requests) == {  # type: ignore[attr-defined]
        "s1", "s1-high", "s2", "s2-high", "s3", "s3-high", "s-neg", "s-neg-high"
    }  # fmt: skip


def test_without_a_model_control_pairs_bound_chance(truncated: ScenarioResult) -> None:
    # The same streams from an engine whose model specseed cannot load (as a server over
    # HTTP): 4 of 4 tested pairs identical against 0 of 24 controls.
    traces = {
        name: replace(
            trace,
            header=replace(
                trace.header,
                engine_config=replace(trace.header.engine_config, name="no-model-here"),
            ),
        )
        for name, trace in truncated.traces.items()
    }
    bad = _collisions(evaluate(truncated.scenario, traces, "ideal"))
    assert bad.status == "fail"  # type: ignore[attr-defined]
    assert {s.defect for s in bad.suspects} == {"seed-high-bits-dropped"}  # type: ignore[attr-defined]
    assert all("4 of 4 tested pairs identical against 0 of 24" in d for d in bad.details)  # type: ignore[attr-defined]
    assert _hypergeometric_tail(28, 4, 4, 4) == pytest.approx(1 / 20475)


def test_penalised_children_that_repeat_on_a_correct_engine_are_no_collision(
    tmp_path: Path,
) -> None:
    # Found by specseed search on the correct reference engine: repetition_penalty 0.5 and
    # top_p 0.25 make two children of n repeat each other; the oracle's probabilities leave
    # the penalty out (they called it a 5e-301 chance), so they bound nothing here.
    scenario = tmp_path / "penalised.yaml"
    scenario.write_text(
        "name: penalised\ndescription: d\nrequests:\n"
        "  r0: {prompt: [0], seed: 0, max_tokens: 1}\n"
        "  r1: {repetition_penalty: 0.5, n: 2, prompt: ' ', seed: 0, top_p: 0.25, "
        "max_tokens: 8}\n"
        "runs:\n- {name: base, requests: [r0, r1]}\n"
    )
    config = AuditConfig(scenarios=[str(scenario)])
    result = run_audit(config, plan_audit(config, tmp_path), tmp_path)
    statuses = [f.status for f in result.findings if f.check == "seed-collisions"]
    assert "fail" not in statuses, result.findings


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.sampled_from([1, 2, 1 + 2**64, -1, 2**64 - 1])),
            st.integers(0, 2),
            st.integers(6, 9),
        ),
        max_size=12,
    )
)
def test_pairs_are_counted_and_found_alike_as_the_pair_list_has_them(
    members: list[tuple[int | None, int, int]],
) -> None:
    # The linear shortcuts against the pair list they stand for: compared pairs (a's stream
    # long enough, seeds unequal mod 2**64) and whether any of them returned one stream.
    infos = [
        RequestInfo(
            request_id=f"r{i}", phase="scenario", prompt_ids=(1,), seed=seed,
            temperature=1.0, top_k=0, top_p=1.0, max_tokens=9, arrival_step=0,
        )
        for i, (seed, _, _) in enumerate(members)
    ]  # fmt: skip
    outputs = {f"r{i}": (stream,) * length for i, (_, stream, length) in enumerate(members)}
    pairs = [
        (a, b)
        for a, b in combinations(infos, 2)
        if not _same_seed(a, b) and len(outputs[a.request_id]) >= MIN_TOKENS
    ]
    assert _count_pairs(infos, outputs) == len(pairs)
    same = any(outputs[a.request_id] == outputs[b.request_id] for a, b in pairs)
    assert _any_same(infos, outputs) == same
