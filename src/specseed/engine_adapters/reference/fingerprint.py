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
    row = logits_row.detach().to(device="cpu", dtype=torch.float32).contiguous()
    if sys.byteorder == "big":
        # Fix the byte order so a fingerprint means the same on every host.
        row = row.view(torch.uint8).view(-1, 4).flip(-1).contiguous()
    # Read the bytes directly: numpy is not a dependency, and tolist() is 3x slower.
    data = ctypes.string_at(row.data_ptr(), row.numel() * row.element_size())
    return hashlib.blake2b(data, digest_size=8).hexdigest()
