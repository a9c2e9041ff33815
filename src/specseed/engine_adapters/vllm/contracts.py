"""vLLM's RNG layout, as a contract (``EngineInfo.contracts`` of the ``vllm`` engine): a
stateful generator per seeded request. The mechanism (``RngContract``) is
``specseed.core.contracts``.
"""

from __future__ import annotations

from specseed.core.contracts import RngContract

VLLM_GENERATORS = RngContract(
    name="vllm-generators",
    summary=(
        "vLLM V1: each seeded request owns a torch.Generator seeded with its seed, consumed "
        "sequentially by its sampling events (offset = draws so far, subsequence 0); "
        "unseeded requests draw from the engine's global generator"
    ),
    unseeded="global-stream",
    row_subsequence=False,
    slot_stride=1,
    separate_target_slots=False,
    offsets="sequential",
    reference=(
        "vLLM 0.32.0 vllm/v1/worker/gpu_model_runner.py (_update_states: "
        "torch.Generator.manual_seed(sampling_params.seed)), vllm/v1/worker/gpu_input_batch.py "
        "(InputBatch.generators)"
    ),
)
"""Offsets count the generator's outputs: 32-bit Mersenne Twister words on the CPU, the
Philox offset (``Generator.get_offset()``) on CUDA. specseed.engine_adapters.vllm.observe
lists every point where vLLM 0.32.0 consumes them."""

CONTRACTS: tuple[RngContract, ...] = (VLLM_GENERATORS,)
"""vLLM's contracts."""
