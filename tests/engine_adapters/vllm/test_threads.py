"""vLLM serves on one torch thread on the CPU, as vLLM means to (``_serve_on_one_thread``):
in-process, vLLM's own call to that end does nothing, and an engine on every core spun
against any other work on the machine (2.8x slower beside one busy process on 2 cores)."""

from __future__ import annotations

import os

import pytest

from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
from specseed.traces.records import TraceRecorder

pytestmark = pytest.mark.vllm


@pytest.mark.skipif("OMP_NUM_THREADS" in os.environ, reason="OMP_NUM_THREADS is set: kept")
def test_the_engine_serves_on_one_thread_and_the_trace_says_so(  # type: ignore[no-untyped-def]
    engine, settings: EngineSettings
) -> None:
    import torch

    request = RequestPlan("s", (12, 40, 7), 11, 0.9, top_k=0, top_p=1.0, max_tokens=2)
    trace = engine.run(RunPlan("threads", "one", settings, (request,)), TraceRecorder())
    assert not trace.failed, trace.end.failure
    assert torch.get_num_threads() == 1
    assert trace.header.environment["torch_threads"] == "1"
