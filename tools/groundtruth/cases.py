"""Deterministic inputs for the curand and flashinfer ground-truth recordings.

The same builder runs on the GPU machine (to produce the recordings) and in the CPU tests (to
rebuild the inputs the recordings answer), so recordings store only outputs plus a SHA-256 of
the inputs; a drift in this file shows up as a digest mismatch, never as a silent comparison
of different inputs. It uses only ``random.Random(seed).getrandbits``, which is stable across
Python versions, and plain Python data (no torch), so it can be imported anywhere.

Probabilities are integer counts over ``SCALE = 2**16``: every prefix sum of a row is then
exact in float32, the condition under which the CPU samplers must match the GPU token for token.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

SCALE = 1 << 16
UINT64_MAX = (1 << 64) - 1

Case = dict[str, Any]


def int64_bits(x: int) -> int:
    """uint64 -> int64 bit pattern (what an int64 tensor stores)."""
    x &= UINT64_MAX
    return x - (1 << 64) if x >> 63 else x


class Rng:
    """A tiny deterministic generator on top of ``getrandbits`` (stable across versions)."""

    def __init__(self, seed: int):
        self._r = random.Random(seed)

    def bits(self, k: int) -> int:
        return self._r.getrandbits(k)

    def below(self, n: int) -> int:
        if n <= 1:
            return 0
        k = n.bit_length()
        while True:
            v = self._r.getrandbits(k)
            if v < n:
                return v

    def between(self, lo: int, hi: int) -> int:
        """Uniform integer in [lo, hi]."""
        return lo + self.below(hi - lo + 1)

    def pick(self, items: list[Any]) -> Any:
        return items[self.below(len(items))]

    def sample_positions(self, n: int, k: int) -> list[int]:
        """k distinct integers from range(n), in random order (partial Fisher-Yates)."""
        pool = list(range(n))
        for i in range(k):
            j = i + self.below(n - i)
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]


def _spread(weights: list[int], total: int) -> list[int]:
    """Integer counts proportional to ``weights`` that sum exactly to ``total``."""
    s = sum(weights)
    counts = [w * total // s for w in weights]
    short = total - sum(counts)
    for i in range(short):
        counts[i % len(counts)] += 1
    return counts


def make_row(
    rng: Rng, vocab: int, style: str, nnz: int | None = None, total: int = SCALE
) -> list[int]:
    """One row of integer counts (sum ``total``) in one of several shapes."""
    row = [0] * vocab
    if style == "zero":
        return row
    if style == "single":
        row[rng.below(vocab)] = total
        return row
    nnz = min(vocab, nnz if nnz is not None else rng.between(2, min(vocab, 200)))
    positions = rng.sample_positions(vocab, nnz)
    if style == "random":
        weights = [rng.between(1, 1000) for _ in positions]
    elif style == "flat":  # many equal values: ties at every pivot
        weights = [1] * nnz
    elif style == "geometric":
        weights = [max(1, int(1000 * 0.8**i)) for i in range(nnz)]
    elif style == "peaked":
        weights = [rng.between(1, 20) for _ in positions]
        weights[0] = 20 * nnz
    elif style == "steps":  # a few distinct levels
        levels = [rng.between(1, 50) for _ in range(4)]
        weights = [rng.pick(levels) for _ in positions]
    else:
        raise ValueError(style)
    for pos, c in zip(positions, _spread(weights, total), strict=True):
        row[pos] = c
    return row


STYLES = ["random", "flat", "geometric", "peaked", "steps"]


def _seed_value(rng: Rng) -> int:
    """A uint64 seed, often with the high bit set (a negative int64)."""
    return rng.pick(
        [0, 1, 42, 1 << 63, UINT64_MAX, rng.bits(64), rng.bits(64) | (1 << 63), rng.bits(32)]
    )


def _offset_value(rng: Rng) -> int:
    return rng.pick(
        [
            0, 1, 2, 3, 5, rng.bits(12), rng.bits(40), (1 << 34) - rng.between(1, 8),
            UINT64_MAX - rng.between(0, 7), (1 << 63) + rng.between(0, 7), rng.bits(64),
        ]
    )  # fmt: skip


def _tensor(dtype: str, shape: list[int], data: list[Any]) -> dict[str, Any]:
    return {"tensor": dtype, "shape": shape, "data": data}


def _probs(rows: list[list[int]]) -> dict[str, Any]:
    return {
        "tensor": "prob16",
        "shape": [len(rows), len(rows[0])],
        "data": [c for r in rows for c in r],
    }


def _rng_args(rng: Rng, batch: int, layout: str) -> dict[str, Any]:
    """seed/offset arguments in one of flashinfer's accepted forms."""
    if layout == "scalar":
        return {"seed": rng.bits(40), "offset": rng.bits(20)}
    if layout == "len1":
        return {
            "seed": _tensor("int64", [1], [int64_bits(_seed_value(rng))]),
            "offset": _tensor("int64", [1], [int64_bits(_offset_value(rng))]),
        }
    return {
        "seed": _tensor("int64", [batch], [int64_bits(_seed_value(rng)) for _ in range(batch)]),
        "offset": _tensor("int64", [batch], [int64_bits(_offset_value(rng)) for _ in range(batch)]),
    }


