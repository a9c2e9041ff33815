"""``engine.name: reference``: what specseed knows about the embedded engine without importing
it (torch stays unloaded until an audit uses it)."""

from __future__ import annotations

from specseed.engine_adapters.registry import EngineInfo, Placement
from specseed.traces.records import FULL_OBSERVABILITY

ENGINE = EngineInfo(
    name="reference",
    adapter="specseed.engine_adapters.reference.adapter:ReferenceEngine",
    summary="the embedded one-model speculative decoder (CPU, or CUDA)",
    observability=FULL_OBSERVABILITY,
    options="specseed.engine_adapters.reference.options:ReferenceOptions",
    requires=("torch",),
    placements=(
        Placement("cpu", "cpu", ready="specseed's CPU twins"),
        Placement(
            "cuda", "cpu", needs_cuda=True, ready="model on the GPU, sampling on the CPU twins"
        ),
        Placement(
            "cuda",
            "flashinfer",
            needs_cuda=True,
            needs=("flashinfer",),
            install="pip install 'specseed[gpu]'",
        ),
    ),
    # Shared engine keys until engines declared their own options.
    moved_options=frozenset({"defects", "rng_profile", "model_seed", "sampling_backend"}),
    builtin_model=True,
)
