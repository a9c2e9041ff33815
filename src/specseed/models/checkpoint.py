"""Reading and writing Hugging Face style checkpoint directories.

A directory holds ``config.json`` and its tensors in one of the layouts transformers and
TensorRT-LLM read: ``model.safetensors``; shards listed by ``model.safetensors.index.json``;
or, as older EAGLE3 releases ship, ``pytorch_model.bin`` (optionally sharded the same way).
Tensors come back in their stored dtype; the models cast to float32 themselves.
Nothing here downloads anything: a path that is not a local directory is an error.

A checkpoint folder is untrusted input: a shard index's ``weight_map`` must map tensor names
to plain file names inside the folder (no separators, no ``..``, no symlink out of it).

Files are written in the safetensors layout by ``_write_safetensors`` rather than
``safetensors.torch.save_file``: that one converts every tensor through numpy, which is not
a dependency (a README install has none), while the layout itself is a length, a JSON header
and the raw bytes.
"""

from __future__ import annotations

import ctypes
import json
import struct
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from specseed.core.errors import EngineError, InputError

CONFIG_NAME = "config.json"
SAFETENSORS_NAME = "model.safetensors"
SAFETENSORS_INDEX_NAME = "model.safetensors.index.json"
TORCH_BIN_NAME = "pytorch_model.bin"
TORCH_BIN_INDEX_NAME = "pytorch_model.bin.index.json"
MAX_JSON_BYTES = 64 << 20
"""Largest config.json or shard index read (real indexes are well under 1 MiB)."""

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


def read_config(directory: Path) -> dict[str, Any]:
    """The parsed config.json of a checkpoint directory (``InputError`` naming the file)."""
    path = _directory(directory) / CONFIG_NAME
    if not path.is_file():
        raise InputError(
            f"{directory}: no {CONFIG_NAME}",
            hint="point at a Hugging Face checkpoint directory (config.json + safetensors)",
        )
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise InputError(f"{path}: larger than {MAX_JSON_BYTES >> 20} MiB")
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise InputError(f"{path}: cannot read JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise InputError(f"{path}: expected a JSON object")
    return raw


def config_vocab_size(directory: Path) -> int:
    """``vocab_size`` of a checkpoint's config.json, checked to be a positive integer."""
    value = read_config(directory).get("vocab_size")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
        raise InputError(
            f"{Path(directory) / CONFIG_NAME}: field vocab_size must be a positive integer "
            f"below 2**31, not {str(value)[:40]!r}"
        )
    return value


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
        _write_safetensors(shards[0], root / SAFETENSORS_NAME, metadata)
        return
    weight_map: dict[str, str] = {}
    for number, shard in enumerate(shards, start=1):
        filename = f"model-{number:05d}-of-{len(shards):05d}.safetensors"
        _write_safetensors(shard, root / filename, metadata)
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
    weight_map = _weight_map(index_path)
    tensors: dict[str, torch.Tensor] = {}
    for filename in sorted(set(weight_map.values())):
        shard_path = _shard_path(root, index_path, filename)
        if not shard_path.is_file():
            raise InputError(f"{index_path}: field weight_map: shard {filename!r} is missing")
        tensors.update(_load_file(shard_path))
    missing = set(weight_map) - set(tensors)
    if missing:
        raise EngineError(f"{index_path}: tensors listed but not found: {sorted(missing)[:5]}")
    return tensors


def _weight_map(index_path: Path) -> dict[str, str]:
    """The index's ``weight_map``: tensor name -> shard file name, both strings."""
    try:
        if index_path.stat().st_size > MAX_JSON_BYTES:
            raise InputError(f"{index_path}: larger than {MAX_JSON_BYTES >> 20} MiB")
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise InputError(f"{index_path}: not a valid shard index ({exc})") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise InputError(
            f"{index_path}: field weight_map must be a non-empty object "
            "(tensor name -> shard file name)"
        )
    for name, filename in weight_map.items():
        if not isinstance(filename, str):
            raise InputError(
                f"{index_path}: field weight_map.{name}: expected a file name, got "
                f"{type(filename).__name__}"
            )
    return weight_map


def _shard_path(root: Path, index_path: Path, filename: str) -> Path:
    """A shard named by the index, refused unless it is a plain name inside ``root``."""
    if (
        not filename
        or "/" in filename
        or "\\" in filename
        or filename in (".", "..")
        or "\x00" in filename
    ):
        raise InputError(
            f"{index_path}: field weight_map: shard {filename!r} is not a file name in the "
            "checkpoint folder (no separators, no '..')"
        )
    path = root / filename
    if path.is_symlink() and root.resolve() not in path.resolve().parents:
        raise InputError(
            f"{index_path}: field weight_map: shard {filename!r} is a symlink out of the "
            "checkpoint folder"
        )
    return path


SAFETENSORS_DTYPES: dict[torch.dtype, str] = {
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.float64: "F64",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}
"""Dtype codes of the safetensors header."""


def _write_safetensors(
    tensors: Mapping[str, torch.Tensor], path: Path, metadata: Mapping[str, str]
) -> None:
    """One safetensors file: an 8-byte little-endian header length, the JSON header (padded
    with spaces to 8 bytes), then each tensor's bytes, little-endian, in header order."""
    if sys.byteorder != "little":
        raise EngineError("writing safetensors needs a little-endian machine")
    header: dict[str, Any] = {"__metadata__": dict(metadata)}
    blobs: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        tensor = tensors[name].detach().to("cpu").contiguous()
        size = tensor.numel() * tensor.element_size()
        # ctypes, not numpy: the raw bytes of a contiguous CPU tensor.
        blobs.append(ctypes.string_at(tensor.data_ptr(), size) if size else b"")
        header[name] = {
            "dtype": SAFETENSORS_DTYPES[tensor.dtype],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(encoded)))
        handle.write(encoded)
        for blob in blobs:
            handle.write(blob)


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
