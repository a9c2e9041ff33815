"""Options of the TensorRT-LLM engine (``engine.options`` when ``engine.name: trtllm``).

Light module: pydantic only. The shared engine settings (``max_draft_len``,
``max_num_requests``, ``verification``, ``overlap_scheduler``, ``checkpoint``,
``draft_checkpoint``) come from model.yaml's ``engine`` block; these are TensorRT-LLM's own.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class TrtllmOptions(BaseModel):
    """TensorRT-LLM options specseed passes to tensorrt_llm.LLM (PyTorch backend)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    speculative_method: Literal["eagle3", "mtp"] = Field(
        default="eagle3",
        description="One-model speculation: EAGLE3 one-model (EagleDecodingConfig with "
        "eagle3_one_model=True; the draft head from engine.draft_checkpoint) or MTP "
        "(MTPDecodingConfig; the MTP layers inside engine.checkpoint).",
    )
    eagle3_layers_to_capture: tuple[int, ...] | None = Field(
        default=None,
        description="Target layers whose hidden states the EAGLE3 head reads "
        "(EagleDecodingConfig.eagle3_layers_to_capture); null: TensorRT-LLM's default.",
    )
    cuda_graphs: bool = Field(
        default=False,
        description="Run with CUDA graphs (cuda_graph_config). Off while tapping: graph "
        "replays bypass Python, so the tap would see no sampling call and the audit would "
        "have no RNG state.",
    )
    kv_cache_free_gpu_memory_fraction: float = Field(
        default=0.5,
        gt=0.0,
        le=1.0,
        description="KvCacheConfig.free_gpu_memory_fraction.",
    )
    max_seq_len: int | None = Field(
        default=None, ge=1, description="LLM max_seq_len; null: the checkpoint's."
    )
    end_id: int = Field(
        default=-1,
        description="SamplingParams.end_id. The default matches no token, so requests stop "
        "at max_tokens (ignore_eos is also set): checkpoints made by make-checkpoint have no "
        "tokenizer to take an end id from.",
    )
