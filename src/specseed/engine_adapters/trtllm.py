"""The TensorRT-LLM adapter (``engine.name: trtllm``).

TensorRT-LLM is not on the registries this project installs from (PyPI hosts only a
placeholder), so it is an optional extra imported only when this engine is chosen (the
registry refuses earlier, with the install command, when the package cannot be found).
Observing its RNG state (a tap on the ``flashinfer.sampling`` calls of the one-model
speculative path) is not built yet; until it is, choosing this engine stops with a clear
error rather than auditing something it does not observe.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from specseed.engine_adapters.base import EngineAdapter, EngineSettings, RunPlan
from specseed.engine_adapters.registry import get_engine
from specseed.errors import EngineError, EngineUnavailable
from specseed.trace import TraceRecorder


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
    observability = get_engine("trtllm").observability

    def __init__(self, settings: EngineSettings) -> None:
        super().__init__(settings)
        module = _import_tensorrt_llm()
        version = getattr(module, "__version__", "unknown")
        raise EngineError(
            f"tensorrt_llm {version} is installed, but specseed cannot observe its RNG state "
            "yet: the TensorRT-LLM adapter is not built",
            hint="audit the reference engine (engine.name: reference) for now",
        )

    def serve(
        self, plan: RunPlan, recorder: TraceRecorder
    ) -> Mapping[str, tuple[int, ...]]:  # pragma: no cover
        raise EngineError("the TensorRT-LLM adapter is not built")

    def encode(self, prompt: tuple[int, ...] | str) -> tuple[int, ...]:  # pragma: no cover
        raise EngineError("the TensorRT-LLM adapter is not built")

    def environment(self) -> dict[str, str]:  # pragma: no cover
        return {"engine": "trtllm"}
