"""How a seed is written for people: one rule in every table, message and diff.

Decimal below 2^32, where seeds are the small numbers users type; hex from 2^32 up, where
seeds are bit patterns (an engine's unseeded stream such as 2^62 + k) that read better and
fit columns as hex. ``specseed rng draws --seed`` accepts both forms.
"""

from __future__ import annotations

HEX_FROM = 1 << 32


def fmt_seed(value: int) -> str:
    """``42`` or ``0x4000000000000000``: decimal below 2^32, hex above."""
    return str(value) if 0 <= value < HEX_FROM else f"{value:#x}" if value >= 0 else str(value)


def fmt_request_seed(value: int | None) -> str:
    """A request's seed as ``fmt_seed`` writes it; ``None`` (no seed: the engine gives the
    request a unique one) is ``unique``."""
    return "unique" if value is None else fmt_seed(value)
