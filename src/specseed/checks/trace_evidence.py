"""Reading evidence out of traces: token positions, the events behind them, and diffs.

Shared by every check family, so that all findings show divergences the same way.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from specseed.checks.findings import Attribution, EventState, StreamSide, Suspect, TokenDiff
from specseed.core.contracts import RngContract
from specseed.core.wording import noun_for
from specseed.traces.records import RowRecord, RunTrace, SamplingEvent

DIFF_CONTEXT = 4
"""Tokens shown before the first divergence (and after it) in a diff."""


def event_state(event: SamplingEvent, step: int, decoding_iter: int) -> EventState:
    return EventState(
        kind=event.kind,
        index=event.index,
        kernel=event.kernel,
        kernel_row=event.kernel_row,
        seed=event.seed,
        subsequence=event.subsequence,
        offset=event.offset,
        draws=event.draws,
        step=step,
        decoding_iter=decoding_iter,
    )


def follows_contract(
    event: EventState,
    request_seed: int | None,
    contract: RngContract,
    max_draft_len: int,
    *,
    consumed: int | None = None,
) -> bool:
    """True when the event's state is exactly the one ``contract`` predicts for it.

    ``consumed``: draws the request consumed before this event, for sequential contracts;
    a caller that does not track it gets seed and subsequence compared, not the offset.
    """
    expected = contract.expected(
        request_seed=request_seed,
        decoding_iter=event.decoding_iter,
        kind=event.kind,
        index=event.index,
        max_draft_len=max_draft_len,
        consumed=consumed,
    )
    subsequence = event.kernel_row if expected.subsequence is None else expected.subsequence
    return (
        (expected.seed is None or event.seed == expected.seed)
        and event.subsequence == subsequence
        and expected.matches_offset(event.offset)
    )


@dataclass(frozen=True)
class EmittedAt:
    """Where an output token of a request came from."""

    step: int
    row: RowRecord
    previous: RowRecord | None
    """The request's row one iteration earlier (it proposed the drafts verified here)."""
    previous_step: int
    fingerprint: str


def emission_map(trace: RunTrace, request_id: str) -> list[EmittedAt]:
    """For each output position of a request, the step and row that emitted it."""
    result: list[EmittedAt] = []
    previous: RowRecord | None = None
    previous_step = -1
    for step, row in trace.rows_of(request_id):
        if row.discarded:
            continue
        for k in range(len(row.emitted)):
            fingerprint = row.logits_fingerprints[k] if k < len(row.logits_fingerprints) else ""
            result.append(EmittedAt(step.step, row, previous, previous_step, fingerprint))
        previous, previous_step = row, step.step
    return result


def events_behind(at: EmittedAt) -> tuple[EventState, ...]:
    """Sampling events that decided a token: its row's target/accept events and the draft
    events (one iteration earlier) that proposed the drafts it verified."""
    own = [
        event_state(e, at.step, at.row.decoding_iter)
        for e in at.row.events
        if e.kind in ("target", "accept")
    ]
    drafts: list[EventState] = []
    if at.previous is not None and at.row.drafts_verified:
        drafts = [
            event_state(e, at.previous_step, at.previous.decoding_iter)
            for e in at.previous.events
            if e.kind == "draft"
        ]
    return tuple(drafts + own)


def first_divergence(left: Sequence[int], right: Sequence[int]) -> int | None:
    """Index of the first differing token (a length difference counts), or None if equal."""
    for i, (a, b) in enumerate(zip(left, right, strict=False)):
        if a != b:
            return i
    if len(left) != len(right):
        return min(len(left), len(right))
    return None


def _state_key(events: Sequence[EventState]) -> tuple[tuple[str, int, int, int, int], ...]:
    return tuple(sorted((e.kind, e.index, e.seed, e.subsequence, e.offset) for e in events))


def attribute(left: StreamSide, right: StreamSide) -> Attribution:
    """Why two sides diverge at a token: RNG state, logits, both, or neither (the sampler)."""
    rng_differs = _state_key(left.events) != _state_key(right.events)
    logits_differ = left.logits_fingerprint != right.logits_fingerprint
    if rng_differs and logits_differ:
        return "rng-state-and-logits"
    if rng_differs:
        return "rng-state"
    if logits_differ:
        return "logits"
    return "sampler"


def _side(run: str, tokens: Sequence[int], emitted: list[EmittedAt], position: int) -> StreamSide:
    start = max(0, position - DIFF_CONTEXT)
    window = tuple(tokens[start : position + DIFF_CONTEXT + 1])
    if position < len(emitted):
        at = emitted[position]
        return StreamSide(
            run=run,
            tokens=window,
            step=at.step,
            row=at.row.row,
            decoding_iter=at.row.decoding_iter,
            logits_fingerprint=at.fingerprint,
            events=events_behind(at),
        )
    return StreamSide(run, window, -1, -1, -1, "", ())


def _history(trace: RunTrace, request_id: str, until_step: int) -> list[EventState]:
    """The request's sampling events in the order they ran, up to ``until_step``."""
    events: list[EventState] = []
    for step, row in trace.rows_of(request_id):
        if until_step >= 0 and step.step > until_step:
            break
        if row.discarded:
            continue
        events.extend(event_state(e, step.step, row.decoding_iter) for e in row.events)
    return events


def _same_state(a: EventState, b: EventState) -> bool:
    return (a.kind, a.index, a.decoding_iter, a.seed, a.subsequence, a.offset) == (
        b.kind,
        b.index,
        b.decoding_iter,
        b.seed,
        b.subsequence,
        b.offset,
    )


