"""The adapter's table of vLLM releases, held to the release installed here, and what the
adapter does on a release it cannot observe or that lacks an option (versions.py).

Every other row is held to its release by ``tools/vllm_wrap_points.py`` (the wheels' sources)
and by ``specseed sweep`` (each release running; docs/sweep.md)."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
from specseed.engine_adapters.vllm.versions import (
    RELEASES,
    Support,
    differences,
    row_for,
    support,
)
from specseed.traces.records import TraceRecorder

pytestmark = pytest.mark.vllm


def test_the_installed_release_is_in_the_table_and_matches_it(engine) -> None:  # type: ignore[no-untyped-def]
    import vllm

    found = support(vllm.__version__)
    assert found.row is not None, f"vLLM {vllm.__version__} has no row"
    assert found.problems == ()
    assert found.observable
    assert engine.support.observable  # the adapter holds the row it loaded with


def test_a_wrap_point_that_differs_from_the_row_is_named() -> None:
    import vllm

    row = row_for(vllm.__version__)
    assert row is not None
    point = row.wraps[-1]
    changed = dataclasses.replace(point, parameters=(*point.parameters, "added"))
    missing = dataclasses.replace(row.wraps[0], name="no_such_function")
    problems = differences(dataclasses.replace(row, wraps=(changed, missing)))
    assert problems == (
        f"{point.label} takes ({', '.join(point.parameters)}), the table says "
        f"({', '.join(changed.parameters)})",
        f"{missing.label} is missing (AttributeError)",
    )


def test_rows_are_ordered_and_do_not_overlap() -> None:
    from packaging.version import Version

    for older, newer in itertools.pairwise(RELEASES):
        assert Version(older.first) <= Version(older.last) < Version(newer.first)


def test_an_unobservable_release_is_served_tokens_only_with_the_reason(  # type: ignore[no-untyped-def]
    engine, settings: EngineSettings
) -> None:
    plain = dataclasses.replace(settings, max_draft_len=0)
    request = RequestPlan("s", (12, 40, 7), 11, 0.9, top_k=0, top_p=1.0, max_tokens=8)
    plan = RunPlan("versions", "run", plain, (request,))
    kept = engine.support
    observed = engine.run(plan, TraceRecorder())
    try:
        engine.support = Support(kept.version, kept.row, ("Sampler.sample is missing",))
        blind = engine.run(dataclasses.replace(plan, run="blind"), TraceRecorder())
    finally:
        engine.support = kept
    assert not blind.failed, blind.end.failure
    assert blind.header.observability.rng_state is None
    assert "Sampler.sample is missing: tokens only" in blind.header.observability.notes
    assert blind.steps == ()
    assert observed.steps  # the same run observed records its steps
    assert blind.end.outputs == observed.end.outputs  # and the same tokens


def test_a_value_the_release_lacks_is_refused_before_the_engine_starts(  # type: ignore[no-untyped-def]
    engine, settings: EngineSettings
) -> None:
    from specseed.engine_adapters.vllm.options import VllmOptions

    kept = engine.support
    probabilistic = dataclasses.replace(
        settings, options=VllmOptions(draft_sample_method="probabilistic")
    )
    try:
        engine.support = Support("0.20.0", row_for("0.20.0"))
        assert engine.refusal(settings) is None  # greedy drafts: 0.20.0's only way
        assert "draft_sample_method" not in engine.speculative_config(settings)
        refused = engine.refusal(probabilistic)
        plan = RunPlan("versions", "refused", probabilistic, ())
        start = engine.start_run(plan)
        engine.support = Support("0.21.0", row_for("0.21.0"))
        spelled = engine.speculative_config(probabilistic)
    finally:
        engine.support = kept
    assert (
        refused
        == "vLLM 0.20.0 cannot take draft_sample_method 'probabilistic' (the release lacks it)"
    )
    assert start.not_served == refused
    assert spelled is not None and spelled["draft_sample_method"] == "gumbel"
