"""A restarted engine keeps what vLLM would only redo, and serves as a plain start would.

The adapter's starts after the first skip vLLM's second registration of its CPU kernel
overrides and run vLLM's start-up collections on a frozen heap (``VllmEngine._start``); what
the engine computes must not notice.
"""

from __future__ import annotations

import dataclasses
import gc

import pytest

from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
from specseed.traces.records import TraceRecorder

pytestmark = pytest.mark.vllm


def _requests() -> tuple[RequestPlan, ...]:
    return (
        RequestPlan("s", (12, 40, 7), 11, 0.9, top_k=0, top_p=1.0, max_tokens=8),
        RequestPlan("g", (5, 60, 61, 2), None, 0.0, top_k=0, top_p=1.0, max_tokens=8),
    )


def test_restarts_register_the_kernel_overrides_once_and_serve_the_same_tokens(  # type: ignore[no-untyped-def]
    engine, settings: EngineSettings
) -> None:
    from vllm.triton_utils import dispatcher

    from specseed.engine_adapters.vllm.options import VllmOptions

    # No speculation: the one path vLLM 0.32.0's CPU build serves deterministically (see
    # test_observation.py); reuse_engine off makes every run a fresh start.
    plain = dataclasses.replace(settings, max_draft_len=0, options=VllmOptions(reuse_engine=False))
    starts = engine.engine_starts
    traces = [
        engine.run(RunPlan("restart", f"run{i}", plain, _requests()), TraceRecorder())
        for i in range(2)
    ]
    assert engine.engine_starts == starts + 2
    for trace in traces:
        assert not trace.failed, trace.end.failure
        assert trace.header.fresh_engine is True
    assert traces[0].end.outputs == traces[1].end.outputs
    # Registered once: a second registration would record the first one's wrapper as the
    # kernel it overrides. Every override is still in place.
    assert dispatcher._registry, "vLLM registered no CPU kernel override"
    for name, (original, _impl) in dispatcher._registry.items():
        assert not isinstance(original, dispatcher.KernelOverride), name
        host, attr = dispatcher._resolve_kernel(name)
        assert isinstance(getattr(host, attr), dispatcher.KernelOverride), name
    # vLLM's shutdown unfreezes the heap frozen for the start: closing leaves nothing frozen.
    engine.close()
    assert gc.get_freeze_count() == 0


def test_a_failed_start_leaves_the_heap_unfrozen(
    engine, settings: EngineSettings, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    from specseed.engine_adapters.vllm.adapter import VllmEngine

    engine.close()  # one live engine per process
    broken = dataclasses.replace(settings, checkpoint=tmp_path, max_draft_len=0)
    adapter = VllmEngine(broken)
    with pytest.raises(ValueError, match=r"config\.json"):  # vLLM refuses the directory
        adapter.start_run(RunPlan("restart", "broken", broken, _requests()))
    assert adapter.engine_starts == 0
    assert gc.get_freeze_count() == 0
