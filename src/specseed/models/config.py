"""Model configurations of the reference engine, read from and written to config.json.

:class:`LlamaConfig` mirrors the fields of a Hugging Face ``LlamaForCausalLM`` config.json that
change the computation; :class:`Eagle3DraftConfig` mirrors an EAGLE3 draft config.json
(``LlamaForCausalLMEagle3``) as TensorRT-LLM's ``Eagle3ForCausalLM`` reads it. Keys that do not
change the computation (``initializer_range``, ``use_cache``, ...) are ignored on read; keys that
would change it in a way this engine does not implement are refused with an ``EngineError``
rather than silently computing something else.

Both transformers 4.x (``rope_theta`` + ``rope_scaling``) and 5.x (``rope_parameters``) spellings
are read; the 4.x spelling is written, because TensorRT-LLM pins a transformers 4.x release and
transformers 5.x still reads it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from specseed.core.errors import EngineError

_DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class RopeScaling:
    """Llama 3.1 style RoPE frequency scaling (``rope_type: llama3``)."""

    factor: float
    """Divides the low frequencies."""
    low_freq_factor: float
    """Wavelengths above ``original_max_position_embeddings / low_freq_factor`` are scaled."""
    high_freq_factor: float
    """Wavelengths below ``original_max_position_embeddings / high_freq_factor`` are kept."""
    original_max_position_embeddings: int
    """The context length the model was pretrained with."""

    def __post_init__(self) -> None:
        # Each divides: a zero, a negative or equal factors would leave NaN or a
        # ZeroDivisionError where the engine builds its RoPE table.
        if not (
            self.factor > 0
            and 0 < self.low_freq_factor < self.high_freq_factor
            and self.original_max_position_embeddings >= 1
        ):
            raise EngineError(
                "rope_scaling (llama3): needs factor > 0, 0 < low_freq_factor < "
                f"high_freq_factor and original_max_position_embeddings >= 1; got {self.to_dict()}"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rope_type": "llama3",
            "factor": self.factor,
            "low_freq_factor": self.low_freq_factor,
            "high_freq_factor": self.high_freq_factor,
            "original_max_position_embeddings": self.original_max_position_embeddings,
        }


@dataclass(frozen=True)
class LlamaConfig:
    """The computation-relevant fields of a Hugging Face Llama config.json."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int | None = None
    """Per-head width; ``None`` becomes ``hidden_size // num_attention_heads`` (HF's default)
    at construction, so equal configs compare equal however they were spelled."""
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling | None = None
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    """The output projection reuses ``embed_tokens`` (no ``lm_head.weight`` in the checkpoint)."""
    attention_bias: bool = False
    mlp_bias: bool = False
    torch_dtype: str = "float32"
    """Storage dtype of the checkpoint's weights; computation is always float32."""
    bos_token_id: int | None = None
    eos_token_id: int | tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        _resolve_head_dim(self)
        _check_attention_shape(
            "LlamaConfig",
            self.hidden_size,
            self.num_attention_heads,
            self.num_key_value_heads,
            self.head_dim,
        )
        for name in (
            "vocab_size",
            "intermediate_size",
            "num_hidden_layers",
            "max_position_embeddings",
        ):
            if getattr(self, name) < 1:
                raise EngineError(
                    f"LlamaConfig: {name} must be positive, got {getattr(self, name)}"
                )
        if self.torch_dtype not in _DTYPES:
            raise EngineError(
                f"LlamaConfig: torch_dtype {self.torch_dtype!r} is not supported",
                hint=f"use one of {', '.join(_DTYPES)}",
            )

    @property
    def resolved_head_dim(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, source: str = "config.json") -> LlamaConfig:
        """Read a Hugging Face config.json mapping; refuse what this engine cannot compute
        (``EngineError`` naming the file, a field of the wrong type included)."""
        with _fields_of(source):
            return cls._from_dict(raw, source=source)

    @classmethod
    def _from_dict(cls, raw: Mapping[str, Any], *, source: str) -> LlamaConfig:
        architectures = raw.get("architectures") or []
        if raw.get("model_type", "llama") != "llama" or (
            architectures and "LlamaForCausalLM" not in architectures
        ):
            raise EngineError(
                f"{source}: not a Llama checkpoint "
                f"(model_type={raw.get('model_type')!r}, architectures={architectures!r})",
                hint="the reference engine loads LlamaForCausalLM checkpoints only",
            )
        _refuse_unsupported(raw, source)
        theta, scaling = _read_rope(raw, source)
        return cls(
            vocab_size=_int(raw, "vocab_size", source),
            hidden_size=_int(raw, "hidden_size", source),
            intermediate_size=_int(raw, "intermediate_size", source),
            num_hidden_layers=_int(raw, "num_hidden_layers", source),
            num_attention_heads=_int(raw, "num_attention_heads", source),
            num_key_value_heads=int(
                raw.get("num_key_value_heads") or _int(raw, "num_attention_heads", source)
            ),
            head_dim=int(raw["head_dim"]) if raw.get("head_dim") else None,
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            rope_theta=theta,
            rope_scaling=scaling,
            max_position_embeddings=int(raw.get("max_position_embeddings", 2048)),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            attention_bias=bool(raw.get("attention_bias", False)),
            mlp_bias=bool(raw.get("mlp_bias", False)),
            torch_dtype=_read_dtype(raw, source),
            bos_token_id=raw.get("bos_token_id"),
            eos_token_id=_read_eos(raw.get("eos_token_id")),
        )

    def to_dict(self) -> dict[str, Any]:
        """The config.json of a ``LlamaForCausalLM`` checkpoint (transformers 4.x spelling)."""
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.resolved_head_dim,
            "hidden_act": "silu",
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": self.rope_scaling.to_dict() if self.rope_scaling else None,
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings,
            "attention_bias": self.attention_bias,
            "attention_dropout": 0.0,
            "mlp_bias": self.mlp_bias,
            "pretraining_tp": 1,
            "torch_dtype": self.torch_dtype,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": list(self.eos_token_id)
            if isinstance(self.eos_token_id, tuple)
            else self.eos_token_id,
            "use_cache": True,
        }


