"""``specseed make-checkpoint``: deterministic files that the engines load as they are."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from specseed.cli.app import app
from specseed.models.draft import Eagle3DraftHead
from specseed.models.make_checkpoint import CHECKPOINT_MODEL, make_checkpoint
from specseed.models.target import LlamaTarget


def _digests(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_same_seed_writes_identical_bytes_and_another_seed_other_weights(tmp_path: Path) -> None:
    first = _digests(make_checkpoint(tmp_path / "a", seed=5).root)
    second = _digests(make_checkpoint(tmp_path / "b", seed=5).root)
    other = _digests(make_checkpoint(tmp_path / "c", seed=6).root)
    assert first == second
    assert set(first) == {
        "draft/config.json",
        "draft/model.safetensors",
        "target/config.json",
        "target/generation_config.json",
        "target/model.safetensors",
        "target/tokenizer.json",
        "target/tokenizer_config.json",
    }
    differ = {name for name in first if first[name] != other[name]}
    assert differ == {"draft/model.safetensors", "target/model.safetensors"}


def test_default_size_fits_vllm_cpu_attention() -> None:
    # vLLM 0.32.0's CPU attention backend refuses head_dim < 32.
    assert CHECKPOINT_MODEL.config.resolved_head_dim >= 32


def test_reference_engine_loads_the_checkpoint_as_built(tmp_path: Path) -> None:
    bundle = make_checkpoint(tmp_path / "ckpt", seed=2)
    loaded = LlamaTarget.from_checkpoint(bundle.target)
    built = CHECKPOINT_MODEL.build_target(2)
    for name, tensor in built.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    head = Eagle3DraftHead.from_checkpoint(bundle.draft, loaded)
    assert head.config.draft_vocab_size == CHECKPOINT_MODEL.draft_vocab_size
    assert head.config.capture_layers == loaded.capture_layers


def test_transformers_loads_model_and_tokenizer(tmp_path: Path) -> None:
    transformers = pytest.importorskip(
        "transformers", reason="needs transformers (the test extra): pip install -e '.[test]'"
    )
    bundle = make_checkpoint(tmp_path / "ckpt", seed=0)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(bundle.target))
    ids = tokenizer("héllo, world")["input_ids"]
    assert ids[0] == 1  # <s>
    assert tokenizer.decode(ids, skip_special_tokens=True) == "héllo, world"
    assert len(tokenizer) == CHECKPOINT_MODEL.config.vocab_size
    model = transformers.LlamaForCausalLM.from_pretrained(
        str(bundle.target), dtype=torch.float32, attn_implementation="eager"
    ).eval()
    ours = LlamaTarget.from_checkpoint(bundle.target)
    with torch.no_grad():
        theirs = model(torch.tensor([ids])).logits[0]
    mine = ours.forward([(ours.new_cache(), ids)])[0].logits
    torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-4)


def test_cli_writes_and_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    runner = CliRunner()
    target = tmp_path / "ckpt"
    result = runner.invoke(app, ["make-checkpoint", str(target), "--seed", "1"])
    assert result.exit_code == 0, result.output
    assert (target / "target" / "config.json").is_file()
    again = runner.invoke(app, ["make-checkpoint", str(target)])
    assert again.exit_code == 2, again.output
    assert "not empty" in again.output
    forced = runner.invoke(app, ["make-checkpoint", str(target), "--force", "--seed", "1"])
    assert forced.exit_code == 0, forced.output
    bad = runner.invoke(app, ["make-checkpoint", str(tmp_path / "x"), "--seed", "-1"])
    assert bad.exit_code == 2, bad.output
