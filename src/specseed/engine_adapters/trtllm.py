"""The TensorRT-LLM adapter (``engine.name: trtllm``).

TensorRT-LLM is not on the registries this project installs from (PyPI hosts only a
placeholder), so it is an optional extra imported only when this engine is chosen. Observing
its RNG state (wrapping the host-side method that fills the seed/offset buffers of the
one-model speculative path) is not built yet; until it is, choosing this engine stops with a
clear error rather than auditing something it does not observe.
"""

from __future__ import annotations

import importlib

from specseed.engine_adapters.base import EngineAdapter, EngineSettings, RunPlan
from specseed.errors import EngineError, EngineUnavailable
from specseed.trace import RunTrace, TraceRecorder


def _import_tensorrt_llm() -> object:
    try:
        return importlib.import_module("tensorrt_llm")
    except ImportError as exc:
        raise EngineUnavailable(
            f"engine 'trtllm' needs the tensorrt_llm package, which is not installed ({exc})",
            hint="install TensorRT-LLM from NVIDIA's package index (pip install "
            "tensorrt-llm --extra-index-url https://pypi.nvidia.com); PyPI's tensorrt-llm is "
            "only a placeholder",
        ) from exc


class TrtllmEngine(EngineAdapter):
    """TensorRT-LLM's LLM API with an EAGLE3 one-model or MTP speculative config."""

    name = "trtllm"

    def __init__(self, settings: EngineSettings) -> None:
        module = _import_tensorrt_llm()
        version = getattr(module, "__version__", "unknown")
        raise EngineError(
            f"tensorrt_llm {version} is installed, but specseed cannot observe its RNG state "
            "yet: the TensorRT-LLM adapter is not built",
            hint="audit the reference engine (engine.name: reference) for now",
        )

    def run(self, plan: RunPlan, recorder: TraceRecorder) -> RunTrace:  # pragma: no cover
        raise EngineError("the TensorRT-LLM adapter is not built")

    def environment(self) -> dict[str, str]:  # pragma: no cover
        return {"engine": "trtllm"}
