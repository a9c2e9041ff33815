"""``engine.name: trtllm``: what specseed knows about TensorRT-LLM without importing it."""

from __future__ import annotations

from specseed.engine_adapters.registry import EngineInfo, Package, Placement
from specseed.traces.records import Observability

ENGINE = EngineInfo(
    name="trtllm",
    adapter="specseed.engine_adapters.trtllm.adapter:TrtllmEngine",
    summary="TensorRT-LLM's LLM API (PyTorch backend, one-model speculation)",
    observability=Observability(
        steps=True,
        rng_state="philox",
        drafts=False,
        logits=False,
        notes="per-row seed/offset of every flashinfer sampling call, through a tap; "
        "steps only under strict verification with a seed per sampled request",
    ),
    options="specseed.engine_adapters.trtllm.options:TrtllmOptions",
    contracts="specseed.engine_adapters.trtllm.contracts:CONTRACTS",
    requires=("tensorrt_llm",),
    install="pip install tensorrt-llm --extra-index-url https://pypi.nvidia.com",
    packages=(Package("tensorrt_llm", label="TensorRT-LLM"),),
    environment_variables=("TRTLLM_*",),
    placements=(Placement("cuda", "flashinfer", needs_cuda=True),),
)
