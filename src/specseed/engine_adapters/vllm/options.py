"""Options of the ``vllm`` engine (a pydantic model, validated like the rest of model.yaml).

Everything here is passed to ``vllm.LLM`` as it is, on any device; nothing is CPU-only. The
defaults fit the tiny checkpoint ``specseed make-checkpoint`` writes.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SpeculativeMethod = Literal["eagle3", "eagle", "mtp", "ngram", "draft_model"]
"""The speculative methods of vLLM 0.32.0 that fit one-model or draft-head speculation
(``vllm/config/speculative.py`` ``SpeculativeConfig.method``): EAGLE and EAGLE3 heads and a
separate draft model read ``engine.draft_checkpoint``; MTP uses the target's own MTP layers
(the target must have them); ngram needs no model."""


class VllmOptions(BaseModel):
    """vLLM's own options (engine.options when engine.name is vllm)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ignore_eos: bool = Field(
        default=True,
        description="What a request that leaves ignore_eos unset gets: true runs every "
        "request to max_tokens (full-length streams to compare); false keeps vLLM's default.",
    )
    speculative_method: SpeculativeMethod = Field(
        default="eagle3", description="vLLM speculative method when max_draft_len > 0."
    )
    draft_sample_method: Literal["greedy", "probabilistic"] = Field(
        default="greedy",
        description="How drafts are sampled (SpeculativeConfig.draft_sample_method): argmax, or "
        "sampled from the draft distribution (vLLM 0.32.0 draws those from the global RNG).",
    )
    rejection_sample_method: Literal["standard", "synthetic", "block"] = Field(
        default="standard", description="SpeculativeConfig.rejection_sample_method."
    )
    synthetic_acceptance_rates: tuple[float, ...] | None = Field(
        default=None,
        description="Per-position acceptance rates for rejection_sample_method synthetic.",
    )
    prompt_lookup_min: int = Field(default=1, ge=1, description="ngram: shortest n-gram matched.")
    prompt_lookup_max: int = Field(default=4, ge=1, description="ngram: longest n-gram matched.")
    use_fp64_gumbel: bool = Field(
        default=False, description="ModelConfig.use_fp64_gumbel: float64 exponential noise."
    )
    seed: int = Field(default=0, ge=0, description="Engine seed: seeds the global generator.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="float32", description="Compute dtype (vLLM's dtype)."
    )
    max_model_len: int = Field(default=512, ge=16, description="Longest prompt + output.")
    kv_cache_memory_bytes: int | None = Field(
        default=64 << 20,
        ge=1,
        description="KV cache size; null lets vLLM size it from gpu_memory_utilization.",
    )
    enforce_eager: bool = Field(default=True, description="No CUDA graphs / torch.compile.")
    observe_rng: bool = Field(
        default=True,
        description="Wrap vLLM's RNG consumers to record every draw (off: tokens only).",
    )
    reuse_engine: bool = Field(
        default=True,
        description="Serve runs on one engine where the checks allow (a run with unseeded "
        "sampled requests always gets a fresh one).",
    )
    llm_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="More keyword arguments for vllm.LLM, as they are."
    )
    speculative_config: dict[str, Any] = Field(
        default_factory=dict, description="More keys for vLLM's speculative_config."
    )
