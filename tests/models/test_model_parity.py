"""The target computes what transformers' LlamaForCausalLM computes on the same checkpoint.

Kernels differ (elementwise products and sums here, BLAS there), so logits agree to float32
rounding, not bit for bit. Each checkpoint is written by one side and read by the other.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from specseed.models.config import LlamaConfig, RopeScaling
from specseed.models.target import LlamaTarget

transformers = pytest.importorskip(
    "transformers", reason="needs transformers (the test extra): pip install -e '.[test]'"
)

SMALL = LlamaConfig(
    vocab_size=96,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)
EVERY_FEATURE = LlamaConfig(
    vocab_size=80,
    hidden_size=24,
    intermediate_size=40,
    num_hidden_layers=4,
    num_attention_heads=3,
    num_key_value_heads=1,
    head_dim=10,  # not hidden_size // heads
    tie_word_embeddings=True,
    attention_bias=True,
    mlp_bias=True,
    rope_theta=500000.0,
    rope_scaling=RopeScaling(
        factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=16
    ),
    rms_norm_eps=1e-5,
    max_position_embeddings=128,
)
TOKENS = [5, 17, 3, 88, 42, 42, 7, 0, 61, 19, 33, 2, 71, 8, 8, 50, 23, 64, 11, 4]


def hf_model(path: Path) -> torch.nn.Module:
    model = transformers.LlamaForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager"
    )
    return model.eval()


def hf_outputs(
    model: torch.nn.Module, tokens: list[int]
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    with torch.no_grad():
        out = model(torch.tensor([tokens]), output_hidden_states=True)
    return out.logits[0], tuple(h[0] for h in out.hidden_states)


def assert_close(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "config", [SMALL, EVERY_FEATURE], ids=["gqa", "tied-bias-headdim-llama3rope"]
)
def test_logits_and_captured_states_match_transformers(config: LlamaConfig, tmp_path: Path) -> None:
    ours = LlamaTarget.random(config, model_seed=3, capture_layers=(0, 1, 2))
    ours.save_checkpoint(tmp_path)
    tokens = [t % config.vocab_size for t in TOKENS]

    out = ours.forward([(ours.new_cache(), tokens)])[0]
    logits, hidden_states = hf_outputs(hf_model(tmp_path), tokens)

    assert_close(out.logits, logits)
    # hidden_states[i + 1] is the output of decoder layer i: what TRT-LLM captures for layer i.
    # transformers applies the final norm to its last entry: capture layers below N - 1 only.
    expected_aux = torch.cat([hidden_states[i + 1] for i in ours.capture_layers], dim=-1)
    assert_close(out.aux_hidden, expected_aux)


def test_decoding_with_cache_matches_transformers_full_sequence(tmp_path: Path) -> None:
    ours = LlamaTarget.random(SMALL, model_seed=4)
    ours.save_checkpoint(tmp_path)
    cache = ours.new_cache()
    steps = [ours.forward([(cache, TOKENS[:12])])[0].logits]
    steps += [ours.forward([(cache, [t])])[0].logits for t in TOKENS[12:]]

    logits, _ = hf_outputs(hf_model(tmp_path), TOKENS)
    assert_close(torch.cat(steps), logits)


def test_reads_a_checkpoint_written_by_transformers(tmp_path: Path) -> None:
    hf_config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=1,
        max_position_embeddings=64,
        rope_theta=1000.0,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(hf_config).eval()
    model.save_pretrained(tmp_path)  # transformers 5.x spelling: rope_parameters, dtype

    ours = LlamaTarget.from_checkpoint(tmp_path)
    tokens = [t % 64 for t in TOKENS]
    logits, _ = hf_outputs(model, tokens)
    assert ours.config.rope_theta == 1000.0
    assert_close(ours.forward([(ours.new_cache(), tokens)])[0].logits, logits)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_checkpoints_load_upcast(dtype: str, tmp_path: Path) -> None:
    LlamaTarget.random(SMALL, model_seed=5).save_checkpoint(tmp_path, dtype=dtype)
    ours = LlamaTarget.from_checkpoint(tmp_path)
    assert ours.config.torch_dtype == dtype

    logits, _ = hf_outputs(hf_model(tmp_path), TOKENS)
    assert_close(ours.forward([(ours.new_cache(), TOKENS)])[0].logits, logits)


def test_sharded_checkpoint_loads_in_both(tmp_path: Path) -> None:
    LlamaTarget.random(SMALL, model_seed=6).save_checkpoint(tmp_path, max_shard_bytes=20_000)
    assert (tmp_path / "model.safetensors.index.json").is_file()
    assert len(list(tmp_path.glob("model-*-of-*.safetensors"))) > 2

    ours = LlamaTarget.from_checkpoint(tmp_path)
    logits, _ = hf_outputs(hf_model(tmp_path), TOKENS)
    assert_close(ours.forward([(ours.new_cache(), TOKENS)])[0].logits, logits)
