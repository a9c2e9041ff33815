"""The EAGLE3 draft head: fc over captured target states, one decoder layer, norm, lm_head.

The computation and the checkpoint layout follow TensorRT-LLM's one-model EAGLE3 path
(tensorrt_llm/_torch/models/modeling_speculative.py: ``Eagle3DecoderLayer``,
``Eagle3DraftModel``, ``Eagle3ForCausalLM``; tensorrt_llm/_torch/speculative/eagle3.py:
``Eagle3OneModelWorker``), so one draft directory feeds both engines:

- first draft step of an iteration: ``hidden = fc(aux)``, ``aux`` being the target's three
  captured hidden states ``[T, 3 * target_hidden]`` at the verified positions, paired with the
  embeddings of the *next* tokens (the token at ``p + 1`` rides with the state at ``p``);
- later steps: ``hidden`` is the head's own ``hidden_out`` of the previous step (no fc);
- the layer: ``residual = hidden``;
  ``x = cat(input_layernorm(embed(token)), hidden_norm(hidden))`` (``2 * hidden`` wide) feeds
  q/k/v; ``residual = o_proj(attn) + residual``;
  ``residual = mlp(post_attention_layernorm(residual)) + residual``;
  ``logits = lm_head(norm(residual))``; ``hidden_out = residual`` (pre-norm), or the normed
  state when the config sets ``norm_output``;
- draft ids map to target ids through ``d2t`` (``target = draft + d2t[draft]``) when the draft
  vocabulary is smaller; the logits returned here are already in target ids, ``-inf`` where the
  draft vocabulary lacks an id.

Checkpoint (TRT-LLM ``speculative_model_dir``): config.json with
``architectures: ["LlamaForCausalLMEagle3"]``, ``num_hidden_layers: 1``, ``draft_vocab_size``;
tensors ``fc.weight``, ``midlayer.{input_layernorm,hidden_norm,post_attention_layernorm}.weight``,
``midlayer.self_attn.{q,k,v,o}_proj.weight``, ``midlayer.mlp.{gate,up,down}_proj.weight``,
``norm.weight``, ``lm_head.weight``, ``d2t`` (int64) and ``t2d`` (bool) when the vocabularies
differ. ``layers.0.*`` is accepted for ``midlayer.*`` (TRT-LLM remaps it). As in TRT-LLM, the
embedding is the target's when the hidden sizes agree (a stored ``embed_tokens.weight`` is
then ignored), and a missing ``lm_head.weight`` means the target's lm_head.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from specseed.core.errors import EngineError
from specseed.models import checkpoint
from specseed.models.batch import AttentionShape, RowPlan, self_attention
from specseed.models.config import Eagle3DraftConfig
from specseed.models.kv_cache import KVCache, KVPool
from specseed.models.numerics import (
    linear,
    rms_norm,
    rope_inv_freq,
    rope_table,
    silu,
)
from specseed.models.seeded import uniform
from specseed.models.target import LlamaTarget


@dataclass(frozen=True, eq=False)
class DraftOutput:
    """What the draft head computed for one chunk of one request."""

    logits: torch.Tensor
    """``[T, target vocab_size]`` float32, in target token ids; ``-inf`` for ids outside the
    draft vocabulary."""
    hidden_out: torch.Tensor
    """``[T, hidden_size]``: the state to pass back as ``hidden`` at the next draft step."""


@dataclass(frozen=True)
class DerivedInit:
    """How :meth:`Eagle3DraftHead.derived_from` builds a head out of a target's weights.

    The head is made to approximate the target's "current token only" prediction,
    ``lm_head(norm(embed(token)))``: q and k project the normalised token embedding with a
    large gain so each position attends mostly to itself, v carries the embedding through and
    o_proj returns it to the residual stream, whose norm and lm_head are the target's. The
    hidden-state half of v subtracts the incoming hidden state (it arrives normalised, and fc is
    scaled so it has the same size as the embedding path), so what the previous step left in
    the residual stream fades instead of piling up. Everything else is seeded noise: the
    controlled perturbation that keeps the head from agreeing with the target every time.
    """

    attention_gain: float = 3.0
    """q and k gain on the normalised embedding (larger: attention closer to self only)."""
    value_gain: float = 4.0
    """Size of the embedding path in the residual stream (rms of its contribution)."""
    noise_std: float = 0.1
    """Std of the seeded noise added to q/k/v/o, times ``sqrt(fan_in)``."""
    fc_gain: float = 1.0
    """rms of ``fc(aux)`` relative to ``value_gain`` on a calibration sequence."""
    mlp_gain: float = 0.2
    """Std of down_proj times ``sqrt(fan_in)``: the draft MLP's perturbation."""
    calibration_tokens: int = 64
    """Length of the seeded token sequence used to calibrate fc."""


