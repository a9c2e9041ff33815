"""Reading and writing Hugging Face style checkpoint directories.

A directory holds ``config.json`` and its tensors in one of the layouts transformers and
TensorRT-LLM read: ``model.safetensors``; shards listed by ``model.safetensors.index.json``;
or, as older EAGLE3 releases ship, ``pytorch_model.bin`` (optionally sharded the same way).
Tensors come back in their stored dtype; the models cast to float32 themselves.
Nothing here downloads anything: a path that is not a local directory is an error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from specseed.core.errors import EngineError

CONFIG_NAME = "config.json"
SAFETENSORS_NAME = "model.safetensors"
SAFETENSORS_INDEX_NAME = "model.safetensors.index.json"
TORCH_BIN_NAME = "pytorch_model.bin"
TORCH_BIN_INDEX_NAME = "pytorch_model.bin.index.json"

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


def read_config(directory: Path) -> dict[str, Any]:
    """The parsed config.json of a checkpoint directory."""
    path = _directory(directory) / CONFIG_NAME
    if not path.is_file():
        raise EngineError(
            f"{directory}: no {CONFIG_NAME}",
            hint="point at a Hugging Face checkpoint directory (config.json + safetensors)",
        )
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise EngineError(f"{path}: cannot read JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise EngineError(f"{path}: expected a JSON object")
    return raw


def load_tensors(directory: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint, by name, in its stored dtype, on the CPU."""
    root = _directory(directory)
    for index_name in (SAFETENSORS_INDEX_NAME, TORCH_BIN_INDEX_NAME):
        index_path = root / index_name
        if index_path.is_file():
            return _load_sharded(root, index_path)
    if (root / SAFETENSORS_NAME).is_file():
        return _load_file(root / SAFETENSORS_NAME)
    if (root / TORCH_BIN_NAME).is_file():
        return _load_file(root / TORCH_BIN_NAME)
    raise EngineError(
        f"{directory}: no weights found",
        hint=f"expected {SAFETENSORS_NAME}, {SAFETENSORS_INDEX_NAME} or {TORCH_BIN_NAME}",
    )


def save_checkpoint(
    directory: Path,
    config: Mapping[str, Any],
    tensors: Mapping[str, torch.Tensor],
    *,
    max_shard_bytes: int | None = None,
) -> None:
    """Write config.json and the tensors as safetensors, sharded with an index past
    ``max_shard_bytes`` (the layout ``save_pretrained`` produces)."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    (root / CONFIG_NAME).write_text(json.dumps(dict(config), indent=2) + "\n", encoding="utf-8")
    prepared = {name: t.detach().to("cpu").contiguous() for name, t in tensors.items()}
    shards = _plan_shards(prepared, max_shard_bytes)
    metadata = {"format": "pt"}  # transformers refuses safetensors files without it
    if len(shards) == 1:
        save_file(shards[0], str(root / SAFETENSORS_NAME), metadata=metadata)
        return
    weight_map: dict[str, str] = {}
    for number, shard in enumerate(shards, start=1):
        filename = f"model-{number:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(root / filename), metadata=metadata)
        weight_map.update(dict.fromkeys(shard, filename))
    total = sum(t.numel() * t.element_size() for t in prepared.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (root / SAFETENSORS_INDEX_NAME).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")


def _directory(directory: Path) -> Path:
    root = Path(directory)
    if not root.is_dir():
        raise EngineError(
            f"{directory}: not a directory",
            hint="checkpoints are read from a local directory; nothing is downloaded",
        )
    return root


def _load_file(path: Path) -> dict[str, torch.Tensor]:
    try:
        if path.suffix == ".safetensors":
            return load_file(str(path), device="cpu")
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # safetensors and torch raise a zoo of exception types
        raise EngineError(f"{path}: cannot read weights ({exc})") from exc
    if not isinstance(loaded, dict):
        raise EngineError(f"{path}: expected a state dict")
    return {str(k): v for k, v in loaded.items() if isinstance(v, torch.Tensor)}


def _load_sharded(root: Path, index_path: Path) -> dict[str, torch.Tensor]:
    try:
        weight_map = json.loads(index_path.read_text(encoding="utf-8"))["weight_map"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise EngineError(f"{index_path}: not a valid shard index ({exc})") from exc
    tensors: dict[str, torch.Tensor] = {}
    for filename in sorted(set(weight_map.values())):
        shard_path = root / filename
        if not shard_path.is_file():
            raise EngineError(f"{index_path}: shard {filename} is missing")
        tensors.update(_load_file(shard_path))
    missing = set(weight_map) - set(tensors)
    if missing:
        raise EngineError(f"{index_path}: tensors listed but not found: {sorted(missing)[:5]}")
    return tensors


def _plan_shards(
    tensors: Mapping[str, torch.Tensor], max_shard_bytes: int | None
) -> list[dict[str, torch.Tensor]]:
    if max_shard_bytes is None:
        return [dict(tensors)]
    shards: list[dict[str, torch.Tensor]] = [{}]
    used = 0
    for name, tensor in tensors.items():
        size = tensor.numel() * tensor.element_size()
        if shards[-1] and used + size > max_shard_bytes:
            shards.append({})
            used = 0
        shards[-1][name] = tensor
        used += size
    return shards