def first_state_difference(
    left: list[EventState], right: list[EventState]
) -> tuple[EventState | None, EventState | None] | None:
    """The first pair of events, in run order, whose states differ (None: histories agree)."""
    for a, b in zip(left, right, strict=False):
        if not _same_state(a, b):
            return a, b
    if len(left) != len(right):
        n = min(len(left), len(right))
        return (left[n] if n < len(left) else None, right[n] if n < len(right) else None)
    return None


def _within_observed(attribution: Attribution, left: RunTrace, right: RunTrace) -> Attribution:
    """The attribution narrowed to what both engines exposed: equal evidence that was never
    recorded proves nothing (no "sampler" verdict without logits and RNG state)."""
    rng = all(t.header.observability.exposes("rng-state") for t in (left, right))
    logits = all(t.header.observability.exposes("logits") for t in (left, right))
    if rng and logits:
        return attribution
    rng_differs = attribution in ("rng-state", "rng-state-and-logits")
    logits_differ = attribution in ("logits", "rng-state-and-logits")
    if rng and rng_differs:
        return "rng-state"
    if logits and logits_differ:
        return "logits"
    if rng:
        return "logits-unobserved"
    return "tokens-only"


def _tokens_only(trace: RunTrace) -> bool:
    seen = trace.header.observability
    return seen.rng_state is None and not seen.logits


def stream_diff(
    left: RunTrace,
    right: RunTrace,
    request: str,
    right_request: str | None = None,
) -> TokenDiff | None:
    """The first divergence of ``request`` between two runs (or between two requests)."""
    other = right_request or request
    left_tokens = left.end.outputs.get(request, ())
    right_tokens = right.end.outputs.get(other, ())
    position = first_divergence(left_tokens, right_tokens)
    if position is None:
        return None
    if _tokens_only(left) and _tokens_only(right):
        # Nothing but tokens to compare: say so rather than "same state, same logits".
        return TokenDiff(
            request=request,
            position=position,
            window_start=max(0, position - DIFF_CONTEXT),
            left=_side(left.name, left_tokens, [], position),
            right=_side(right.name, right_tokens, [], position),
            attribution="tokens-only",
            right_request=right_request,
        )
    left_side = _side(left.name, left_tokens, emission_map(left, request), position)
    right_side = _side(right.name, right_tokens, emission_map(right, other), position)
    first = first_state_difference(
        _history(left, request, left_side.step), _history(right, other, right_side.step)
    )
    attribution = attribute(left_side, right_side)
    if attribution in ("logits", "sampler") and first is not None:
        # The token's own events agree, but an earlier draw did not (it changed drafts or
        # acceptance before it changed a token).
        attribution = "rng-state-and-logits" if attribution == "logits" else "rng-state"
    attribution = _within_observed(attribution, left, right)
    return TokenDiff(
        request=request,
        position=position,
        window_start=max(0, position - DIFF_CONTEXT),
        left=left_side,
        right=right_side,
        attribution=attribution,
        right_request=right_request,
        first_state_difference=first,
    )


def sampled_without_events(trace: RunTrace) -> list[str]:
    """Sampled scenario requests that emitted tokens yet have no recorded sampling event.

    An engine that claims to expose RNG state must record an event for every sampled token;
    where it did not, RNG checks have nothing to judge and must not pass.
    """
    recorded = {
        row.request_id
        for step in trace.steps
        for row in step.rows
        if row.phase == "scenario" and row.events
    }
    return [
        info.request_id
        for info in trace.header.requests
        if info.phase == "scenario"
        and info.temperature > 0
        and trace.end.outputs.get(info.request_id)
        and info.request_id not in recorded
    ]


def unrecorded_reason(trace: RunTrace, requests: list[str]) -> str:
    shown = ", ".join(requests[:5]) + (
        f" and {len(requests) - 5} more" if len(requests) > 5 else ""
    )
    return (
        f"{trace.name}: no sampling event was recorded for sampled "
        f"{noun_for(len(requests), 'request')} {shown}"
    )


def shared_draws(trace: RunTrace) -> tuple[str, str]:
    """Evidence of shared draws between events of one request, across its steps: (an accept
    test that starts on a draft's draws, any other overlap); empty strings when none."""
    ranges: dict[str, list[tuple[int, int, int, int, str, int]]] = {}
    for step in trace.steps:
        for row in step.rows:
            if row.discarded or row.phase != "scenario":
                continue
            for event in row.events:
                if event.draws <= 0:
                    continue
                ranges.setdefault(row.request_id, []).append(
                    (
                        event.seed,
                        event.subsequence,
                        event.offset,
                        event.offset + event.draws,
                        f"{event.kind}[{event.index}]",
                        row.decoding_iter,
                    )
                )
    reuse = overlap = ""
    for request, items in ranges.items():
        items.sort()
        for a, b in itertools.pairwise(items):
            if a[:2] != b[:2] or b[2] >= a[3]:
                continue
            kinds = {a[4].split("[")[0], b[4].split("[")[0]}
            text = (
                f"{request}: {a[4]} at iteration {a[5]} and {b[4]} at iteration {b[5]} both "
                f"read offset {b[2]}"
            )
            if kinds == {"accept", "draft"} and a[2] == b[2]:
                reuse = reuse or text
            else:
                overlap = overlap or text
        if reuse and overlap:
            break
    return reuse, overlap


def sharing_suspects(reuse: str, overlap: str) -> list[Suspect]:
    """The suspects ``shared_draws``' evidence names: a biased or coupled output explained by
    draws its events shared."""
    suspects = []
    if reuse:
        suspects.append(
            Suspect(
                "accept-reuses-draft-draw",
                f"{reuse}: the accept test's uniform is the number that drew the draft it "
                "tests, so acceptance depends on which draft was drawn",
            )
        )
    if overlap:
        suspects.append(
            Suspect(
                "draw-overlap",
                f"{overlap}: sampling events of one request share draws, coupling tokens",
            )
        )
    return suspects