class Eagle3DraftHead:
    """A single-layer EAGLE3 head running next to a :class:`LlamaTarget`."""

    def __init__(
        self,
        config: Eagle3DraftConfig,
        tensors: Mapping[str, torch.Tensor],
        target: LlamaTarget,
    ) -> None:
        """Build from checkpoint-named tensors (``fc.weight``, ``midlayer.*``, ...)."""
        _check_compatible(config, target)
        self.config = config
        self.target = target
        self.device = target.device
        self.max_seq_len = target.max_seq_len
        self._state = _checked_state(config, tensors, target)
        on = {name: t.to(self.device) for name, t in self._state.items() if t.is_floating_point()}
        self._shape = AttentionShape(
            config.num_attention_heads, config.num_key_value_heads, config.resolved_head_dim
        )
        self._pool = KVPool(
            num_layers=1,
            num_kv_heads=config.num_key_value_heads,
            head_dim=config.resolved_head_dim,
            capacity=self.max_seq_len,
            device=self.device,
        )
        self._rope = rope_table(
            rope_inv_freq(config.resolved_head_dim, config.rope_theta, config.rope_scaling),
            self.max_seq_len,
        ).to(self.device)
        self._embed = on.get("embed_tokens.weight", target.embed_tokens)
        self._lm_head = on.get("lm_head.weight", target.lm_head)
        self._fc = on["fc.weight"]
        self._hidden_norm = on["midlayer.hidden_norm.weight"]
        self._input_norm = on["midlayer.input_layernorm.weight"]
        self._post_norm = on["midlayer.post_attention_layernorm.weight"]
        self._norm = on["norm.weight"]
        attn, mlp = "midlayer.self_attn.", "midlayer.mlp."
        self._qkv = torch.cat([on[f"{attn}{p}_proj.weight"] for p in "qkv"]).contiguous()
        self._qkv_bias = (
            torch.cat([on[f"{attn}{p}_proj.bias"] for p in "qkv"])
            if config.attention_bias
            else None
        )
        self._o = on[attn + "o_proj.weight"]
        self._o_bias = on.get(attn + "o_proj.bias")
        self._gate_up = torch.cat([on[mlp + "gate_proj.weight"], on[mlp + "up_proj.weight"]])
        self._gate_up_bias = (
            torch.cat([on[mlp + "gate_proj.bias"], on[mlp + "up_proj.bias"]])
            if config.mlp_bias
            else None
        )
        self._down = on[mlp + "down_proj.weight"]
        self._down_bias = on.get(mlp + "down_proj.bias")
        self._target_ids: torch.Tensor | None = None
        if config.draft_vocab_size != config.vocab_size:
            d2t = self._state["d2t"]
            self._target_ids = (torch.arange(config.draft_vocab_size) + d2t).to(self.device)

    # -- construction -------------------------------------------------------------------

    @classmethod
    def from_checkpoint(cls, path: Path, target: LlamaTarget) -> Eagle3DraftHead:
        """Load an EAGLE3 draft directory (the layout TRT-LLM's ``speculative_model_dir``
        takes) for ``target``."""
        config = Eagle3DraftConfig.from_dict(
            checkpoint.read_config(path), source=f"{path}/config.json"
        )
        return cls(config, checkpoint.load_tensors(path), target)

    @classmethod
    def derived_from(
        cls,
        target: LlamaTarget,
        model_seed: int,
        *,
        draft_vocab_size: int | None = None,
        init: DerivedInit | None = None,
    ) -> Eagle3DraftHead:
        """A deterministic head built from the target's weights plus seeded noise.

        ``draft_vocab_size`` below the target's vocabulary keeps the ids the target's
        current-token predictions favour most (exercising ``d2t``). See :class:`DerivedInit`.
        """
        init = init or DerivedInit()
        config = _derived_config(target, draft_vocab_size or target.vocab_size)
        tensors = _derived_tensors(target, config, model_seed, init)
        return cls(config, tensors, target)

    def save_checkpoint(self, path: Path, *, dtype: str | None = None) -> None:
        """Write the draft directory: config.json and model.safetensors with EAGLE3 names."""
        stored = dtype or self.config.torch_dtype
        config = dataclasses.replace(self.config, torch_dtype=stored)
        tensors = {
            name: t.to(checkpoint.DTYPES[stored]) if t.is_floating_point() else t
            for name, t in self._state.items()
        }
        if self._target_ids is not None:
            t2d = torch.zeros(self.config.vocab_size, dtype=torch.bool)
            t2d[self._target_ids.cpu()] = True
            tensors["t2d"] = t2d
        checkpoint.save_checkpoint(path, config.to_dict(), tensors)

    # -- inference ----------------------------------------------------------------------

    @property
    def hidden_size(self) -> int:
        return self.config.hidden_size

    def new_cache(self) -> KVCache:
        """An empty draft KV cache for one request."""
        return KVCache(self._pool)

    def reserve_caches(self, count: int) -> None:
        """Make room for ``count`` caches held at once (see ``KVPool.reserve``)."""
        self._pool.reserve(count)

    def forward(
        self, chunks: Sequence[tuple[KVCache, Sequence[int] | torch.Tensor, torch.Tensor]]
    ) -> list[DraftOutput]:
        """One draft step for each chunk: ``(cache, token ids, hidden)`` where ``hidden`` is
        ``[T, 3 * target_hidden]`` captured target states (fc is applied: first step) or
        ``[T, hidden]`` states from the previous step's ``hidden_out``."""
        plan = RowPlan.build(
            [(cache, tokens) for cache, tokens, _ in chunks],
            pool=self._pool,
            vocab_size=self.config.vocab_size,
            owner="draft head",
        )
        hidden = self._input_hidden([h for _, _, h in chunks], plan.sizes)
        cfg = self.config
        eps = cfg.rms_norm_eps
        embedded = rms_norm(self._embed[plan.token_ids], self._input_norm, eps)
        attn_in = torch.cat((embedded, rms_norm(hidden, self._hidden_norm, eps)), dim=-1)
        attended = self_attention(
            linear(attn_in, self._qkv, self._qkv_bias),
            shape=self._shape,
            pool=self._pool,
            layer=0,
            plan=plan,
            angles=self._rope[plan.positions],
        )
        residual = linear(attended, self._o, self._o_bias) + hidden
        gate_up = linear(
            rms_norm(residual, self._post_norm, eps), self._gate_up, self._gate_up_bias
        )
        width = cfg.intermediate_size
        residual = (
            linear(silu(gate_up[:, :width]) * gate_up[:, width:], self._down, self._down_bias)
            + residual
        )
        normed = rms_norm(residual, self._norm, eps)
        logits = self._to_target_ids(linear(normed, self._lm_head))
        hidden_out = normed if cfg.norm_output else residual
        plan.commit()
        return [
            DraftOutput(logits=chunk_logits, hidden_out=chunk_hidden)
            for chunk_logits, chunk_hidden in zip(
                logits.split(plan.sizes), hidden_out.split(plan.sizes), strict=True
            )
        ]

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The head's own tensors under their checkpoint names (copies)."""
        return {name: t.clone() for name, t in self._state.items()}

    # -- internals ----------------------------------------------------------------------

    def _input_hidden(self, hiddens: Sequence[torch.Tensor], sizes: Sequence[int]) -> torch.Tensor:
        """``[rows, hidden]``: fc applied to the chunks that carry captured target states.

        As in TRT-LLM's ``apply_eagle3_fc``, a state is fc-fused when its width is not the
        head's hidden size.
        """
        width = self.config.hidden_size
        fc_width = 3 * self.config.resolved_target_hidden_size
        for number, (state, size) in enumerate(zip(hiddens, sizes, strict=True)):
            if (
                state.dim() != 2
                or state.shape[0] != size
                or state.shape[1] not in (width, fc_width)
            ):
                raise EngineError(
                    f"draft head: chunk {number} hidden has shape {tuple(state.shape)}; expected "
                    f"[{size}, {fc_width}] (captured target states) or [{size}, {width}]"
                )
        states = [s.to(device=self.device, dtype=torch.float32) for s in hiddens]
        fused = [s.shape[1] != width for s in states]
        if all(fused):
            return linear(torch.cat(states), self._fc)
        if not any(fused):
            return torch.cat(states)
        # A batch mixing first steps and later steps: one fc over the first-step rows, then
        # the rows back in chunk order.
        to_fuse = [s for s, f in zip(states, fused, strict=True) if f]
        fc_out = iter(linear(torch.cat(to_fuse), self._fc).split([s.shape[0] for s in to_fuse]))
        return torch.cat([next(fc_out) if f else s for s, f in zip(states, fused, strict=True)])

    def _to_target_ids(self, draft_logits: torch.Tensor) -> torch.Tensor:
        if self._target_ids is None:
            return draft_logits
        full = torch.full(
            (draft_logits.shape[0], self.config.vocab_size),
            float("-inf"),
            dtype=draft_logits.dtype,
            device=draft_logits.device,
        )
        return full.index_copy_(1, self._target_ids, draft_logits)


