"""Near-tie triage: at a greedy divergence, was it a near-tie the engine's numerics can flip?

Greedy decoding emits the argmax. Two computations of the same logits that differ only by
rounding (one row against K + 1 rows of a verify step, another reduction order, bfloat16)
can disagree on the argmax only where the two best tokens nearly tie. So at a greedy
divergence whose logits may differ, the margin between the two tokens the sides emitted is
measured and held to a stated envelope:

    margin = |logit(a) - logit(b)|  <=  envelope = 2 (u + e) max|logit|

where ``u`` is the unit roundoff of the engine's logits dtype (the trace's ``logits_dtype``;
bfloat16, 2^-8, when it states none; float16 2^-11; float32 2^-24), ``e`` the oracle's own
stated error (2^-14 on CUDA, 0 on the CPU), and ``max|logit|`` the row's largest |logit|:
rounding moves each logit by at most ``(u + e) max|logit|``, so the two can swap only inside
twice that. It is the envelope the distribution check allows per logit. Inside it, the
divergence is reported as "numerics: near-tie, margin m" and blames no defect class; outside
it, the numerics cannot explain the flip and the defect rules stand.

The logits come from the engine's own log-probabilities where the trace carries them for both
tokens (the hook ``engine_margin``: log-probability differences are logit differences), else
from the probability oracle (the target recomputed teacher-forced on the common prefix,
``distribution/oracle.py``), else the margin is not measured and nothing changes. A divergence
with identical logits on both sides (the same fingerprint) is never a near-tie: the same
logits have one argmax.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specseed.checks.findings import NEAR_TIE, Margin, TokenDiff
from specseed.distribution.evidence import UNIT_ROUNDOFF
from specseed.traces.records import RunTrace

ASSUMED_DTYPE = "bfloat16"
"""An engine that states no logits dtype is held to the coarsest common one."""
MEASURED_ATTRIBUTIONS = frozenset(
    {"logits", "rng-state-and-logits", "logits-unobserved", "tokens-only"}
)
"""Divergences whose logits may differ between the sides (with the same logits, the same
argmax: a greedy divergence there is the engine's logic, never a near-tie)."""


def _dtype(left: RunTrace, right: RunTrace) -> str:
    """The coarser of the two sides' stated logits dtypes."""
    stated = [t.header.environment.get("logits_dtype") or ASSUMED_DTYPE for t in (left, right)]
    return max(stated, key=lambda d: UNIT_ROUNDOFF.get(d, UNIT_ROUNDOFF[ASSUMED_DTYPE]))


def engine_margin(trace: RunTrace, request: str, position: int, a: int, b: int) -> float | None:
    """The margin from the engine's own log-probabilities at ``position``, where its trace
    recorded both tokens among the top candidates there (traces that carry per-token
    ``logprobs`` in their end record, schema 1.3); None otherwise."""
    recorded: Any = getattr(trace.end, "logprobs", None) or {}
    entries = recorded.get(request) if isinstance(recorded, dict) else None
    if not entries or position >= len(entries):
        return None
    top = dict(getattr(entries[position], "top", ()) or ())
    if a in top and b in top:
        return abs(float(top[a]) - float(top[b]))
    return None


def measure(diff: TokenDiff, left: RunTrace, right: RunTrace) -> Margin | None:
    """The margin at a greedy divergence, or None where it is not measured."""
    info = left.request(diff.request)
    if info.temperature != 0.0 or diff.attribution not in MEASURED_ATTRIBUTIONS:
        return None
    ours = left.end.outputs.get(diff.request, ())
    theirs = right.end.outputs.get(diff.right_request or diff.request, ())
    p = diff.position
    if p >= len(ours) or p >= len(theirs) or tuple(ours[:p]) != tuple(theirs[:p]):
        return None
    a, b = ours[p], theirs[p]
    dtype = _dtype(left, right)
    try:  # the oracle's logits: torch and the model, loaded only at a greedy divergence
        from specseed.distribution.oracle import OracleUnavailable, oracle_for
    except ImportError:
        return None
    try:
        oracle = oracle_for(left.header.engine_config)
        [row_logits] = oracle.logits([(tuple(info.prompt_ids), (*ours[:p], a))])
    except (OracleUnavailable, ValueError, RuntimeError):
        return None
    row = row_logits[p]
    scale = float(row.abs().max())
    unit = UNIT_ROUNDOFF.get(dtype, UNIT_ROUNDOFF[ASSUMED_DTYPE])
    error = float(getattr(oracle, "logits_error", 0.0))
    envelope = 2.0 * (unit + error) * scale
    from_engine = engine_margin(left, diff.request, p, a, b)
    if from_engine is not None:
        return Margin((a, b), from_engine, scale, envelope, dtype, "engine logprobs")
    margin = abs(float(row[a]) - float(row[b]))
    return Margin((a, b), margin, scale, envelope, dtype, "oracle")


__all__ = ["NEAR_TIE", "engine_margin", "measure", "near_tie_text"]


def near_tie_text(margins: Sequence[Margin]) -> str:
    """What a finding whose divergences are all near-ties says."""
    widest = max(margins, key=lambda m: m.margin)
    return widest.text()
