"""Seeded weights that are bit-identical on every machine and torch version.

``torch.randn`` with a seeded ``torch.Generator`` is not good enough here: its CPU normal
sampler has a vectorised (AVX2) and a scalar path that differ in the last bits, and the
algorithm is not part of torch's stable API, so a random model would change between machines
and releases and every recorded fingerprint with it. Instead each tensor's bits come from
SHAKE-256 (a standard extendable-output hash) of ``(seed, tensor name)``: 24 bits per value,
mapped to a uniform distribution with IEEE-exact float64 arithmetic and one correctly rounded
cast to float32. No transcendental function, thread count or global RNG state is involved.
"""

from __future__ import annotations

import hashlib
import math

import torch

_DOMAIN = "specseed/reference-weights/v1"
_SQRT3 = math.sqrt(3.0)


def uniform(seed: int, name: str, shape: tuple[int, ...], *, std: float) -> torch.Tensor:
    """A float32 tensor of i.i.d. uniform values with mean 0 and standard deviation ``std``.

    The values depend only on ``seed``, ``name`` and ``shape``; distinct names give
    independent streams, so adding a tensor never changes another one.
    """
    count = math.prod(shape)
    raw = hashlib.shake_256(f"{_DOMAIN}/{seed}/{name}".encode()).digest(3 * count)
    # Assemble 24-bit integers byte by byte so the result does not depend on endianness.
    octets = torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(torch.int64).view(count, 3)
    words = octets[:, 0] | (octets[:, 1] << 8) | (octets[:, 2] << 16)
    # (2k + 1) / 2^25 is exact in float64 and lies strictly inside (0, 1).
    unit = (2 * words + 1).to(torch.float64) * 2.0**-25
    values = (2.0 * unit - 1.0) * (_SQRT3 * std)
    return values.to(torch.float32).view(shape)


def perturbed_ones(seed: int, name: str, size: int, *, spread: float) -> torch.Tensor:
    """A norm weight near 1: ``1 + uniform(std=spread)``."""
    return 1.0 + uniform(seed, name, (size,), std=spread)
