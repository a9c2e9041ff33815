"""model.yaml -> TensorRT-LLM arguments, as pure functions (no tensorrt_llm import).

Every name below was checked against TensorRT-LLM's source as stored in the search index
(late 2026; the 1.x ``tensorrt_llm.llmapi`` API):

- ``tensorrt_llm/llmapi/__init__.py`` exports ``LLM``, ``SamplingParams``, ``KvCacheConfig``,
  ``CudaGraphConfig``, ``EagleDecodingConfig``, ``MTPDecodingConfig``.
- ``tensorrt_llm/llmapi/llm_args.py``: ``TorchLlmArgs`` fields ``disable_overlap_scheduler``,
  ``cuda_graph_config: Optional[CudaGraphConfig]`` (None turns CUDA graphs off),
  ``skip_tokenizer_init``, ``max_batch_size``, ``max_seq_len``, ``kv_cache_config``,
  ``speculative_config``; ``DecodingBaseConfig`` fields ``max_draft_len``,
  ``speculative_model`` (``speculative_model_dir`` in releases before it) and
  ``use_rejection_sampling`` (one-model paths; all-greedy batches always take argmax);
  ``EagleDecodingConfig`` fields ``eagle3_one_model``, ``eagle3_layers_to_capture``
  (``Optional[Set[int]]``); ``MTPDecodingConfig.num_nextn_predict_layers``;
  ``DecodingBaseConfig.max_total_draft_tokens`` (draft tokens in the tree; equals
  ``max_draft_len`` for a linear chain) and the EAGLE3 tree fields ``eagle_choices``
  (``Optional[List[List[int]]]``), ``use_dynamic_tree`` and ``dynamic_tree_max_topK``.
- ``tensorrt_llm/sampling_params.py`` (commit 000a01de): ``SamplingParams`` fields ``end_id``,
  ``max_tokens``, ``top_k`` (None: all logits), ``top_p``, ``seed``, ``temperature``,
  ``ignore_eos``, ``detokenize``, and the knobs under the scenario's names: ``min_p``,
  ``presence_penalty``, ``frequency_penalty``, ``repetition_penalty``, ``stop_token_ids``,
  ``stop``, ``logprobs``, ``n``. It has no ``logit_bias``: ``embedding_bias`` takes an fp32
  tensor of ``[vocab_size]`` added to the logits, which is what a logit bias is.

The adapter turns these plain specifications into TensorRT-LLM objects; tests check the
mapping without TensorRT-LLM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from specseed.engine_adapters.base import EngineSettings, RequestPlan
from specseed.engine_adapters.trtllm.options import TrtllmOptions


@dataclass(frozen=True)
class SpeculativeSpec:
    """A speculative config: which ``tensorrt_llm.llmapi`` class, with which arguments."""

    config_class: Literal["EagleDecodingConfig", "MTPDecodingConfig"]
    kwargs: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class LlmSpec:
    """Everything ``tensorrt_llm.LLM(...)`` is constructed with."""

    kwargs: dict[str, object]
    """Plain keyword arguments of ``LLM`` (the configs below are added by the adapter)."""
    kv_cache: dict[str, object]
    """``KvCacheConfig(**kv_cache)``."""
    speculative: SpeculativeSpec | None
    """None for a non-speculative run (``max_draft_len: 0``)."""
    cuda_graphs: bool
    """True: ``CudaGraphConfig()``; False: ``cuda_graph_config=None``."""


class ConfigurationError(ValueError):
    """model.yaml asks for something this engine cannot be configured to do."""


def llm_spec(settings: EngineSettings, options: TrtllmOptions) -> LlmSpec:
    """The ``LLM`` arguments for one run's settings."""
    if settings.checkpoint is None:
        raise ConfigurationError(
            "engine trtllm needs engine.checkpoint: a local checkpoint directory (specseed "
            "make-checkpoint writes one); nothing is downloaded from a hub"
        )
    kwargs: dict[str, object] = {
        "model": str(settings.checkpoint),
        "max_batch_size": settings.max_num_requests,
        "disable_overlap_scheduler": not settings.overlap_scheduler,
        # Checkpoint directories made by make-checkpoint carry no tokenizer; prompts are ids.
        "skip_tokenizer_init": True,
    }
    if options.max_seq_len is not None:
        kwargs["max_seq_len"] = options.max_seq_len
    speculative = None
    if settings.max_draft_len > 0:
        speculative = _speculative(settings, options)
    return LlmSpec(
        kwargs=kwargs,
        kv_cache={"free_gpu_memory_fraction": options.kv_cache_free_gpu_memory_fraction},
        speculative=speculative,
        cuda_graphs=options.cuda_graphs,
    )


