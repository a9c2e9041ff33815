"""Checkpoint directories: round trips, the EAGLE3 layout TRT-LLM reads, seeded weights that
never change, and the errors a bad directory produces."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from specseed.core.errors import EngineError, InputError
from specseed.models.config import Eagle3DraftConfig, LlamaConfig
from specseed.models.draft import Eagle3DraftHead
from specseed.models.seeded import uniform
from specseed.models.target import LlamaTarget
from specseed.models.tiny import TINY_MODEL

SMALL = LlamaConfig(
    vocab_size=60,
    hidden_size=16,
    intermediate_size=24,
    num_hidden_layers=3,
    num_attention_heads=2,
    num_key_value_heads=1,
    max_position_embeddings=32,
)
PROMPT = [1, 5, 9, 13, 17, 21]


def state_hash(state: dict[str, torch.Tensor]) -> str:
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(state):
        digest.update(name.encode())
        digest.update(str(state[name].dtype).encode())
        digest.update(state[name].contiguous().numpy().tobytes())
    return digest.hexdigest()


def test_seeded_weights_never_change() -> None:
    # Recorded once; a change here changes every fingerprint users have recorded.
    assert uniform(0, "x", (4,), std=1.0).tolist() == [
        -1.6718688011169434,
        0.03918749466538429,
        1.6667853593826294,
        -0.55329430103302,
    ]
    target, draft = TINY_MODEL.build(model_seed=0)
    assert state_hash(target.state_dict()) == "dc12c01b4afafc4b"
    assert state_hash(draft.state_dict()) == "03973b4f9bbb6365"
    assert state_hash(TINY_MODEL.build_target(1).state_dict()) != "dc12c01b4afafc4b"


def test_target_round_trip_is_exact(tmp_path: Path) -> None:
    original = LlamaTarget.random(SMALL, model_seed=2)
    original.save_checkpoint(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == [
        "LlamaForCausalLM"
    ]

    loaded = LlamaTarget.from_checkpoint(tmp_path)
    assert loaded.config == original.config
    assert state_hash(loaded.state_dict()) == state_hash(original.state_dict())
    a = original.forward([(original.new_cache(), PROMPT)])[0].logits
    b = loaded.forward([(loaded.new_cache(), PROMPT)])[0].logits
    assert torch.equal(a, b)


def test_draft_directory_has_the_eagle3_layout(tmp_path: Path) -> None:
    target, draft = TINY_MODEL.build(model_seed=0)
    draft.save_checkpoint(tmp_path)

    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert config["num_hidden_layers"] == 1
    assert config["vocab_size"] == 512
    assert config["draft_vocab_size"] == 384
    # vLLM/SGLang numbering: the stream entering layer i + 1 is the output of layer i.
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]

    tensors = load_file(str(tmp_path / "model.safetensors"))
    assert tensors["fc.weight"].shape == (64, 192)
    assert tensors["midlayer.self_attn.q_proj.weight"].shape == (64, 128)
    assert tensors["midlayer.hidden_norm.weight"].shape == (64,)
    assert tensors["lm_head.weight"].shape == (384, 64)
    assert tensors["d2t"].dtype == torch.int64 and tensors["d2t"].shape == (384,)
    assert tensors["t2d"].dtype == torch.bool and int(tensors["t2d"].sum()) == 384
    target_ids = torch.arange(384) + tensors["d2t"]
    assert torch.equal(tensors["t2d"].nonzero().flatten(), target_ids)
    assert "embed_tokens.weight" not in tensors  # shared with the target, as in TRT-LLM

    loaded = Eagle3DraftHead.from_checkpoint(tmp_path, target)
    aux = target.forward([(target.new_cache(), PROMPT)])[0].aux_hidden
    a = draft.forward([(draft.new_cache(), PROMPT, aux)])[0]
    b = loaded.forward([(loaded.new_cache(), PROMPT, aux)])[0]
    assert torch.equal(a.logits, b.logits)
    assert torch.equal(a.hidden_out, b.hidden_out)


def test_draft_accepts_layers_0_names_pytorch_bin_and_a_missing_lm_head(tmp_path: Path) -> None:
    target = LlamaTarget.random(SMALL, model_seed=3)
    draft = Eagle3DraftHead.derived_from(target, model_seed=3)  # full vocabulary
    draft.save_checkpoint(tmp_path / "ref")
    state = load_file(str(tmp_path / "ref" / "model.safetensors"))
    renamed = {
        k.replace("midlayer.", "layers.0."): v for k, v in state.items() if k != "lm_head.weight"
    }
    (tmp_path / "alt").mkdir()
    (tmp_path / "alt" / "config.json").write_text((tmp_path / "ref" / "config.json").read_text())
    torch.save(renamed, tmp_path / "alt" / "pytorch_model.bin")

    loaded = Eagle3DraftHead.from_checkpoint(tmp_path / "alt", target)
    aux = target.forward([(target.new_cache(), PROMPT)])[0].aux_hidden
    a = draft.forward([(draft.new_cache(), PROMPT, aux)])[0].logits
    b = loaded.forward([(loaded.new_cache(), PROMPT, aux)])[0].logits
    assert torch.equal(a, b)  # the derived head's lm_head is the target's


@pytest.fixture(scope="module")
def builtin_draft_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("builtin-draft")
    TINY_MODEL.build(model_seed=0)[1].save_checkpoint(path)
    return path


def write_draft(template: Path, path: Path, **changes: object) -> Path:
    """A copy of the built-in draft directory with some tensors or config keys replaced."""
    tensors = load_file(str(template / "model.safetensors"))
    config = json.loads((template / "config.json").read_text())
    for key, value in changes.items():
        if key.startswith("config:"):
            config[key.removeprefix("config:")] = value
        elif value is None:
            tensors.pop(key)
        else:
            assert isinstance(value, torch.Tensor)
            tensors[key] = value
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(config))
    return path


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"d2t": None}, "no d2t"),
        ({"d2t": -torch.arange(384)}, "two draft ids to one target id"),
        ({"d2t": torch.full((384,), 200, dtype=torch.int64)}, "outside the target vocabulary"),
        ({"t2d": torch.ones(512, dtype=torch.bool)}, "t2d does not agree"),
        ({"fc.weight": torch.zeros(64, 128)}, "fc.weight has shape"),
        ({"midlayer.mlp.up_proj.weight": None}, "missing"),
        ({"extra.weight": torch.zeros(2)}, "unexpected"),
        ({"config:num_hidden_layers": 2}, "num_hidden_layers=2"),
        ({"config:eagle_config": {"eh_proj_before_attn": True}}, "eh_proj_before_attn"),
        ({"config:hidden_act": "gelu"}, "silu only"),
        ({"config:rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, "rope type 'yarn'"),
        ({"config:vocab_size": 600, "config:draft_vocab_size": 384}, "vocab_size 600 differs"),
        (
            {"config:eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 3, 4]}},
            "built for target layers",
        ),
    ],
)
def test_bad_draft_directories_are_refused(
    builtin_draft_dir: Path, tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    target = TINY_MODEL.build_target(0)
    path = write_draft(builtin_draft_dir, tmp_path, **changes)
    with pytest.raises(EngineError, match=message):
        Eagle3DraftHead.from_checkpoint(path, target)


def test_bad_target_directories_are_refused(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="not a directory") as missing:
        LlamaTarget.from_checkpoint(tmp_path / "nowhere")
    assert "nothing is downloaded" in (missing.value.hint or "")
    with pytest.raises(InputError, match=r"no config\.json"):  # a bad folder: exit 2
        LlamaTarget.from_checkpoint(tmp_path)

    LlamaTarget.random(SMALL, model_seed=1).save_checkpoint(tmp_path)
    (tmp_path / "model.safetensors").rename(tmp_path / "elsewhere.safetensors")
    with pytest.raises(EngineError, match="no weights found"):
        LlamaTarget.from_checkpoint(tmp_path)
    (tmp_path / "elsewhere.safetensors").rename(tmp_path / "model.safetensors")

    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 4}))
    with pytest.raises(EngineError, match="missing"):
        LlamaTarget.from_checkpoint(tmp_path)
    (tmp_path / "config.json").write_text(
        json.dumps({**config, "architectures": ["MistralForCausalLM"]})
    )
    with pytest.raises(EngineError, match="not a Llama checkpoint"):
        LlamaTarget.from_checkpoint(tmp_path)


def test_config_reads_both_transformers_spellings() -> None:
    v4 = {
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": 10,
        "hidden_size": 8,
        "intermediate_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        "torch_dtype": "bfloat16",
        "eos_token_id": [1, 2],
    }
    v5 = {k: v for k, v in v4.items() if k not in ("rope_theta", "rope_scaling", "torch_dtype")}
    v5["rope_parameters"] = {**v4["rope_scaling"], "rope_theta": 500000.0}  # type: ignore[dict-item]
    v5["dtype"] = "bfloat16"
    a, b = LlamaConfig.from_dict(v4), LlamaConfig.from_dict(v5)
    assert a == b
    assert a.num_key_value_heads == 2 and a.eos_token_id == (1, 2)
    assert LlamaConfig.from_dict(a.to_dict()) == a


def test_draft_config_round_trips_and_defaults_like_trtllm() -> None:
    minimal = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "hidden_size": 8,
        "intermediate_size": 8,
        "num_attention_heads": 2,
        "vocab_size": 10,
    }
    config = Eagle3DraftConfig.from_dict(minimal)
    assert config.draft_vocab_size == 10  # TRT-LLM's _ensure_draft_vocab_size
    assert config.capture_layers is None
    assert Eagle3DraftConfig.from_dict(config.to_dict()) == config


def test_reads_the_published_eagle3_llama31_8b_config() -> None:
    # config.json of yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, the head TRT-LLM's EAGLE3 examples use.
    published = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "bos_token_id": 128000,
        "eos_token_id": 128001,
        "hidden_act": "silu",
        "hidden_size": 4096,
        "initializer_range": 0.02,
        "intermediate_size": 14336,
        "max_position_embeddings": 2048,
        "model_type": "llama",
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 1,
        "pad_token_id": 0,
        "rms_norm_eps": 1e-05,
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
        "transformers_version": "4.28.1",
        "use_cache": True,
        "vocab_size": 128256,
        "draft_vocab_size": 32000,
    }
    config = Eagle3DraftConfig.from_dict(published)
    assert (config.hidden_size, config.num_key_value_heads, config.head_dim) == (4096, 8, 128)
    assert (config.vocab_size, config.draft_vocab_size) == (128256, 32000)
    # No rope keys: the draft layer runs with the Llama default theta, not the target's 500000.
    assert config.rope_theta == 10000.0 and config.rope_scaling is None
    assert config.capture_layers is None and config.torch_dtype == "float16"