def expected_shapes(config: Eagle3DraftConfig) -> dict[str, tuple[int, ...]]:
    """Checkpoint tensor names and shapes of a single-layer EAGLE3 head (floats only)."""
    hidden, inter = config.hidden_size, config.intermediate_size
    q_width = config.num_attention_heads * config.resolved_head_dim
    kv_width = config.num_key_value_heads * config.resolved_head_dim
    p = "midlayer."
    shapes: dict[str, tuple[int, ...]] = {
        "fc.weight": (hidden, 3 * config.resolved_target_hidden_size),
        p + "input_layernorm.weight": (hidden,),
        p + "hidden_norm.weight": (hidden,),
        p + "post_attention_layernorm.weight": (hidden,),
        p + "self_attn.q_proj.weight": (q_width, 2 * hidden),
        p + "self_attn.k_proj.weight": (kv_width, 2 * hidden),
        p + "self_attn.v_proj.weight": (kv_width, 2 * hidden),
        p + "self_attn.o_proj.weight": (hidden, q_width),
        p + "mlp.gate_proj.weight": (inter, hidden),
        p + "mlp.up_proj.weight": (inter, hidden),
        p + "mlp.down_proj.weight": (hidden, inter),
        "norm.weight": (hidden,),
        "lm_head.weight": (config.draft_vocab_size, hidden),
    }
    if config.attention_bias:
        for name, width in (("q", q_width), ("k", kv_width), ("v", kv_width), ("o", hidden)):
            shapes[f"{p}self_attn.{name}_proj.bias"] = (width,)
    if config.mlp_bias:
        for name, width in (("gate", inter), ("up", inter), ("down", hidden)):
            shapes[f"{p}mlp.{name}_proj.bias"] = (width,)
    if config.resolved_target_hidden_size != hidden:
        shapes["embed_tokens.weight"] = (config.vocab_size, hidden)
    return shapes


