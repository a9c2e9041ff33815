"""The target model: a Llama decoder (RMSNorm, RoPE, grouped-query attention, SwiGLU).

:class:`LlamaTarget` loads a local Hugging Face ``LlamaForCausalLM`` checkpoint (or builds a
seeded random one), saves itself in the same layout, and runs batched forwards over
per-request KV caches. Its logits match transformers' ``LlamaForCausalLM`` up to float32
rounding (the kernels differ, see ``numerics``), and a request's logits are bit-identical
whatever batch, row or chunking it runs in. Besides the logits it returns the hidden states an
EAGLE3 draft head consumes (``aux_hidden``), captured at :attr:`LlamaTarget.capture_layers`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from specseed.core.errors import EngineError
from specseed.models import checkpoint
from specseed.models.batch import AttentionShape, RowPlan, self_attention
from specseed.models.config import LlamaConfig
from specseed.models.kv_cache import KVCache, KVPool
from specseed.models.numerics import (
    linear,
    rms_norm,
    rope_inv_freq,
    rope_table,
    silu,
)
from specseed.models.seeded import perturbed_ones, uniform

DEFAULT_MAX_SEQ_LEN = 512
"""KV capacity when the caller names none (capped by ``max_position_embeddings``). Attention
costs grow with the capacity, not with the actual length (see ``numerics``)."""


def default_capture_layers(num_layers: int) -> tuple[int, int, int]:
    """The three target layers whose outputs an EAGLE3 head reads, for a target of N layers.

    Layer ``i`` means the output of decoder layer ``i`` (0-based): the residual stream after it,
    ``hidden_states + residual`` in TensorRT-LLM's ``maybe_capture_hidden_states``. vLLM and
    SGLang number the same tensor ``i + 1`` (the stream entering layer ``i + 1``).

    - N >= 7: TensorRT-LLM's default, ``(1, N // 2 - 1, N - 4)``
      (``Eagle3OneModelSpecMetadata.__post_init__`` in tensorrt_llm/_torch/speculative/eagle3.py;
      the description of ``EagleDecodingConfig.eagle3_layers_to_capture`` in
      tensorrt_llm/llmapi/llm_args.py). For Llama-3.1-8B (N = 32): (1, 15, 28).
    - N = 6: TensorRT-LLM's formula gives (1, 2, 2); its capture loop fills only the first slot
      of a repeated layer, so the third slot of its buffer is never written. We use
      (0, 3, 5) instead.
    - 2 <= N <= 5: TensorRT-LLM raises ``ValueError("Not enough hidden layers for default
      EAGLE3 capture")`` unless ``eagle3_layers_to_capture`` is set. We use
      ``(0, N // 2, N - 1)`` for N >= 3: (0, 1, 2), (0, 2, 3), (0, 2, 4).
    - N = 1: TensorRT-LLM captures only layer 0 and builds no fc. Three distinct layers do
      not exist for N < 3, so this raises.

    Whenever the result is not TensorRT-LLM's default, serve the same checkpoints there with
    ``eagle3_layers_to_capture`` set to this set.
    """
    if num_layers >= 7:
        return (1, num_layers // 2 - 1, num_layers - 4)
    if num_layers >= 3:
        return (0, num_layers // 2, num_layers - 1)
    raise EngineError(
        f"an EAGLE3 head reads three distinct target layers; a target with {num_layers} "
        "layer(s) has too few",
        hint="use a target with at least 3 layers",
    )


@dataclass(frozen=True)
class RandomInit:
    """How :meth:`LlamaTarget.random` scales its seeded weights.

    All weights are uniform with the standard deviations below (``fan_in`` is the input width
    of the projection). Small residual gains keep each layer a perturbation of the residual
    stream, so the next-token distribution is dominated by the current token and modulated by
    the context; that is what lets a draft head derived from the weights agree with the target
    part of the time.
    """

    embed_std: float = 1.0
    residual_gain: float = 0.2
    """Std of o_proj and down_proj times ``sqrt(fan_in)``: how much each layer moves the stream."""
    logit_scale: float = 4.0
    """Std of lm_head times ``sqrt(hidden)``: the logits' spread, hence how peaked they are."""
    norm_spread: float = 0.1
    """Std of the RMSNorm weights around 1."""


@dataclass(frozen=True, eq=False)
class TargetOutput:
    """What the target computed for one chunk of one request."""

    logits: torch.Tensor
    """``[T, vocab_size]`` float32: next-token logits at each of the chunk's positions."""
    aux_hidden: torch.Tensor
    """``[T, 3 * hidden_size]`` float32: outputs of the capture layers, concatenated in
    ``capture_layers`` order (the EAGLE3 head's fc input)."""


@dataclass(frozen=True, eq=False)
class _DecoderLayer:
    input_norm: torch.Tensor
    qkv: torch.Tensor
    qkv_bias: torch.Tensor | None
    o: torch.Tensor
    o_bias: torch.Tensor | None
    post_norm: torch.Tensor
    gate_up: torch.Tensor
    gate_up_bias: torch.Tensor | None
    down: torch.Tensor
    down_bias: torch.Tensor | None


class LlamaTarget:
    """A Llama ``LlamaForCausalLM`` with per-request KV caches and batch-invariant numerics."""

    def __init__(
        self,
        config: LlamaConfig,
        tensors: Mapping[str, torch.Tensor],
        *,
        capture_layers: Sequence[int] | None = None,
        max_seq_len: int | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        """Build from HF-named tensors (``model.layers.0.self_attn.q_proj.weight``, ...)."""
        self.config = config
        self.device = torch.device(device)
        self.capture_layers = _check_capture_layers(
            tuple(capture_layers)
            if capture_layers is not None
            else default_capture_layers(config.num_hidden_layers),
            config.num_hidden_layers,
        )
        self.max_seq_len = _resolve_max_seq_len(max_seq_len, config.max_position_embeddings)
        self._state = _checked_state(config, tensors)
        self._shape = AttentionShape(
            config.num_attention_heads, config.num_key_value_heads, config.resolved_head_dim
        )
        self._pool = KVPool(
            num_layers=config.num_hidden_layers,
            num_kv_heads=config.num_key_value_heads,
            head_dim=config.resolved_head_dim,
            capacity=self.max_seq_len,
            device=self.device,
        )
        self._rope = rope_table(
            rope_inv_freq(config.resolved_head_dim, config.rope_theta, config.rope_scaling),
            self.max_seq_len,
        ).to(self.device)
        on = {name: t.to(self.device) for name, t in self._state.items()}
        self._embed = on["model.embed_tokens.weight"]
        self._norm = on["model.norm.weight"]
        self._lm_head = on[
            "model.embed_tokens.weight" if config.tie_word_embeddings else "lm_head.weight"
        ]
        self._layers = [self._fuse_layer(on, i) for i in range(config.num_hidden_layers)]
        self._capture_set = frozenset(self.capture_layers)

    # -- construction -------------------------------------------------------------------

    @classmethod
    def from_checkpoint(
        cls,
        path: Path,
        *,
        capture_layers: Sequence[int] | None = None,
        max_seq_len: int | None = None,
        device: str | torch.device = "cpu",
    ) -> LlamaTarget:
        """Load a local ``LlamaForCausalLM`` checkpoint directory (any float dtype, sharded or
        not); weights are upcast to float32."""
        config = LlamaConfig.from_dict(checkpoint.read_config(path), source=f"{path}/config.json")
        tensors = checkpoint.load_tensors(path)
        if config.tie_word_embeddings:
            # transformers ties lm_head to the embedding and ignores a stored copy.
            tensors.pop("lm_head.weight", None)
        return cls(
            config, tensors, capture_layers=capture_layers, max_seq_len=max_seq_len, device=device
        )

    @classmethod
    def random(
        cls,
        config: LlamaConfig,
        model_seed: int,
        *,
        init: RandomInit | None = None,
        capture_layers: Sequence[int] | None = None,
        max_seq_len: int | None = None,
        device: str | torch.device = "cpu",
    ) -> LlamaTarget:
        """A random model whose weights depend only on ``(config, model_seed, init)``."""
        init = init or RandomInit()
        tensors = _random_tensors(config, model_seed, init)
        return cls(
            config, tensors, capture_layers=capture_layers, max_seq_len=max_seq_len, device=device
        )

    def save_checkpoint(
        self, path: Path, *, dtype: str | None = None, max_shard_bytes: int | None = None
    ) -> None:
        """Write a ``LlamaForCausalLM`` checkpoint directory transformers and TRT-LLM load.

        ``dtype`` (default: the config's ``torch_dtype``) is the storage dtype;
        ``max_shard_bytes`` splits the weights into indexed shards.
        """
        stored = dtype or self.config.torch_dtype
        config = dataclasses.replace(self.config, torch_dtype=stored)
        tensors = {name: t.to(checkpoint.DTYPES[stored]) for name, t in self._state.items()}
        checkpoint.save_checkpoint(path, config.to_dict(), tensors, max_shard_bytes=max_shard_bytes)

    # -- inference ----------------------------------------------------------------------

    @property
    def hidden_size(self) -> int:
        return self.config.hidden_size

    @property
    def vocab_size(self) -> int:
        return self.config.vocab_size

    @property
    def embed_tokens(self) -> torch.Tensor:
        """``[vocab, hidden]`` input embedding (shared with the draft head; do not modify)."""
        return self._embed

    @property
    def lm_head(self) -> torch.Tensor:
        """``[vocab, hidden]`` output projection (the embedding when tied; do not modify)."""
        return self._lm_head

    def new_cache(self) -> KVCache:
        """An empty KV cache for one request."""
        return KVCache(self._pool)

    def reserve_caches(self, count: int) -> None:
        """Make room for ``count`` caches held at once (see ``KVPool.reserve``)."""
        self._pool.reserve(count)

    def forward(
        self, chunks: Sequence[tuple[KVCache, Sequence[int] | torch.Tensor]]
    ) -> list[TargetOutput]:
        """Append each chunk's tokens to its request's cache and return, per chunk, the logits
        and captured hidden states at the appended positions (positions continue from the
        cache's length). All rows of all chunks share each projection."""
        plan = RowPlan.build(chunks, pool=self._pool, vocab_size=self.vocab_size, owner="target")
        hidden = self._embed[plan.token_ids]
        angles = self._rope[plan.positions]
        captured: dict[int, torch.Tensor] = {}
        for index, layer in enumerate(self._layers):
            hidden = self._decoder_layer(index, layer, hidden, plan, angles)
            if index in self._capture_set:
                captured[index] = hidden
        logits = linear(rms_norm(hidden, self._norm, self.config.rms_norm_eps), self._lm_head)
        aux = torch.cat([captured[index] for index in self.capture_layers], dim=-1)
        plan.commit()
        return [
            TargetOutput(logits=chunk_logits, aux_hidden=chunk_aux)
            for chunk_logits, chunk_aux in zip(
                logits.split(plan.sizes), aux.split(plan.sizes), strict=True
            )
        ]

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The float32 weights under their Hugging Face names (copies)."""
        return {name: t.clone() for name, t in self._state.items()}

    # -- internals ----------------------------------------------------------------------

    def _decoder_layer(
        self,
        index: int,
        layer: _DecoderLayer,
        hidden: torch.Tensor,
        plan: RowPlan,
        angles: torch.Tensor,
    ) -> torch.Tensor:
        eps = self.config.rms_norm_eps
        qkv = linear(rms_norm(hidden, layer.input_norm, eps), layer.qkv, layer.qkv_bias)
        attended = self_attention(
            qkv, shape=self._shape, pool=self._pool, layer=index, plan=plan, angles=angles
        )
        hidden = hidden + linear(attended, layer.o, layer.o_bias)
        gate_up = linear(rms_norm(hidden, layer.post_norm, eps), layer.gate_up, layer.gate_up_bias)
        width = self.config.intermediate_size
        activated = silu(gate_up[:, :width]) * gate_up[:, width:]
        return hidden + linear(activated, layer.down, layer.down_bias)

    def _fuse_layer(self, on: Mapping[str, torch.Tensor], index: int) -> _DecoderLayer:
        prefix = f"model.layers.{index}."
        attn = prefix + "self_attn."
        mlp = prefix + "mlp."

        def cat(names: Sequence[str]) -> torch.Tensor:
            return torch.cat([on[name] for name in names]).contiguous()

        def maybe(names: Sequence[str]) -> torch.Tensor | None:
            return cat(names) if all(name in on for name in names) else None

        qkv_names = [f"{attn}{p}_proj" for p in ("q", "k", "v")]
        gate_up_names = [f"{mlp}{p}_proj" for p in ("gate", "up")]
        return _DecoderLayer(
            input_norm=on[prefix + "input_layernorm.weight"],
            qkv=cat([n + ".weight" for n in qkv_names]),
            qkv_bias=maybe([n + ".bias" for n in qkv_names]),
            o=on[attn + "o_proj.weight"],
            o_bias=on.get(attn + "o_proj.bias"),
            post_norm=on[prefix + "post_attention_layernorm.weight"],
            gate_up=cat([n + ".weight" for n in gate_up_names]),
            gate_up_bias=maybe([n + ".bias" for n in gate_up_names]),
            down=on[mlp + "down_proj.weight"],
            down_bias=on.get(mlp + "down_proj.bias"),
        )


def expected_shapes(config: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """Hugging Face tensor names and shapes of a ``LlamaForCausalLM`` with this config."""
    hidden, inter = config.hidden_size, config.intermediate_size
    q_width = config.num_attention_heads * config.resolved_head_dim
    kv_width = config.num_key_value_heads * config.resolved_head_dim
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (config.vocab_size, hidden),
        "model.norm.weight": (hidden,),
    }
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (config.vocab_size, hidden)
    for i in range(config.num_hidden_layers):
        p = f"model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = (hidden,)
        shapes[p + "post_attention_layernorm.weight"] = (hidden,)
        for name, out_width in (("q", q_width), ("k", kv_width), ("v", kv_width)):
            shapes[f"{p}self_attn.{name}_proj.weight"] = (out_width, hidden)
            if config.attention_bias:
                shapes[f"{p}self_attn.{name}_proj.bias"] = (out_width,)
        shapes[p + "self_attn.o_proj.weight"] = (hidden, q_width)
        if config.attention_bias:
            shapes[p + "self_attn.o_proj.bias"] = (hidden,)
        for name, shape in (
            ("gate", (inter, hidden)),
            ("up", (inter, hidden)),
            ("down", (hidden, inter)),
        ):
            shapes[f"{p}mlp.{name}_proj.weight"] = shape
            if config.mlp_bias:
                shapes[f"{p}mlp.{name}_proj.bias"] = (shape[0],)
    return shapes


def _checked_state(
    config: LlamaConfig, tensors: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    expected = expected_shapes(config)
    # Old transformers releases saved the RoPE buffer; it is recomputed, never read.
    present = {k: v for k, v in tensors.items() if not k.endswith("rotary_emb.inv_freq")}
    missing = sorted(set(expected) - set(present))
    unexpected = sorted(set(present) - set(expected))
    if missing or unexpected:
        raise EngineError(
            "Llama checkpoint does not match its config: "
            + "; ".join(
                part
                for part in (
                    f"missing {missing[:4]}" + (" ..." if len(missing) > 4 else "")
                    if missing
                    else "",
                    f"unexpected {unexpected[:4]}" + (" ..." if len(unexpected) > 4 else "")
                    if unexpected
                    else "",
                )
                if part
            )
        )
    state: dict[str, torch.Tensor] = {}
    for name, shape in expected.items():
        tensor = present[name]
        if tuple(tensor.shape) != shape:
            raise EngineError(
                f"Llama checkpoint: {name} has shape {tuple(tensor.shape)}, expected {shape}"
            )
        if not tensor.is_floating_point():
            raise EngineError(f"Llama checkpoint: {name} is not a float tensor")
        state[name] = tensor.detach().to(device="cpu", dtype=torch.float32).contiguous()
    return state


def _random_tensors(config: LlamaConfig, seed: int, init: RandomInit) -> dict[str, torch.Tensor]:
    tensors: dict[str, torch.Tensor] = {}
    for name, shape in expected_shapes(config).items():
        if name.endswith("layernorm.weight") or name == "model.norm.weight":
            tensors[name] = perturbed_ones(seed, name, shape[0], spread=init.norm_spread)
        elif name.endswith(".bias"):
            tensors[name] = uniform(seed, name, shape, std=0.02)
        elif name == "model.embed_tokens.weight":
            tensors[name] = uniform(seed, name, shape, std=init.embed_std)
        elif name == "lm_head.weight":
            tensors[name] = uniform(seed, name, shape, std=init.logit_scale / shape[1] ** 0.5)
        elif name.endswith(("o_proj.weight", "down_proj.weight")):
            tensors[name] = uniform(seed, name, shape, std=init.residual_gain / shape[1] ** 0.5)
        else:
            tensors[name] = uniform(seed, name, shape, std=1.0 / shape[1] ** 0.5)
    return tensors


def _check_capture_layers(layers: tuple[int, ...], num_layers: int) -> tuple[int, int, int]:
    if len(layers) != 3 or len(set(layers)) != 3:
        raise EngineError(f"capture_layers must be three distinct layer indices, got {layers}")
    if any(not 0 <= layer < num_layers for layer in layers):
        raise EngineError(f"capture_layers {layers} out of range for {num_layers} layers")
    ordered = tuple(sorted(layers))
    return (ordered[0], ordered[1], ordered[2])


def _resolve_max_seq_len(requested: int | None, max_position_embeddings: int) -> int:
    if requested is None:
        return min(DEFAULT_MAX_SEQ_LEN, max_position_embeddings)
    if not 1 <= requested <= max_position_embeddings:
        raise EngineError(
            f"max_seq_len {requested} must lie in [1, max_position_embeddings={max_position_embeddings}]"
        )
    return requested
