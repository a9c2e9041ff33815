"""What the vLLM tests share beyond fixtures: the engine section of their audits."""

from __future__ import annotations

from typing import Any

from specseed.models.make_checkpoint import CheckpointBundle
from specseed.scenarios.schema import EngineConfig


def vllm_engine(checkpoint: CheckpointBundle, **options: Any) -> EngineConfig:
    """vLLM on the suite's checkpoint (EAGLE3 draft), held to the vLLM contract."""
    return EngineConfig(
        name="vllm",
        checkpoint=checkpoint.target,
        draft_checkpoint=checkpoint.draft,
        contract="vllm-generators",
        options=options,
    )
