"""Options of the TensorRT-LLM engine (``engine.options`` when ``engine.name: trtllm``).

Light module: pydantic only. The shared engine settings (``max_draft_len``,
``max_num_requests``, ``verification``, ``overlap_scheduler``, ``checkpoint``,
``draft_checkpoint``) come from model.yaml's ``engine`` block; these are TensorRT-LLM's own.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


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
    max_total_draft_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Draft tokens in the EAGLE3 draft tree (DecodingBaseConfig."
        "max_total_draft_tokens); null: a linear chain of max_draft_len. Needed with a tree "
        "(eagle_choices or use_dynamic_tree): the slot-span RNG layouts put "
        "max_total_draft_tokens + 1 target slots before the draft steps.",
    )
    eagle_choices: tuple[tuple[int, ...], ...] | None = Field(
        default=None,
        description="A static EAGLE3 draft tree: one path of child indices per node "
        "(EagleDecodingConfig.eagle_choices); null: no static tree.",
    )
    use_dynamic_tree: bool = Field(
        default=False,
        description="A dynamic EAGLE3 draft tree (EagleDecodingConfig.use_dynamic_tree); "
        "exclusive with eagle_choices.",
    )
    dynamic_tree_max_top_k: int | None = Field(
        default=None,
        ge=1,
        description="Nodes expanded per draft layer of a dynamic tree "
        "(EagleDecodingConfig.dynamic_tree_max_topK).",
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

    @model_validator(mode="after")
    def _one_tree(self) -> TrtllmOptions:
        tree = self.eagle_choices is not None or self.use_dynamic_tree
        if self.eagle_choices is not None and self.use_dynamic_tree:
            raise ValueError("eagle_choices and use_dynamic_tree exclude each other")
        if tree and self.speculative_method != "eagle3":
            raise ValueError("draft trees (eagle_choices, use_dynamic_tree) are EAGLE3 options")
        if tree and self.max_total_draft_tokens is None:
            raise ValueError(
                "a draft tree needs max_total_draft_tokens: the RNG layout's target slots "
                "depend on it"
            )
        if self.dynamic_tree_max_top_k is not None and not self.use_dynamic_tree:
            raise ValueError("dynamic_tree_max_top_k needs use_dynamic_tree: true")
        return self

    @property
    def tree(self) -> bool:
        """Whether drafting is a tree (static or dynamic) rather than a linear chain."""
        return self.eagle_choices is not None or self.use_dynamic_tree
