"""The EAGLE3 head computes TRT-LLM's one-model draft step, checked against a dense
float64 re-implementation written from the description in draft.py; plus the capture-layer
rule and the errors a decode loop can run into."""

from __future__ import annotations

import math

import pytest
import torch

from specseed.core.errors import EngineError
from specseed.models.config import Eagle3DraftConfig, LlamaConfig
from specseed.models.draft import Eagle3DraftHead, expected_shapes
from specseed.models.seeded import uniform
from specseed.models.target import LlamaTarget, default_capture_layers
from specseed.models.tiny import TINY_MODEL

SMALL = LlamaConfig(
    vocab_size=70,
    hidden_size=32,
    intermediate_size=40,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)


def random_head(target: LlamaTarget, *, draft_vocab: int, norm_output: bool) -> Eagle3DraftHead:
    """A head with plain seeded weights (unlike the derived one, nothing is near identity)."""
    config = Eagle3DraftConfig(
        hidden_size=32,
        intermediate_size=48,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=target.vocab_size,
        draft_vocab_size=draft_vocab,
        rope_theta=10000.0,
        max_position_embeddings=64,
        norm_output=norm_output,
    )
    tensors = {
        name: (1.0 + uniform(9, name, shape, std=0.1))
        if len(shape) == 1
        else uniform(9, name, shape, std=1.0 / math.sqrt(shape[1]))
        for name, shape in expected_shapes(config).items()
    }
    if draft_vocab < target.vocab_size:
        kept = torch.arange(0, 2 * draft_vocab, 2)  # every other target id
        tensors["d2t"] = kept - torch.arange(draft_vocab)
    return Eagle3DraftHead(config, tensors, target)


