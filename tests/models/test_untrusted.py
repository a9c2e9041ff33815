"""Checkpoint folders as untrusted input, and ``make-checkpoint`` on a README install.

- ``make-checkpoint`` runs with numpy hidden (it is not a dependency) and writes files that
  safetensors and the reference engine read back;
- a crash midway leaves no folder behind (a rerun needs no ``--force``);
- a shard index whose ``weight_map`` has wrong types or names a file outside the folder
  (``..``, an absolute path, a symlink out) is an ``InputError`` naming the file and field;
- a folder without config.json is an ``InputError`` from the vLLM adapter's vocabulary
  look-up too (no FileNotFoundError).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import specseed.models.make_checkpoint as make_module
from specseed.core.errors import InputError
from specseed.models import checkpoint
from specseed.models.make_checkpoint import make_checkpoint

SRC = Path(__file__).resolve().parents[2] / "src"

HIDE_NUMPY = """
import sys

class _HideNumpy:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" or name.startswith("numpy."):
            raise ModuleNotFoundError("No module named 'numpy'", name="numpy")
        return None

sys.meta_path.insert(0, _HideNumpy())
"""


def test_make_checkpoint_needs_no_numpy(tmp_path: Path) -> None:
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(HIDE_NUMPY)
    env = {**os.environ, "PYTHONPATH": f"{hide}{os.pathsep}{SRC}"}
    probe = subprocess.run(
        [sys.executable, "-c", "import numpy"], env=env, capture_output=True, timeout=60
    )
    assert probe.returncode != 0  # the hiding works, so the run below proves something
    result = subprocess.run(
        [sys.executable, "-m", "specseed", "make-checkpoint", str(tmp_path / "ckpt")],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    tensors = load_file(str(tmp_path / "ckpt" / "target" / "model.safetensors"))
    built = make_module.CHECKPOINT_MODEL.build_target(0).state_dict()
    assert set(tensors) == set(built)
    assert all(torch.equal(tensors[name], tensor) for name, tensor in built.items())


def test_a_crash_midway_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specseed.models import tokenizer

    def disk_full(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tokenizer, "write_tokenizer", disk_full)
    with pytest.raises(InputError, match="No space left"):
        make_checkpoint(tmp_path / "ckpt")
    assert list(tmp_path.iterdir()) == []  # neither the folder nor the staging folder
    monkeypatch.undo()
    make_checkpoint(tmp_path / "ckpt")  # no --force needed
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["draft", "target"]


def _sharded(tmp_path: Path) -> Path:
    root = tmp_path / "sharded"
    tensors = {f"w{i}": torch.full((4,), float(i)) for i in range(3)}
    checkpoint.save_checkpoint(root, {"vocab_size": 8}, tensors, max_shard_bytes=16)
    assert (root / checkpoint.SAFETENSORS_INDEX_NAME).is_file()
    assert checkpoint.load_tensors(root).keys() == tensors.keys()
    return root


def _rewrite_map(root: Path, change: object) -> Path:
    path = root / checkpoint.SAFETENSORS_INDEX_NAME
    index = json.loads(path.read_text())
    index["weight_map"] = change(index["weight_map"]) if callable(change) else change
    path.write_text(json.dumps(index))
    return path


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"w0": 5}, "field weight_map.w0: expected a file name, got int"),
        ([1, 2], "field weight_map must be a non-empty object"),
        ({}, "field weight_map must be a non-empty object"),
        ({"w0": "../outside.safetensors"}, "is not a file name in the checkpoint folder"),
        ({"w0": "/etc/passwd"}, "is not a file name in the checkpoint folder"),
        ({"w0": "sub/inner.safetensors"}, "is not a file name in the checkpoint folder"),
        ({"w0": "absent.safetensors"}, "field weight_map: shard 'absent.safetensors' is missing"),
    ],
    ids=["int", "list", "empty", "dotdot", "absolute", "subdir", "missing"],
)
def test_a_bad_weight_map_names_the_file_and_field(
    tmp_path: Path, change: object, says: str
) -> None:
    root = _sharded(tmp_path)
    index = _rewrite_map(root, change)
    with pytest.raises(InputError) as caught:
        checkpoint.load_tensors(root)
    assert caught.value.message.startswith(str(index))
    assert says in caught.value.message


def test_a_shard_symlinked_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    root = _sharded(tmp_path)
    outside = tmp_path / "outside.safetensors"
    shard = next(root.glob("model-00001-*.safetensors"))
    shard.rename(outside)
    shard.symlink_to(outside)
    with pytest.raises(InputError, match="symlink out of the checkpoint folder"):
        checkpoint.load_tensors(root)


def test_a_folder_without_config_json_is_an_input_error_for_vllm(tmp_path: Path) -> None:
    from specseed.engine_adapters.vllm.adapter import VllmEngine

    engine = VllmEngine.__new__(VllmEngine)  # only the vocabulary look-up: no vLLM started
    engine._vocab_size = None
    engine.settings = type("S", (), {"checkpoint": tmp_path})()
    with pytest.raises(InputError, match=r"no config\.json"):
        engine.encode((1, 2))
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": "512"}))
    with pytest.raises(InputError, match="field vocab_size must be a positive integer"):
        engine.encode((1, 2))