@dataclass(frozen=True)
class Eagle3DraftConfig:
    """The fields of an EAGLE3 draft config.json (``LlamaForCausalLMEagle3``, one layer).

    The draft layer is a Llama decoder layer whose q/k/v projections take ``2 * hidden_size``
    inputs. ``vocab_size`` is the target's vocabulary; ``draft_vocab_size`` the draft lm_head's
    rows (``d2t`` maps them to target ids when the two differ).
    """

    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    draft_vocab_size: int
    head_dim: int | None = None
    target_hidden_size: int | None = None
    """Width of each captured target hidden state; ``None`` means ``hidden_size``."""
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling | None = None
    max_position_embeddings: int = 2048
    attention_bias: bool = False
    mlp_bias: bool = False
    norm_output: bool = False
    """Feed back the post-norm hidden state (TRT-LLM ``norm_output`` /
    ``eagle_config.return_hidden_post_norm``) instead of the pre-norm residual (the default)."""
    capture_layers: tuple[int, ...] | None = None
    """Target layers whose outputs the head was trained on, in TRT-LLM numbering (output of
    decoder layer ``i``). Stored in config.json as ``eagle_config.eagle_aux_hidden_state_layer_ids``
    in vLLM/SGLang numbering (``i + 1``: the stream entering layer ``i + 1``); TRT-LLM ignores
    the key and takes ``eagle3_layers_to_capture`` from its speculative config instead."""
    torch_dtype: str = "float32"

    def __post_init__(self) -> None:
        _resolve_head_dim(self)
        _check_attention_shape(
            "Eagle3DraftConfig",
            self.hidden_size,
            self.num_attention_heads,
            self.num_key_value_heads,
            self.head_dim,
        )
        for name in ("intermediate_size", "max_position_embeddings"):
            if getattr(self, name) < 1:
                raise EngineError(
                    f"Eagle3DraftConfig: {name} must be positive, got {getattr(self, name)}"
                )
        if not 1 <= self.draft_vocab_size <= self.vocab_size:
            raise EngineError(
                f"Eagle3DraftConfig: draft_vocab_size {self.draft_vocab_size} must lie in "
                f"[1, vocab_size={self.vocab_size}]"
            )
        if self.torch_dtype not in _DTYPES:
            raise EngineError(
                f"Eagle3DraftConfig: torch_dtype {self.torch_dtype!r} is not supported"
            )

    @property
    def resolved_head_dim(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def resolved_target_hidden_size(self) -> int:
        return self.target_hidden_size or self.hidden_size

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, source: str = "config.json") -> Eagle3DraftConfig:
        """Read an EAGLE3 draft config.json mapping; refuse variants this engine cannot compute
        (``EngineError`` naming the file, a field of the wrong type included)."""
        with _fields_of(source):
            return cls._from_dict(raw, source=source)

    @classmethod
    def _from_dict(cls, raw: Mapping[str, Any], *, source: str) -> Eagle3DraftConfig:
        _refuse_unsupported(raw, source)
        layers = int(raw.get("num_hidden_layers", 1))
        if layers != 1:
            raise EngineError(
                f"{source}: EAGLE3 draft with num_hidden_layers={layers}",
                hint="the reference engine implements single-layer EAGLE3 heads only",
            )
        eagle_config = raw.get("eagle_config") or {}
        for flag in ("eh_proj_before_attn", "norm_before_fc"):
            if eagle_config.get(flag):
                raise EngineError(f"{source}: eagle_config.{flag} is not supported")
        if raw.get("fc_norm") or raw.get("kv_lora_rank") or raw.get("bias"):
            raise EngineError(
                f"{source}: fc_norm, fc bias and MLA draft layers are not supported",
                hint="the reference engine implements the Llama-style EAGLE3 head",
            )
        aux_ids = eagle_config.get("eagle_aux_hidden_state_layer_ids")
        theta, scaling = _read_rope(raw, source)
        vocab = _int(raw, "vocab_size", source)
        return cls(
            hidden_size=_int(raw, "hidden_size", source),
            intermediate_size=_int(raw, "intermediate_size", source),
            num_attention_heads=_int(raw, "num_attention_heads", source),
            num_key_value_heads=int(
                raw.get("num_key_value_heads") or _int(raw, "num_attention_heads", source)
            ),
            vocab_size=vocab,
            # TRT-LLM's _ensure_draft_vocab_size: a missing draft_vocab_size means the full vocab.
            draft_vocab_size=int(raw.get("draft_vocab_size") or vocab),
            head_dim=int(raw["head_dim"]) if raw.get("head_dim") else None,
            target_hidden_size=int(raw["target_hidden_size"])
            if raw.get("target_hidden_size")
            else None,
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            rope_theta=theta,
            rope_scaling=scaling,
            max_position_embeddings=int(raw.get("max_position_embeddings", 2048)),
            attention_bias=bool(raw.get("attention_bias", False)),
            mlp_bias=bool(raw.get("mlp_bias", False)),
            norm_output=bool(
                raw.get("norm_output", False) or eagle_config.get("return_hidden_post_norm", False)
            ),
            capture_layers=tuple(int(i) - 1 for i in aux_ids) if aux_ids else None,
            torch_dtype=_read_dtype(raw, source),
        )

    def to_dict(self) -> dict[str, Any]:
        """The config.json of an EAGLE3 draft directory (TRT-LLM ``speculative_model_dir``)."""
        out: dict[str, Any] = {
            "architectures": ["LlamaForCausalLMEagle3"],
            "model_type": "llama",
            "num_hidden_layers": 1,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.resolved_head_dim,
            "hidden_act": "silu",
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": self.rope_scaling.to_dict() if self.rope_scaling else None,
            "max_position_embeddings": self.max_position_embeddings,
            "vocab_size": self.vocab_size,
            "draft_vocab_size": self.draft_vocab_size,
            "tie_word_embeddings": False,
            "attention_bias": self.attention_bias,
            "mlp_bias": self.mlp_bias,
            "torch_dtype": self.torch_dtype,
        }
        if self.target_hidden_size is not None:
            out["target_hidden_size"] = self.target_hidden_size
        if self.norm_output:
            out["norm_output"] = True
        if self.capture_layers is not None:
            out["eagle_config"] = {
                "use_aux_hidden_state": True,
                "eagle_aux_hidden_state_layer_ids": [i + 1 for i in self.capture_layers],
            }
        return out