def dense_reference(
    head: Eagle3DraftHead, tokens: list[int], hidden: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """All positions at once in float64 with matmuls and a causal mask.

    ``hidden [n, H]`` is each position's layer input (fc already applied where it applies).
    Returns (draft-vocab logits, hidden_out).
    """
    cfg = head.config
    s = {k: v.double() for k, v in head.state_dict().items() if v.is_floating_point()}
    t = {k: v.double() for k, v in head.target.state_dict().items()}
    embed = t["model.embed_tokens.weight"]
    lm_head = s.get("lm_head.weight", t.get("lm_head.weight", embed))
    eps = cfg.rms_norm_eps

    def rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)

    n, heads, kv_heads, d = (
        len(tokens),
        cfg.num_attention_heads,
        cfg.num_key_value_heads,
        cfg.resolved_head_dim,
    )
    h = hidden.double()
    x = torch.cat(
        (
            rms(embed[tokens], s["midlayer.input_layernorm.weight"]),
            rms(h, s["midlayer.hidden_norm.weight"]),
        ),
        -1,
    )
    q = (x @ s["midlayer.self_attn.q_proj.weight"].T).view(n, heads, d).transpose(0, 1)
    k = (x @ s["midlayer.self_attn.k_proj.weight"].T).view(n, kv_heads, d).transpose(0, 1)
    v = (x @ s["midlayer.self_attn.v_proj.weight"].T).view(n, kv_heads, d).transpose(0, 1)
    inv_freq = cfg.rope_theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq
    cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()

    def rope(z: torch.Tensor) -> torch.Tensor:
        rotated = torch.cat((-z[..., d // 2 :], z[..., : d // 2]), -1)
        return z * cos + rotated * sin

    q, k = rope(q), rope(k).repeat_interleave(heads // kv_heads, 0)
    v = v.repeat_interleave(heads // kv_heads, 0)
    scores = q @ k.transpose(1, 2) / math.sqrt(d)
    scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    attended = (torch.softmax(scores, -1) @ v).transpose(0, 1).reshape(n, heads * d)
    residual = h + attended @ s["midlayer.self_attn.o_proj.weight"].T
    y = rms(residual, s["midlayer.post_attention_layernorm.weight"])
    gate = y @ s["midlayer.mlp.gate_proj.weight"].T
    residual = (
        residual
        + (torch.nn.functional.silu(gate) * (y @ s["midlayer.mlp.up_proj.weight"].T))
        @ s["midlayer.mlp.down_proj.weight"].T
    )
    normed = rms(residual, s["norm.weight"])
    return normed @ lm_head.T, normed if cfg.norm_output else residual


def to_target_ids(head: Eagle3DraftHead, draft_logits: torch.Tensor) -> torch.Tensor:
    if head.config.draft_vocab_size == head.config.vocab_size:
        return draft_logits
    d2t = head.state_dict()["d2t"]
    full = torch.full(
        (draft_logits.shape[0], head.config.vocab_size), float("-inf"), dtype=draft_logits.dtype
    )
    full[:, torch.arange(head.config.draft_vocab_size) + d2t] = draft_logits
    return full


@pytest.fixture(scope="module")
def target() -> LlamaTarget:
    return LlamaTarget.random(SMALL, model_seed=1)


@pytest.mark.parametrize(
    ("draft_vocab", "norm_output"),
    [(70, False), (35, False), (70, True)],
    ids=["full-vocab", "d2t", "norm-output"],
)
def test_first_and_later_steps_match_the_dense_reference(
    target: LlamaTarget, draft_vocab: int, norm_output: bool
) -> None:
    head = random_head(target, draft_vocab=draft_vocab, norm_output=norm_output)
    prompt = [3, 14, 15, 9, 26, 5, 35, 8]
    aux = target.forward([(target.new_cache(), prompt)])[0].aux_hidden
    assert aux.shape == (len(prompt), 3 * 32)

    # First step: the state at p rides with the token at p + 1 (the last one is the newly
    # sampled token); then two later steps feed back hidden_out.
    tokens = [*prompt[1:], 44]
    cache = head.new_cache()
    first = head.forward([(cache, tokens, aux)])[0]
    inputs = [aux @ head.state_dict()["fc.weight"].T]
    outputs = [first]
    for token in (61, 2):
        inputs.append(outputs[-1].hidden_out[-1:])
        outputs.append(head.forward([(cache, [token], outputs[-1].hidden_out[-1:])])[0])
        tokens.append(token)
    assert cache.length == len(tokens)

    ref_logits, ref_hidden = dense_reference(head, tokens, torch.cat(inputs))
    logits = torch.cat([o.logits for o in outputs])
    hidden = torch.cat([o.hidden_out for o in outputs])
    torch.testing.assert_close(
        logits, to_target_ids(head, ref_logits).float(), rtol=1e-4, atol=1e-4
    )
    torch.testing.assert_close(hidden, ref_hidden.float(), rtol=1e-4, atol=1e-4)


def test_draft_vocabulary_maps_to_target_ids(target: LlamaTarget) -> None:
    head = random_head(target, draft_vocab=35, norm_output=False)
    out = head.forward(
        [
            (
                head.new_cache(),
                [1, 2, 3],
                target.forward([(target.new_cache(), [0, 1, 2])])[0].aux_hidden,
            )
        ]
    )[0]
    finite = torch.isfinite(out.logits)
    assert finite[:, 0::2].all()  # the head keeps every other target id
    assert not finite[:, 1::2].any()
    assert out.logits.dtype == torch.float32


def test_builtin_head_uses_a_reduced_vocabulary_and_matches_the_reference() -> None:
    target, head = TINY_MODEL.build(model_seed=0)
    assert head.config.draft_vocab_size == TINY_MODEL.draft_vocab_size < target.vocab_size
    assert head.config.capture_layers == target.capture_layers == (0, 2, 3)
    prompt = [10, 20, 30, 40, 50]
    aux = target.forward([(target.new_cache(), prompt)])[0].aux_hidden
    out = head.forward([(head.new_cache(), [*prompt[1:], 60], aux)])[0]
    ref_logits, ref_hidden = dense_reference(
        head, [*prompt[1:], 60], aux @ head.state_dict()["fc.weight"].T
    )
    torch.testing.assert_close(
        out.logits, to_target_ids(head, ref_logits).float(), rtol=1e-4, atol=1e-4
    )
    torch.testing.assert_close(out.hidden_out, ref_hidden.float(), rtol=1e-4, atol=1e-4)
    assert int(torch.isinf(out.logits[0]).sum()) == target.vocab_size - head.config.draft_vocab_size


def test_derived_head_is_a_function_of_target_and_seed() -> None:
    target = TINY_MODEL.build_target(3)
    a, b = TINY_MODEL.build_draft(target, 3), TINY_MODEL.build_draft(target, 3)
    c = TINY_MODEL.build_draft(target, 4)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["fc.weight"], sc["fc.weight"])


@pytest.mark.parametrize(
    ("layers", "expected"),
    [
        (3, (0, 1, 2)),
        (4, (0, 2, 3)),
        (5, (0, 2, 4)),
        (6, (0, 3, 5)),  # TRT-LLM's formula repeats layer 2 here
        (7, (1, 2, 3)),
        (32, (1, 15, 28)),  # Llama-3.1-8B
        (80, (1, 39, 76)),
    ],
)
def test_default_capture_layers(layers: int, expected: tuple[int, int, int]) -> None:
    assert default_capture_layers(layers) == expected


@pytest.mark.parametrize("layers", [1, 2])
def test_too_few_layers_for_three_captures(layers: int) -> None:
    with pytest.raises(EngineError, match="three distinct"):
        default_capture_layers(layers)


def test_forward_refuses_bad_chunks(target: LlamaTarget) -> None:
    head = random_head(target, draft_vocab=70, norm_output=False)
    aux = torch.zeros(2, 96)
    with pytest.raises(EngineError, match="another model"):
        head.forward([(target.new_cache(), [1, 2], aux)])
    with pytest.raises(EngineError, match="expected"):
        head.forward([(head.new_cache(), [1, 2], torch.zeros(2, 50))])
    with pytest.raises(EngineError, match="out of range"):
        head.forward([(head.new_cache(), [1, 70], aux)])
    cache = head.new_cache()
    with pytest.raises(EngineError, match="twice"):
        head.forward([(cache, [1], aux[:1]), (cache, [2], aux[:1])])
    with pytest.raises(EngineError, match="capacity"):
        head.forward([(cache, list(range(65)), torch.zeros(65, 96))])
    assert cache.length == 0  # a refused forward appends nothing
    released = head.new_cache()
    released.release()
    with pytest.raises(EngineError, match="released"):
        head.forward([(released, [1], aux[:1])])
    with pytest.raises(EngineError, match="truncate"):
        cache.truncate(1)
