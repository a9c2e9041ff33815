"""Turn the plain-data arguments of ``cases.py`` into torch tensors, on any device.

Shared by the recording script on the GPU machine and the CPU tests, so both sides feed the
kernels the same bits.
"""

from __future__ import annotations

from typing import Any

import torch

_DTYPES = {"int64": torch.int64, "int32": torch.int32, "float32": torch.float32}


def materialize(value: Any, device: str = "cpu") -> Any:
    """A tensor for ``{"tensor": dtype, "shape": [...], "data": [...]}``, else ``value``."""
    if not (isinstance(value, dict) and "tensor" in value):
        return value
    kind, shape = value["tensor"], value["shape"]
    if kind == "prob16":
        # Integer counts over 2**16: exact in float32 and exactly scaled by a power of two.
        counts = torch.tensor(value["data"], dtype=torch.int64).reshape(shape)
        return (counts.to(torch.float32) * (1.0 / 65536)).to(device)
    return torch.tensor(value["data"], dtype=_DTYPES[kind]).reshape(shape).to(device)


def materialize_args(args: dict[str, Any], device: str = "cpu") -> dict[str, Any]:
    return {name: materialize(v, device) for name, v in args.items()}


def flatten_outputs(result: Any) -> list[list[Any]]:
    """A kernel's return value (tensor or tuple of tensors) as nested Python lists."""
    parts = result if isinstance(result, tuple) else (result,)
    return [p.detach().cpu().reshape(-1).tolist() for p in parts]