@contextmanager
def _fields_of(source: str) -> Iterator[None]:
    """A config.json field of the wrong type or shape (``"max_position_embeddings": "x"``,
    a list where a number goes, a rope_scaling without its factor) is an ``EngineError``
    naming the file, not a ``ValueError`` from deep inside."""
    try:
        yield
    except EngineError as exc:  # a value out of range: the file it came from, first
        if exc.message.startswith(source):
            raise
        raise EngineError(f"{source}: {exc.message}", hint=exc.hint) from None
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
        what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise EngineError(
            f"{source}: a field has the wrong type or is missing ({what})",
            hint="the reference engine reads Hugging Face Llama and EAGLE3 config.json files",
        ) from None


def _resolve_head_dim(config: LlamaConfig | Eagle3DraftConfig) -> None:
    if config.head_dim is None and config.num_attention_heads > 0:
        # Frozen dataclass: fill the derived default once, at construction.
        object.__setattr__(config, "head_dim", config.hidden_size // config.num_attention_heads)


def _check_attention_shape(
    owner: str, hidden: int, heads: int, kv_heads: int, head_dim: int | None
) -> None:
    if hidden < 1 or heads < 1 or kv_heads < 1:
        raise EngineError(f"{owner}: hidden_size and head counts must be positive")
    if heads % kv_heads:
        raise EngineError(
            f"{owner}: num_attention_heads={heads} is not a multiple of num_key_value_heads={kv_heads}"
        )
    resolved = head_dim or hidden // heads
    if resolved < 2 or resolved % 2:
        raise EngineError(f"{owner}: head_dim {resolved} must be even (RoPE rotates pairs)")


def _refuse_unsupported(raw: Mapping[str, Any], source: str) -> None:
    act = raw.get("hidden_act", "silu")
    if act != "silu":
        raise EngineError(f"{source}: hidden_act {act!r} is not supported (silu only)")
    if int(raw.get("pretraining_tp", 1)) != 1:
        raise EngineError(f"{source}: pretraining_tp != 1 is not supported")
    if raw.get("sliding_window") and raw.get("use_sliding_window", True):
        raise EngineError(f"{source}: sliding-window attention is not supported")


def _int(raw: Mapping[str, Any], key: str, source: str) -> int:
    if key not in raw or raw[key] is None:
        raise EngineError(f"{source}: missing required field {key!r}")
    return int(raw[key])


def _read_dtype(raw: Mapping[str, Any], source: str) -> str:
    # transformers 5.x writes "dtype", 4.x "torch_dtype".
    dtype = str(raw.get("torch_dtype") or raw.get("dtype") or "float32")
    dtype = dtype.removeprefix("torch.")
    if dtype not in _DTYPES:
        raise EngineError(f"{source}: weight dtype {dtype!r} is not supported")
    return dtype


def _read_eos(value: Any) -> int | tuple[int, ...] | None:
    if isinstance(value, list):
        return tuple(int(v) for v in value)
    return None if value is None else int(value)


def _read_rope(raw: Mapping[str, Any], source: str) -> tuple[float, RopeScaling | None]:
    """(theta, scaling) from either the 4.x or the 5.x spelling."""
    params = raw.get("rope_parameters")
    if isinstance(params, Mapping) and any(isinstance(v, Mapping) for v in params.values()):
        # Per-layer-type rope parameters (gemma-style); Llama never writes these.
        raise EngineError(f"{source}: per-layer rope_parameters are not supported")
    scaling_raw: Mapping[str, Any] | None
    if isinstance(params, Mapping):
        theta = float(params.get("rope_theta", raw.get("rope_theta", 10000.0)))
        scaling_raw = params
    else:
        theta = float(raw.get("rope_theta", 10000.0))
        scaling_raw = raw.get("rope_scaling")
    if not scaling_raw:
        return theta, None
    rope_type = scaling_raw.get("rope_type", scaling_raw.get("type", "default"))
    if rope_type == "default":
        return theta, None
    if rope_type != "llama3":
        raise EngineError(
            f"{source}: rope type {rope_type!r} is not supported",
            hint="the reference engine implements default and llama3 RoPE",
        )
    return theta, RopeScaling(
        factor=float(scaling_raw["factor"]),
        low_freq_factor=float(scaling_raw["low_freq_factor"]),
        high_freq_factor=float(scaling_raw["high_freq_factor"]),
        original_max_position_embeddings=int(scaling_raw["original_max_position_embeddings"]),
    )