def _check_compatible(config: Eagle3DraftConfig, target: LlamaTarget) -> None:
    if config.vocab_size != target.vocab_size:
        raise EngineError(
            f"draft head vocab_size {config.vocab_size} differs from the target's "
            f"{target.vocab_size}"
        )
    if config.resolved_target_hidden_size != target.hidden_size:
        raise EngineError(
            f"draft head expects target hidden size {config.resolved_target_hidden_size}, the "
            f"target has {target.hidden_size}"
        )
    if (
        config.capture_layers is not None
        and tuple(sorted(config.capture_layers)) != target.capture_layers
    ):
        raise EngineError(
            f"draft head was built for target layers {config.capture_layers}, the target captures "
            f"{target.capture_layers}",
            hint=f"build the target with capture_layers={tuple(sorted(config.capture_layers))}",
        )


def _checked_state(
    config: Eagle3DraftConfig, tensors: Mapping[str, torch.Tensor], target: LlamaTarget
) -> dict[str, torch.Tensor]:
    # TRT-LLM's Eagle3ForCausalLM.load_weights maps "layers.0.*" to "midlayer.*".
    named = {
        ("midlayer." + k[len("layers.0.") :] if k.startswith("layers.0.") else k): v
        for k, v in tensors.items()
    }
    expected = expected_shapes(config)
    if "lm_head.weight" not in named:
        if config.draft_vocab_size != config.vocab_size:
            raise EngineError(
                "draft checkpoint has no lm_head.weight and a reduced draft vocabulary"
            )
        expected.pop("lm_head.weight")  # TRT-LLM: load_lm_head_from_target
    missing = sorted(set(expected) - set(named))
    if missing:
        raise EngineError(
            f"draft checkpoint is missing {missing[:4]}" + (" ..." if len(missing) > 4 else "")
        )
    ignored = {"d2t", "t2d", "embed_tokens.weight"}
    unexpected = sorted(set(named) - set(expected) - ignored)
    if unexpected:
        raise EngineError(f"draft checkpoint has unexpected tensors {unexpected[:4]}")
    state: dict[str, torch.Tensor] = {}
    for name, shape in expected.items():
        tensor = named[name]
        if tuple(tensor.shape) != shape:
            raise EngineError(
                f"draft checkpoint: {name} has shape {tuple(tensor.shape)}, expected {shape}"
            )
        state[name] = tensor.detach().to(device="cpu", dtype=torch.float32).contiguous()
    if config.draft_vocab_size != config.vocab_size:
        state["d2t"] = _checked_d2t(named, config)
    return state