def _speculative(settings: EngineSettings, options: TrtllmOptions) -> SpeculativeSpec:
    common: dict[str, object] = {
        "max_draft_len": settings.max_draft_len,
        "use_rejection_sampling": settings.verification == "rejection",
    }
    if options.speculative_method == "mtp":
        # MTP layers live inside the target checkpoint; one per draft position.
        return SpeculativeSpec(
            "MTPDecodingConfig", {**common, "num_nextn_predict_layers": settings.max_draft_len}
        )
    if settings.draft_checkpoint is None:
        raise ConfigurationError(
            "engine trtllm with speculative_method eagle3 needs engine.draft_checkpoint: the "
            "EAGLE3 head's checkpoint directory"
        )
    kwargs = {
        **common,
        "speculative_model": str(settings.draft_checkpoint),
        "eagle3_one_model": True,
    }
    if options.eagle3_layers_to_capture is not None:
        kwargs["eagle3_layers_to_capture"] = set(options.eagle3_layers_to_capture)
    if options.max_total_draft_tokens is not None:
        if options.max_total_draft_tokens < settings.max_draft_len:
            raise ConfigurationError(
                f"max_total_draft_tokens {options.max_total_draft_tokens} is below "
                f"max_draft_len {settings.max_draft_len}: a tree holds at least one draft "
                "token per layer"
            )
        kwargs["max_total_draft_tokens"] = options.max_total_draft_tokens
    if options.eagle_choices is not None:
        kwargs["eagle_choices"] = [list(path) for path in options.eagle_choices]
    if options.use_dynamic_tree:
        kwargs["use_dynamic_tree"] = True
        if options.dynamic_tree_max_top_k is not None:
            kwargs["dynamic_tree_max_topK"] = options.dynamic_tree_max_top_k
    return SpeculativeSpec("EagleDecodingConfig", kwargs)


def tree_budget(settings: EngineSettings, options: TrtllmOptions) -> int | None:
    """``max_total_draft_tokens`` of a tree drafter (None: linear drafting), the number the
    slot-span RNG layouts size their target slots by (contracts ``max_total_draft_tokens``)."""
    if settings.max_draft_len == 0 or not options.tree:
        return None
    return options.max_total_draft_tokens


SAME_NAMED_KNOBS = (
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "ignore_eos",
    "logprobs",
    "n",
)
"""Knobs ``SamplingParams`` takes under the scenario's name and type."""


def sampling_kwargs(
    request: RequestPlan, options: TrtllmOptions, vocab_size: int | None = None
) -> dict[str, object]:
    """``SamplingParams`` arguments for one request.

    ``top_k: 0`` (no top-k) becomes None, TensorRT-LLM's "all logits"; temperature 0 is
    greedy; ``end_id`` is the option's. Every other knob is sent only where the request sets
    it (an unset one keeps TensorRT-LLM's default); ``logit_bias`` becomes
    ``embedding_bias``, one float per vocabulary entry (``vocab_size`` needed; the adapter
    makes it a tensor), and stop strings need ``detokenize``.
    """
    knobs = request.knobs()
    kwargs: dict[str, object] = {
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "top_k": request.top_k if request.top_k > 0 else None,
        "top_p": request.top_p,
        "seed": request.seed,
        "end_id": options.end_id,
        "detokenize": "stop" in knobs,
    }
    kwargs.update({k: v for k, v in knobs.items() if k in SAME_NAMED_KNOBS})
    if "stop_token_ids" in knobs:
        kwargs["stop_token_ids"] = list(knobs["stop_token_ids"])
    if "stop" in knobs:
        kwargs["stop"] = list(knobs["stop"])
    if "logit_bias" in knobs:
        if vocab_size is None:
            raise ConfigurationError("logit_bias needs the checkpoint's vocab_size")
        bias = [0.0] * vocab_size
        for token, value in knobs["logit_bias"]:
            if not 0 <= token < vocab_size:
                raise ConfigurationError(
                    f"logit_bias names token {token}, outside the vocabulary (size {vocab_size})"
                )
            bias[token] = float(value)
        kwargs["embedding_bias"] = bias
    return kwargs
