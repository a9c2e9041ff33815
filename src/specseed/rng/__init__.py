"""Philox streams with curand semantics: the ground layer of every RNG statement specseed makes.

``philox_words`` / ``philox_uniforms`` reproduce ``curand`` / ``curand_uniform`` after
``curand_init(seed, subsequence, offset)`` bit for bit, vectorised over many states.
"""

from __future__ import annotations

from specseed.rng.draws import Draw, parse_stream_value, stream_draws
from specseed.rng.philox import (
    PHILOX_M0,
    PHILOX_M1,
    PHILOX_W0,
    PHILOX_W1,
    UINT64_MAX,
    StreamParam,
    as_int64_bits,
    as_uint64,
    curand_uniform,
    philox4x32_10,
    philox_uniforms,
    philox_words,
    words_at_position,
)

__all__ = [
    "PHILOX_M0",
    "PHILOX_M1",
    "PHILOX_W0",
    "PHILOX_W1",
    "UINT64_MAX",
    "Draw",
    "StreamParam",
    "as_int64_bits",
    "as_uint64",
    "curand_uniform",
    "parse_stream_value",
    "philox4x32_10",
    "philox_uniforms",
    "philox_words",
    "stream_draws",
    "words_at_position",
]
