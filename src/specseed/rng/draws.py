"""A human-readable listing of one Philox stream: what ``specseed rng draws`` prints.

It answers questions such as "what did row 3 draw at offset 12?": each entry names the draw's
curand offset, the 128-bit block counter and lane it came from, the raw word and the
``curand_uniform`` value.
"""

from __future__ import annotations

from dataclasses import dataclass

from specseed.core.errors import InputError
from specseed.rng.philox import UINT64_MAX, as_uint64, curand_uniform, philox_words

__all__ = ["Draw", "parse_stream_value", "stream_draws"]


@dataclass(frozen=True)
class Draw:
    """One 32-bit draw of a ``curand_init(seed, subsequence, offset)`` stream."""

    index: int
    """Position in the listing: 0 is the first draw after ``curand_init``."""
    offset: int
    """The curand offset that starts a stream at exactly this draw (``offset + index``)."""
    counter: int
    """The 128-bit Philox block counter the word comes from."""
    lane: int
    """Which of the block's four output words (0..3) this draw is."""
    word: int
    """What ``curand()`` returns: a uint32."""
    uniform: float
    """What ``curand_uniform()`` returns for that word: a float32 in (0, 1], as a Python float."""


def stream_draws(seed: int, subsequence: int, offset: int, n: int) -> list[Draw]:
    """The first ``n`` draws of the stream, with their counters and lanes.

    ``seed`` may be given as uint64 or as int64 bits (negative); ``subsequence`` and
    ``offset`` are uint64 values. Raises ``ValueError`` for values out of range.
    """
    seed_u = as_uint64(seed)
    for name, value in (("subsequence", subsequence), ("offset", offset)):
        if not 0 <= value <= UINT64_MAX:
            raise ValueError(f"{name} must be in 0 .. 2**64-1, got {value}")
    if n < 0:
        raise ValueError("n must be >= 0")
    words = philox_words(seed_u, subsequence, offset, n)
    uniforms = curand_uniform(words)
    draws = []
    for j in range(n):
        position = (subsequence << 66) + offset + j
        draws.append(
            Draw(
                index=j,
                offset=offset + j,
                counter=(position >> 2) % (1 << 128),
                lane=position & 3,
                word=int(words[j]),
                uniform=float(uniforms[j]),
            )
        )
    return draws


def parse_stream_value(text: str, name: str, *, allow_int64: bool = False) -> int:
    """Parse a uint64 stream parameter written in decimal or 0x-hex; return it as uint64.

    ``allow_int64`` also accepts negative int64 values (seeds), returned as their uint64
    reinterpretation. Raises ``InputError`` with a one-line message otherwise.
    """
    try:
        value = int(text.strip(), 0)
    except ValueError:
        raise InputError(f"{name} must be an integer (decimal or 0x-hex), got {text!r}") from None
    low = -(1 << 63) if allow_int64 else 0
    if not low <= value <= UINT64_MAX:
        allowed = "-2**63 .. 2**64-1" if allow_int64 else "0 .. 2**64-1"
        raise InputError(f"{name} must be in {allowed}, got {value}")
    return as_uint64(value)
