"""What a search explored, dimension by dimension: the coverage table at its end.

Each judged case adds one count to one bin of every dimension it touches (requests per
batch, the mix of request kinds, seed classes, prompt lengths, slots reused, warmup above
max_num_requests, draft lengths, the runs beside ``base``, every sampling field set). Bins are
plain strings, so coverage adds up across worker processes and reads the same in JSON.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from specseed.scenarios.schema import UINT64_MAX

LOW_32 = (1 << 32) - 1

DIMENSIONS: tuple[tuple[str, str], ...] = (
    ("requests", "requests per batch"),
    ("mix", "request kinds in a batch"),
    ("seeds", "seeds"),
    ("prompt", "prompt length (tokens)"),
    ("tokens", "max_tokens"),
    ("slots", "max_num_requests"),
    ("arrivals", "arrivals"),
    ("warmup", "warmup, prior traffic"),
    ("drafts", "draft length K"),
    ("runs", "runs beside base"),
    ("knobs", "sampling fields set"),
    ("statistical", "statistical cases"),
)
"""Every dimension, with the label the table prints."""


def seed_class(seed: int) -> str:
    """The edge a seed sits at, or its size."""
    bits = seed & UINT64_MAX
    named = {
        0: "0",
        2**31: "2^31",
        2**32 - 1: "2^32-1",
        2**32: "2^32",
        2**32 + 1: "2^32+1",
        2**63: "2^63 (int64 min)",
        UINT64_MAX: "uint64 max (-1)",
    }
    if bits in named:
        return named[bits]
    if seed < 0:
        return "negative"
    return "< 2^32" if bits <= LOW_32 else ">= 2^32"


def prompt_bin(length: int, longest: int) -> str:
    """The prompt-length bin of ``length`` tokens, ``longest`` the longest allowed."""
    if length == 1:
        return "1"
    if length >= 0.9 * longest:
        return "near the context length"
    for top in (8, 64, 128):
        if length <= top:
            return f"<= {top}"
    return "> 128"


def tokens_bin(count: int) -> str:
    """The max_tokens bin of ``count``."""
    for low, high in ((1, 1), (2, 4), (5, 8), (9, 16)):
        if count <= high:
            return str(low) if low == high else f"{low}-{high}"
    return "> 16"


@dataclass
class Coverage:
    """Counts per dimension and bin."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, dimension: str, bin_: str, count: int = 1) -> None:
        self.counts.setdefault(dimension, Counter())[bin_] += count

    def merge(self, other: Coverage) -> None:
        for dimension, bins in other.counts.items():
            self.counts.setdefault(dimension, Counter()).update(bins)

    def to_json(self) -> dict[str, dict[str, int]]:
        return {d: dict(sorted(b.items())) for d, b in sorted(self.counts.items())}

    def rows(self) -> list[tuple[str, list[tuple[str, int]]]]:
        """(label, bins most frequent first) per dimension, in table order."""
        out = []
        for key, label in DIMENSIONS:
            bins = self.counts.get(key)
            if bins:
                out.append((label, bins.most_common()))
        return out


def _kind(request: Mapping[str, Any]) -> str:
    if request.get("temperature") == 0.0:
        return "greedy"
    return "seeded" if request.get("seed") is not None else "unseeded"


def _prompt_length(prompt: list[int] | str) -> int:
    return len(prompt.encode()) if isinstance(prompt, str) else len(prompt)


def _slots_reused(scenario: Mapping[str, Any], run: Mapping[str, Any], default: int) -> bool:
    slots = (run.get("engine") or {}).get("max_num_requests", default)
    return len(run["requests"]) > slots


def case_coverage(
    scenario: Mapping[str, Any],
    *,
    longest_prompt: int,
    max_num_requests: int,
    max_draft_len: int,
    sampling_fields: Iterable[str] = (),
) -> Coverage:
    """One judged case's counts."""
    cov = Coverage()
    requests: Mapping[str, Mapping[str, Any]] = scenario["requests"]
    runs: list[Mapping[str, Any]] = scenario["runs"]
    base = runs[0]
    if "distribution" in scenario:
        cov.add("statistical", "distribution" if len(runs) == 1 else "distribution+lossless")
    cov.add("requests", str(len(requests)))
    kinds = sorted({_kind(r) for r in requests.values()})
    cov.add("mix", "+".join(kinds))
    seeds = [r["seed"] for r in requests.values() if isinstance(r.get("seed"), int)]
    for seed in seeds:
        cov.add("seeds", seed_class(seed))
    lows = [s & LOW_32 for s in seeds]
    if len(set(lows)) < len(set(s & UINT64_MAX for s in seeds)):
        cov.add("seeds", "pair differing in high bits only")
    for request in requests.values():
        cov.add("prompt", prompt_bin(_prompt_length(request["prompt"]), longest_prompt))
        cov.add("tokens", tokens_bin(request.get("max_tokens", 16)))
        for name in sampling_fields:
            if request.get(name) is not None and name not in ("prompt", "seed", "max_tokens"):
                cov.add("knobs", name)
    engine = base.get("engine") or {}
    slots = engine.get("max_num_requests", max_num_requests)
    reused = _slots_reused(scenario, base, max_num_requests)
    cov.add("slots", f"{slots}, slots reused" if reused else str(slots))
    cov.add("arrivals", "staggered" if base.get("arrivals") else "all at step 0")
    cov.add("drafts", f"K={engine.get('max_draft_len', max_draft_len)}")
    if engine.get("verification") == "strict":
        cov.add("drafts", "strict verification")
    for run in runs[1:]:
        cov.add("runs", run["name"])
        for size in run.get("warmup") or ():
            above = isinstance(size, str) and size != "max"
            cov.add("warmup", "warmup above max" if above else "warmup within max")
        if run.get("prior_traffic"):
            cov.add("warmup", "prior traffic")
    if len(runs) == 1:
        cov.add("runs", "base only")
    return cov


__all__ = ["DIMENSIONS", "Coverage", "case_coverage", "prompt_bin", "seed_class"]