def _checked_d2t(named: Mapping[str, torch.Tensor], config: Eagle3DraftConfig) -> torch.Tensor:
    if "d2t" not in named:
        raise EngineError(
            f"draft checkpoint: draft_vocab_size {config.draft_vocab_size} < vocab_size "
            f"{config.vocab_size} but no d2t mapping"
        )
    d2t = named["d2t"].detach().to("cpu")
    if d2t.is_floating_point() or tuple(d2t.shape) != (config.draft_vocab_size,):
        raise EngineError(f"draft checkpoint: d2t must be integer [{config.draft_vocab_size}]")
    d2t = d2t.to(torch.int64)
    target_ids = torch.arange(config.draft_vocab_size) + d2t
    if int(target_ids.min()) < 0 or int(target_ids.max()) >= config.vocab_size:
        raise EngineError("draft checkpoint: d2t maps draft ids outside the target vocabulary")
    if target_ids.unique().numel() != target_ids.numel():
        raise EngineError("draft checkpoint: d2t maps two draft ids to one target id")
    if "t2d" in named:
        t2d = named["t2d"].detach().to("cpu").to(torch.bool)
        expected = torch.zeros(config.vocab_size, dtype=torch.bool)
        expected[target_ids] = True
        if tuple(t2d.shape) != (config.vocab_size,) or not torch.equal(t2d, expected):
            raise EngineError("draft checkpoint: t2d does not agree with d2t")
    return d2t


def _derived_config(target: LlamaTarget, draft_vocab_size: int) -> Eagle3DraftConfig:
    cfg = target.config
    return Eagle3DraftConfig(
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_attention_heads=cfg.num_attention_heads,
        # Full multi-head attention: the value path must carry the whole embedding.
        num_key_value_heads=cfg.num_attention_heads,
        head_dim=cfg.resolved_head_dim,
        vocab_size=cfg.vocab_size,
        draft_vocab_size=draft_vocab_size,
        rms_norm_eps=cfg.rms_norm_eps,
        rope_theta=cfg.rope_theta,
        rope_scaling=cfg.rope_scaling,
        max_position_embeddings=cfg.max_position_embeddings,
        capture_layers=target.capture_layers,
        torch_dtype=cfg.torch_dtype,
    )