def _rows(
    rng: Rng, batch: int, vocab: int, styles: list[str], nnz_max: int = 200
) -> list[list[int]]:
    return [
        make_row(rng, vocab, rng.pick(styles), rng.between(2, min(vocab, nnz_max)))
        for _ in range(batch)
    ]


def flashinfer_cases() -> list[Case]:
    """Every flashinfer call of the recording, in order."""
    rng = Rng(20260401)
    cases: list[Case] = []

    def add(case_id: str, kernel: str, **args: Any) -> None:
        cases.append({"id": case_id, "kernel": kernel, "args": args})

    # sampling_from_probs: per-row / scalar / length-1 seeds, odd vocab, a big vocab, indices.
    add(
        "sfp_rows_257",
        "sampling_from_probs",
        probs=_probs(_rows(rng, 64, 257, STYLES)),
        return_valid=True,
        **_rng_args(rng, 64, "rows"),
    )
    add(
        "sfp_scalar_1024",
        "sampling_from_probs",
        probs=_probs(_rows(rng, 32, 1024, STYLES)),
        **_rng_args(rng, 32, "scalar"),
    )
    add(
        "sfp_len1_20000",
        "sampling_from_probs",
        probs=_probs(_rows(rng, 16, 20000, STYLES, 3000)),
        **_rng_args(rng, 16, "len1"),
    )
    edge_rows = [make_row(rng, 64, s) for s in ["zero", "single", "zero", "single"]] + _rows(
        rng, 4, 64, STYLES
    )
    add(
        "sfp_edge_rows",
        "sampling_from_probs",
        probs=_probs(edge_rows),
        return_valid=True,
        **_rng_args(rng, 8, "rows"),
    )
    same = make_row(rng, 512, "random", 300)
    add(
        "sfp_same_row_positions",
        "sampling_from_probs",
        probs=_probs([same] * 16),
        seed=_tensor("int64", [16], [7] * 16),
        offset=_tensor("int64", [16], [12] * 16),
    )
    add(
        "sfp_indices",
        "sampling_from_probs",
        probs=_probs(_rows(rng, 6, 300, STYLES)),
        indices=_tensor("int64", [24], [rng.below(6) for _ in range(24)]),
        **_rng_args(rng, 24, "rows"),
    )

    # top-k: per-row k (incl. k >= nnz, k = 1, huge k), scalar k, a split-row-sized vocab.
    def ks(batch: int, vocab: int) -> list[int]:
        return [rng.pick([1, 2, 3, 5, 8, 13, 20, 50, 100, vocab, 1 << 20]) for _ in range(batch)]

    add(
        "topk_rows_300",
        "top_k_sampling_from_probs",
        probs=_probs(_rows(rng, 64, 300, STYLES, 300)),
        top_k=_tensor("int32", [64], ks(64, 300)),
        return_valid=True,
        **_rng_args(rng, 64, "rows"),
    )
    add(
        "topk_scalar_1000",
        "top_k_sampling_from_probs",
        probs=_probs(_rows(rng, 32, 1000, STYLES, 600)),
        top_k=20,
        **_rng_args(rng, 32, "scalar"),
    )
    add(
        "topk_rows_16384",
        "top_k_sampling_from_probs",
        probs=_probs(_rows(rng, 8, 16384, STYLES, 4000)),
        top_k=_tensor("int32", [8], ks(8, 16384)),
        **_rng_args(rng, 8, "rows"),
    )
    add(
        "topk_indices",
        "top_k_sampling_from_probs",
        probs=_probs(_rows(rng, 5, 200, STYLES, 200)),
        top_k=_tensor("int64", [5], ks(5, 200)),
        indices=_tensor("int64", [20], [rng.below(5) for _ in range(20)]),
        **_rng_args(rng, 20, "rows"),
    )

    # top-p: float32-rounded thresholds, dyadic thresholds, p = 1.
    def ps(batch: int) -> list[float]:
        return [
            rng.pick([0.1, 0.25, 0.5, 0.7, 0.9, 0.95, 0.999, 1.0, rng.between(1, 99) / 100])
            for _ in range(batch)
        ]

    add(
        "topp_rows_300",
        "top_p_sampling_from_probs",
        probs=_probs(_rows(rng, 64, 300, STYLES, 300)),
        top_p=_tensor("float32", [64], ps(64)),
        return_valid=True,
        **_rng_args(rng, 64, "rows"),
    )
    add(
        "topp_scalar_1000",
        "top_p_sampling_from_probs",
        probs=_probs(_rows(rng, 32, 1000, STYLES, 600)),
        top_p=0.7,
        **_rng_args(rng, 32, "scalar"),
    )
    add(
        "topp_rows_16384",
        "top_p_sampling_from_probs",
        probs=_probs(_rows(rng, 8, 16384, STYLES, 4000)),
        top_p=_tensor("float32", [8], ps(8)),
        **_rng_args(rng, 8, "rows"),
    )

    # joint top-k/top-p and the top_k_first path (kept mass a power of two, so the GPU's
    # renormalisation is exact too).
    add(
        "topktopp_joint_300",
        "top_k_top_p_sampling_from_probs",
        probs=_probs(_rows(rng, 64, 300, STYLES, 300)),
        top_k=_tensor("int32", [64], ks(64, 300)),
        top_p=_tensor("float32", [64], ps(64)),
        filter_apply_order="joint",
        return_valid=True,
        **_rng_args(rng, 64, "rows"),
    )
    add(
        "topktopp_joint_16384",
        "top_k_top_p_sampling_from_probs",
        probs=_probs(_rows(rng, 8, 16384, STYLES, 4000)),
        top_k=_tensor("int32", [8], ks(8, 16384)),
        top_p=_tensor("float32", [8], ps(8)),
        filter_apply_order="joint",
        **_rng_args(rng, 8, "rows"),
    )
    add(
        "topktopp_joint_scalar",
        "top_k_top_p_sampling_from_probs",
        probs=_probs(_rows(rng, 32, 500, STYLES, 400)),
        top_k=10,
        top_p=0.8,
        filter_apply_order="joint",
        **_rng_args(rng, 32, "scalar"),
    )
    kf_rows, kf_k = [], []
    for _ in range(32):
        k = rng.between(2, 12)
        kept = make_row(rng, k, "random", k, total=SCALE // 2)
        smallest = min(kept)
        # The other half of the mass sits on tokens strictly smaller than every kept one.
        rest_n = (SCALE // 2) // max(1, smallest - 1) + 2 if smallest > 1 else 0
        if smallest <= 1 or rest_n + k > 256:
            kept = [SCALE // (2 * k)] * k
            kept[0] += SCALE // 2 - sum(kept)
            smallest = min(kept)
            rest_n = (SCALE // 2) // (smallest - 1) + 2
        rest = _spread([1] * rest_n, SCALE // 2)
        row = [0] * 256
        positions = rng.sample_positions(256, k + rest_n)
        for pos, c in zip(positions, kept + rest, strict=True):
            row[pos] = c
        kf_rows.append(row)
        kf_k.append(k)
    add(
        "topktopp_kfirst_256",
        "top_k_top_p_sampling_from_probs",
        probs=_probs(kf_rows),
        top_k=_tensor("int32", [32], kf_k),
        top_p=_tensor("float32", [32], ps(32)),
        filter_apply_order="top_k_first",
        **_rng_args(rng, 32, "rows"),
    )

    # min-p
    mps = [rng.pick([0.0, 0.05, 0.1, 0.2, 0.5, 0.9, 1.0, 0.3]) for _ in range(64)]
    add(
        "minp_rows_300",
        "min_p_sampling_from_probs",
        probs=_probs(_rows(rng, 64, 300, STYLES, 300)),
        min_p=_tensor("float32", [64], mps),
        return_valid=True,
        **_rng_args(rng, 64, "rows"),
    )
    add(
        "minp_scalar_2000",
        "min_p_sampling_from_probs",
        probs=_probs(_rows(rng, 32, 2000, STYLES, 600)),
        min_p=0.25,
        **_rng_args(rng, 32, "scalar"),
    )

    # chain speculative sampling: several K, acceptance regimes mixed within a batch.
    for num_drafts, batch, vocab, layout in [
        (4, 64, 128, "rows"),
        (1, 32, 2000, "rows"),
        (3, 32, 300, "len1"),
        (6, 32, 64, "scalar"),
        (0, 8, 100, "rows"),
    ]:
        draft, target, ids = [], [], []
        for _ in range(batch):
            regime = rng.pick(["same", "close", "independent", "zero_at_draft"])
            d_rows, t_rows, row_ids = [], [], []
            for i in range(num_drafts + 1):
                d = make_row(rng, vocab, rng.pick(STYLES), rng.between(2, min(vocab, 60)))
                if regime == "same":
                    t = list(d)
                elif regime == "close":
                    t = _spread([c * 4 + rng.between(0, 3) for c in d], SCALE)
                else:
                    t = make_row(rng, vocab, rng.pick(STYLES), rng.between(2, min(vocab, 60)))
                if i < num_drafts:
                    nz = [j for j, c in enumerate(d) if c > 0]
                    tok = rng.pick(nz)
                    if regime == "zero_at_draft" and t[tok] > 0 and rng.below(2):
                        moved = t[tok]
                        t[tok] = 0
                        t[(tok + 1) % vocab] += moved
                    d_rows.append(d)
                    row_ids.append(tok)
                t_rows.append(t)
            draft.append(d_rows)
            target.append(t_rows)
            ids.append(row_ids)
        add(
            f"chain_k{num_drafts}_v{vocab}",
            "chain_speculative_sampling",
            draft_probs={
                "tensor": "prob16",
                "shape": [batch, num_drafts, vocab],
                "data": [c for b in draft for r in b for c in r],
            },
            draft_token_ids=_tensor("int32", [batch, num_drafts], [t for r in ids for t in r]),
            target_probs={
                "tensor": "prob16",
                "shape": [batch, num_drafts + 1, vocab],
                "data": [c for b in target for r in b for c in r],
            },
            **_rng_args(rng, batch, layout),
        )
    return cases


def curand_cases() -> list[dict[str, int]]:
    """(seed, subsequence, offset, n, skip, skip_times) states for the curand oracle.

    ``skip``/``skip_times``: after ``curand_init`` the oracle calls ``skipahead(skip)`` that
    many times, reaching counters ``curand_init`` alone cannot (low 64 bits carrying over).
    """
    rng = Rng(20260402)
    states: list[dict[str, int]] = []

    def add(seed: int, subseq: int, offset: int, n: int = 9, skip: int = 0, times: int = 0) -> None:
        states.append(
            {
                "seed": seed & UINT64_MAX,
                "subsequence": subseq & UINT64_MAX,
                "offset": offset & UINT64_MAX,
                "n": n,
                "skip": skip & UINT64_MAX,
                "skip_times": times,
            }
        )

    edge_seeds = [
        0,
        1,
        42,
        0xFFFFFFFF,
        1 << 32,
        (1 << 63) - 1,
        1 << 63,
        UINT64_MAX,
        0xDEADBEEFCAFEF00D,
    ]
    edge_subseqs = [0, 1, 3, 0xFFFFFFFF, 1 << 32, (1 << 63), UINT64_MAX - 1, UINT64_MAX]
    edge_offsets = [
        0,
        1,
        2,
        3,
        4,
        7,
        (1 << 34) - 5,
        (1 << 34) - 1,
        1 << 34,
        (1 << 62),
        UINT64_MAX - 8,
        UINT64_MAX - 3,
        UINT64_MAX - 1,
        UINT64_MAX,
    ]
    for s in edge_seeds:
        for q in edge_subseqs[:4]:
            add(s, q, rng.pick(edge_offsets))
    for q in edge_subseqs:
        for o in edge_offsets:
            add(rng.pick(edge_seeds), q, o)
    # Negative int64 seeds written as such: the oracle receives their uint64 bits.
    for v in [-1, -2, -42, -(1 << 63), -(1 << 32)]:
        add(v, rng.bits(8), rng.bits(10))
    for _ in range(160):
        add(
            rng.bits(64),
            rng.pick([rng.bits(3), rng.bits(32), rng.bits(64)]),
            rng.pick([rng.bits(4), rng.bits(20), rng.bits(64)]),
            n=rng.between(1, 16),
        )
    # Long skips: low 64 bits of the counter near 2**64, then carrying into the high half.
    big = UINT64_MAX - 3  # skipahead(big) advances (2**62 - 1) blocks
    for times, extra in [(4, 0), (4, 3), (4, 12), (4, 13), (5, 0), (8, 6)]:
        add(
            rng.bits(64),
            rng.pick([0, 5, UINT64_MAX]),
            (1 << 63) + extra,
            n=12,
            skip=big,
            times=times,
        )
    return states


def digest(obj: Any) -> str:
    """SHA-256 of the canonical JSON form of ``obj``."""
    return hashlib.sha256(
        json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
