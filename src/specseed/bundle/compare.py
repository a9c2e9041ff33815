"""Comparing two recordings of the same scenarios: request by request, tokens and RNG state.

Used by ``specseed diff A B`` (two bundles: two engine versions, two machines) and by
``specseed replay`` (a bundle against a fresh run). Pure: reads traces, runs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from specseed.checks.findings import EventState
from specseed.checks.trace_evidence import event_state, first_divergence
from specseed.traces.records import RunTrace

RequestStatus = Literal["equal", "diverged", "rng-differs", "reports-differ", "missing"]
RNG_CONTEXT = 6
"""Event pairs shown side by side from the first RNG difference on."""
TOKEN_CONTEXT = 4


@dataclass(frozen=True)
class RequestComparison:
    """One scenario request of one run, compared between two recordings."""

    scenario: str
    run: str
    request: str
    status: RequestStatus
    """``equal``: same tokens and RNG states; ``diverged``: tokens differ from ``position``;
    ``rng-differs``: same tokens, different RNG states; ``reports-differ``: same tokens and
    states, another finish reason or log-probability (``position``; ``report`` says which);
    ``missing``: on one side only."""
    position: int | None = None
    """First differing token (``diverged``)."""
    missing_from: str = ""
    """``left`` or ``right`` (``missing``): where the request or its run is absent."""
    window_start: int = 0
    left_tokens: tuple[int, ...] = ()
    right_tokens: tuple[int, ...] = ()
    """Tokens around the first difference (all of them when equal and short)."""
    rng: tuple[tuple[EventState | None, EventState | None], ...] = ()
    """The request's sampling events side by side, from the first pair whose (seed,
    subsequence, offset, draws) differ; empty when every pair agrees."""
    rng_index: int = 0
    """Index of ``rng[0]`` among the request's events."""
    report: str = ""
    """What differs in the engine's reports (``reports-differ``)."""

    @property
    def differs(self) -> bool:
        return self.status != "equal"


@dataclass(frozen=True)
class RecordingDiff:
    """Every request of every run, compared."""

    left: str
    right: str
    """Labels of the two recordings (bundle paths)."""
    requests: tuple[RequestComparison, ...]

    @property
    def differs(self) -> bool:
        return any(r.differs for r in self.requests)

    def counts(self) -> dict[str, int]:
        out = {"equal": 0, "diverged": 0, "rng-differs": 0, "reports-differ": 0, "missing": 0}
        for r in self.requests:
            out[r.status] += 1
        return out


def _events(trace: RunTrace, request: str) -> list[EventState]:
    return [
        event_state(e, step.step, row.decoding_iter)
        for step, row in trace.rows_of(request)
        if not row.discarded
        for e in row.events
    ]


def _state(event: EventState | None) -> tuple[object, ...] | None:
    if event is None:
        return None
    return (event.kind, event.index, event.seed, event.subsequence, event.offset, event.draws)


def _rng_pairs(
    left: list[EventState], right: list[EventState]
) -> tuple[int, tuple[tuple[EventState | None, EventState | None], ...]]:
    length = max(len(left), len(right))
    pairs = [
        (left[i] if i < len(left) else None, right[i] if i < len(right) else None)
        for i in range(length)
    ]
    first = next((i for i, (a, b) in enumerate(pairs) if _state(a) != _state(b)), None)
    if first is None:
        return 0, ()
    return first, tuple(pairs[first : first + RNG_CONTEXT])


def compare_runs(
    scenario: str, run: str, left: RunTrace, right: RunTrace
) -> list[RequestComparison]:
    out = []
    names = list(left.end.outputs) + [r for r in right.end.outputs if r not in left.end.outputs]
    for request in names:
        if request not in left.end.outputs or request not in right.end.outputs:
            side = "left" if request not in left.end.outputs else "right"
            out.append(RequestComparison(scenario, run, request, "missing", missing_from=side))
            continue
        a, b = left.end.outputs[request], right.end.outputs[request]
        rng_index, rng = _rng_pairs(_events(left, request), _events(right, request))
        position = first_divergence(a, b)
        report = ""
        if position is None:
            status: RequestStatus = "rng-differs" if rng else "equal"
            start = 0
            if status == "equal":
                position, report = _report_difference(left, right, request)
                status = "reports-differ" if report else "equal"
        else:
            status = "diverged"
            start = max(0, position - TOKEN_CONTEXT)
        end = (position if position is not None else 0) + TOKEN_CONTEXT + 1
        out.append(
            RequestComparison(
                scenario,
                run,
                request,
                status,
                position=position,
                window_start=start,
                left_tokens=tuple(a[start:end]),
                right_tokens=tuple(b[start:end]),
                rng=rng,
                rng_index=rng_index,
                report=report,
            )
        )
    return out


def _report_difference(left: RunTrace, right: RunTrace, request: str) -> tuple[int | None, str]:
    """Where the engine's reports of one request differ between two recordings of the same
    tokens: its finish reason, or the first token's log-probabilities ("" if nowhere)."""
    a, b = left.end.finish_reasons.get(request), right.end.finish_reasons.get(request)
    if a != b:
        return None, f"finish reason {a} vs {b}"
    x, y = left.end.logprobs.get(request), right.end.logprobs.get(request)
    if x == y:
        return None, ""
    if x is None or y is None:
        return None, "log-probabilities reported on one side only"
    position = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), None)
    if position is None:
        return None, f"log-probabilities of {len(x)} vs {len(y)} tokens"
    return position, (
        f"log-probability at token {position}: {x[position].logprob:.4g} vs "
        f"{y[position].logprob:.4g}"
    )


def compare_recordings(
    left: Mapping[tuple[str, str], RunTrace],
    right: Mapping[tuple[str, str], RunTrace],
    *,
    left_label: str = "A",
    right_label: str = "B",
) -> RecordingDiff:
    """Compare two recordings keyed by (scenario, run). A run on one side only is ``missing``
    for each of its requests."""
    requests: list[RequestComparison] = []
    keys = list(left) + [k for k in right if k not in left]
    for key in keys:
        scenario, run = key
        if key not in left or key not in right:
            present = left.get(key) or right.get(key)
            assert present is not None
            side = "left" if key not in left else "right"
            names = list(present.end.outputs) or [
                r.request_id for r in present.header.requests if r.phase == "scenario"
            ]
            requests += [
                RequestComparison(scenario, run, name, "missing", missing_from=side)
                for name in names
            ]
            continue
        requests += compare_runs(scenario, run, left[key], right[key])
    return RecordingDiff(left_label, right_label, tuple(requests))