def _derived_tensors(
    target: LlamaTarget, config: Eagle3DraftConfig, seed: int, init: DerivedInit
) -> dict[str, torch.Tensor]:
    hidden, inter = config.hidden_size, config.intermediate_size
    width = config.num_attention_heads * config.resolved_head_dim
    target_state = target.state_dict()
    lm_head = target_state[
        "model.embed_tokens.weight" if target.config.tie_word_embeddings else "lm_head.weight"
    ]
    final_norm = target_state["model.norm.weight"]
    embed = target_state["model.embed_tokens.weight"]

    def noise(name: str, shape: tuple[int, int], std: float) -> torch.Tensor:
        return uniform(seed, f"eagle3-derived/{name}", shape, std=std / shape[1] ** 0.5)

    eye = torch.eye(width, hidden)
    zeros = torch.zeros(width, hidden)
    a = "midlayer.self_attn."
    m = "midlayer.mlp."
    # Self-focused attention over the embedding half; the value of the hidden half cancels
    # the incoming (normalised) hidden state, scaled to match the embedding path.
    tensors: dict[str, torch.Tensor] = {
        a + "q_proj.weight": torch.cat((init.attention_gain * eye, zeros), dim=1)
        + noise("q", (width, 2 * hidden), init.noise_std),
        a + "k_proj.weight": torch.cat((init.attention_gain * eye, zeros), dim=1)
        + noise("k", (width, 2 * hidden), init.noise_std),
        a + "v_proj.weight": torch.cat((init.value_gain * eye, -init.value_gain * eye), dim=1)
        + noise("v", (width, 2 * hidden), init.noise_std),
        a + "o_proj.weight": torch.eye(hidden, width) + noise("o", (hidden, width), init.noise_std),
        m + "gate_proj.weight": noise("gate", (inter, hidden), 1.0),
        m + "up_proj.weight": noise("up", (inter, hidden), 1.0),
        m + "down_proj.weight": noise("down", (hidden, inter), init.mlp_gain),
        "midlayer.input_layernorm.weight": torch.ones(hidden),
        "midlayer.hidden_norm.weight": torch.ones(hidden),
        "midlayer.post_attention_layernorm.weight": torch.ones(hidden),
        "norm.weight": final_norm.clone(),
    }
    fc = noise("fc", (hidden, 3 * hidden), 1.0)
    tensors["fc.weight"] = fc * (init.fc_gain * init.value_gain / _fc_rms(target, fc, seed, init))
    if config.draft_vocab_size == config.vocab_size:
        tensors["lm_head.weight"] = lm_head.clone()
    else:
        kept = _favoured_ids(embed, final_norm, lm_head, target.config.rms_norm_eps)
        kept = kept[: config.draft_vocab_size].sort().values
        tensors["lm_head.weight"] = lm_head[kept].clone()
        tensors["d2t"] = kept - torch.arange(config.draft_vocab_size)
    return tensors


def _fc_rms(target: LlamaTarget, fc: torch.Tensor, seed: int, init: DerivedInit) -> float:
    """rms of ``fc(aux)`` over a seeded calibration sequence run through the target,
    rounded to a sixteenth of an octave.

    The target's float32 states differ in the last bits between CPUs of different vector
    widths (sums group differently); the rounding keeps the derived weights the same
    everywhere unless the rms falls within about 1e-7 of a grid point.
    """
    words = uniform(seed, "eagle3-derived/calibration", (init.calibration_tokens,), std=1.0)
    # The uniform values lie in (-sqrt(3), sqrt(3)); map them to token ids.
    unit = (words.double() / math.sqrt(3.0) + 1.0) * 0.5
    tokens = (unit * target.vocab_size).long().clamp(0, target.vocab_size - 1)
    cache = target.new_cache()
    length = min(init.calibration_tokens, target.max_seq_len)
    aux = target.forward([(cache, tokens[:length].tolist())])[0].aux_hidden
    cache.release()
    rms = float(linear(aux.cpu().double(), fc.double()).pow(2).mean().sqrt())
    return 2.0 ** (round(16 * math.log2(rms)) / 16)


def _favoured_ids(
    embed: torch.Tensor, final_norm: torch.Tensor, lm_head: torch.Tensor, eps: float
) -> torch.Tensor:
    """Target ids sorted by the probability mass the current-token predictions give them.

    Computed in float64 so that platform-dependent rounding cannot reorder two ids (their
    masses would have to agree to about 1e-15).
    """
    normed = rms_norm(embed.double(), final_norm.double(), eps)
    mass = torch.softmax(linear(normed, lm_head.double()), dim=-1).sum(0)
    return torch.argsort(mass, descending=True, stable=True)
