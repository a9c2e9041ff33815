"""Short, stable fingerprints of logits rows, recorded in traces to compare numerics."""

from __future__ import annotations

import ctypes
import hashlib
import sys

import torch


def fingerprint(logits_row: torch.Tensor) -> str:
    """16 hex digits of BLAKE2b over the row's float32 bytes (little-endian).

    Two rows get the same fingerprint exactly when their bits are equal (up to hash
    collisions), so ``+0.0`` and ``-0.0`` differ and so do two NaN payloads.
    """
    if logits_row.dim() != 1:
        raise ValueError(f"fingerprint takes one row, got shape {tuple(logits_row.shape)}")
    return fingerprints(logits_row.unsqueeze(0))[0]


def fingerprints(logits_rows: torch.Tensor) -> list[str]:
    """:func:`fingerprint` of each row of ``[n, vocab]`` logits, read in one copy."""
    if logits_rows.dim() != 2:
        raise ValueError(f"fingerprints take rows, got shape {tuple(logits_rows.shape)}")
    rows = logits_rows.detach().to(device="cpu", dtype=torch.float32).contiguous()
    if sys.byteorder == "big":
        # Fix the byte order so a fingerprint means the same on every host.
        rows = rows.view(torch.uint8).view(rows.shape[0], -1, 4).flip(-1).contiguous()
    count = rows.shape[0]
    size = rows.numel() * rows.element_size()
    # Read the bytes directly: numpy is not a dependency, and tolist() is 3x slower.
    data = ctypes.string_at(rows.data_ptr(), size) if size else b""
    width = size // count if count else 0
    return [
        hashlib.blake2b(data[i * width : (i + 1) * width], digest_size=8).hexdigest()
        for i in range(count)
    ]
