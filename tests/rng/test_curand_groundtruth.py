"""specseed's Philox against curand itself, recorded on an NVIDIA H200.

tests/data/groundtruth/curand_philox.json holds what ``curand()`` and ``curand_uniform()``
returned after ``curand_init(seed, subsequence, offset)`` (plus ``skipahead`` calls for the
states whose counter carries out of its low 64 bits), for the states that
tools/groundtruth/cases.py builds; tools/groundtruth/curand_oracle.cu and record_curand.py
produced it.
"""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path
from types import ModuleType

import pytest
import torch

from specseed.rng import curand_uniform, philox_uniforms, philox_words, words_at_position

ROOT = Path(__file__).resolve().parents[2]
RECORDING = ROOT / "tests" / "data" / "groundtruth" / "curand_philox.json"


def _load_cases() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "groundtruth_cases", ROOT / "tools" / "groundtruth" / "cases.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def recorded() -> tuple[list[dict[str, int]], list[dict[str, list[str]]]]:
    cases = _load_cases()
    states = cases.curand_cases()
    record = json.loads(RECORDING.read_text())
    assert record["cases_digest"] == cases.digest(states), (
        "cases.py no longer builds the recorded states"
    )
    assert len(record["results"]) == len(states)
    return states, record["results"]


def _bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def test_every_recorded_state_matches_curand(recorded) -> None:
    states, results = recorded
    mismatches = []
    for state, result in zip(states, results, strict=True):
        expected_words = [int(w, 16) for w in result["words"]]
        expected_uniforms = [int(u, 16) for u in result["uniform_bits"]]
        position = (
            (state["subsequence"] << 66) + state["offset"] + state["skip"] * state["skip_times"]
        )
        words = words_at_position(state["seed"], position, state["n"])
        uniforms = [_bits(u) for u in curand_uniform(words).tolist()]
        if words.tolist() != expected_words or uniforms != expected_uniforms:
            mismatches.append(state)
    assert not mismatches, f"{len(mismatches)} of {len(states)} states differ: {mismatches[:3]}"


def test_curand_init_states_match_one_call_per_state(recorded) -> None:
    """Small calls take the Python-integer path of philox_words."""
    states, results = recorded
    for state, result in zip(states, results, strict=True):
        if state["skip_times"] == 0:
            words = philox_words(state["seed"], state["subsequence"], state["offset"], state["n"])
            assert words.tolist() == [int(w, 16) for w in result["words"]], state


def test_curand_init_states_match_through_the_public_api(recorded) -> None:
    """The same states through philox_words / philox_uniforms, batched as one tensor call."""
    states, results = recorded
    plain = [(s, r) for s, r in zip(states, results, strict=True) if s["skip_times"] == 0]
    for n in sorted({s["n"] for s, _ in plain}):
        group = [(s, r) for s, r in plain if s["n"] == n]
        seed, subsequence, offset = (
            torch.tensor([s[name] - (s[name] >> 63 << 64) for s, _ in group], dtype=torch.int64)
            for name in ("seed", "subsequence", "offset")
        )
        words = philox_words(seed, subsequence, offset, n)
        uniforms = philox_uniforms(seed, subsequence, offset, n)
        assert words.tolist() == [[int(w, 16) for w in r["words"]] for _, r in group]
        assert [[_bits(u) for u in row] for row in uniforms.tolist()] == [
            [int(u, 16) for u in r["uniform_bits"]] for _, r in group
        ]


def test_recording_covers_the_edge_cases(recorded) -> None:
    states, _ = recorded
    assert any(s["seed"] >> 63 for s in states)  # high bit set = negative int64 seeds
    assert any(s["subsequence"] == (1 << 64) - 1 for s in states)
    assert any(s["offset"] >= (1 << 64) - 4 for s in states)
    assert any(s["offset"] % 4 != 0 for s in states)
    assert any(s["skip_times"] * s["skip"] // 4 + s["offset"] // 4 >= 1 << 64 for s in states)
