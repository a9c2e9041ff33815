"""A checkpoint's config.json with values no engine can compute with (a negative or zero
size, a string or a list where a number goes, RoPE scaling that divides by zero) is an
``EngineError`` naming the file and the field, never a traceback from torch when the RoPE
table or the KV cache is built."""

from __future__ import annotations

from typing import Any

import pytest

from specseed.core.errors import EngineError
from specseed.models.config import Eagle3DraftConfig, LlamaConfig
from specseed.models.make_checkpoint import CHECKPOINT_MODEL

TARGET = CHECKPOINT_MODEL.config.to_dict()
DRAFT = Eagle3DraftConfig(
    hidden_size=64,
    intermediate_size=128,
    num_attention_heads=2,
    num_key_value_heads=1,
    vocab_size=512,
    draft_vocab_size=384,
    head_dim=32,
    max_position_embeddings=512,
).to_dict()

RAW_LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 256,
}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"max_position_embeddings": -1}, "max_position_embeddings must be positive, got -1"),
        ({"max_position_embeddings": 0}, "max_position_embeddings must be positive, got 0"),
        ({"max_position_embeddings": "x"}, "a field has the wrong type or is missing"),
        ({"max_position_embeddings": [512]}, "not 'list'"),
        ({"max_position_embeddings": 1e400}, "cannot convert float infinity"),
        ({"vocab_size": None}, "missing required field 'vocab_size'"),
        ({"rope_scaling": {**RAW_LLAMA3, "low_freq_factor": 0.0}}, "0 < low_freq_factor"),
        ({"rope_scaling": {**RAW_LLAMA3, "high_freq_factor": 1.0}}, "< high_freq_factor"),
        ({"rope_scaling": {**RAW_LLAMA3, "factor": -2}}, "needs factor > 0"),
        ({"rope_scaling": {"rope_type": "llama3"}}, "missing field 'factor'"),
    ],
)
@pytest.mark.parametrize("kind", ["target", "draft"])
def test_a_config_value_no_engine_can_use_is_an_engine_error_naming_the_file(
    change: dict[str, Any], says: str, kind: str
) -> None:
    reader = LlamaConfig if kind == "target" else Eagle3DraftConfig
    raw = {**(TARGET if kind == "target" else DRAFT), **change}
    with pytest.raises(EngineError) as caught:
        reader.from_dict(raw, source=f"{kind}/config.json")
    assert caught.value.message.startswith(f"{kind}/config.json: ")
    assert says in caught.value.message


def test_the_tiny_configs_read_back() -> None:
    assert LlamaConfig.from_dict(TARGET).to_dict() == TARGET
    assert Eagle3DraftConfig.from_dict(DRAFT).to_dict() == DRAFT
