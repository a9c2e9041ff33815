"""Checks of recorded Philox states against the contract: offsets, seeds, draw ranges."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterator
from typing import NamedTuple

from specseed.checks.context import CheckContext
from specseed.checks.findings import EventState, Finding, OffsetRow, Suspect
from specseed.checks.registry import run_check
from specseed.checks.suspects import merge, offset_suspects, overlap_suspect, seed_suspects
from specseed.checks.trace_evidence import (
    event_state,
    follows_contract,
    sampled_without_events,
    unrecorded_reason,
)
from specseed.core.contracts import RngContract
from specseed.core.seeds import fmt_seed
from specseed.core.wording import plural
from specseed.engine_adapters.contracts import all_contracts
from specseed.traces.records import RowRecord, RunTrace, SamplingEvent, StepRecord

MAX_DETAIL_LINES = 8


def _scenario_rows(trace: RunTrace) -> Iterator[tuple[StepRecord, RowRecord]]:
    for step in trace.steps:
        for row in step.rows:
            if row.phase == "scenario" and not row.discarded:
                yield step, row


def _shared_window_clashes(
    trace: RunTrace, contract: RngContract, max_draft_len: int
) -> set[tuple[str, int]]:
    """(request, iteration) pairs whose window, taken from a counter shared by unseeded
    requests, another (request, iteration) also used: the shared counter handed one window out
    twice. Empty unless the contract puts unseeded requests on a shared counter."""
    if contract.unseeded_offsets != "shared-counter":
        return set()
    owners: dict[tuple[int, int], set[tuple[str, int]]] = defaultdict(set)
    for _step, row in _scenario_rows(trace):
        if trace.request(row.request_id).seed is not None:
            continue
        for event in row.events:
            expected = contract.expected(
                request_seed=None,
                decoding_iter=row.decoding_iter,
                kind=event.kind,
                index=event.index,
                max_draft_len=max_draft_len,
            )
            if expected.matches_offset(event.offset):
                key = (event.seed, expected.window_start(event.offset))
                owners[key].add((row.request_id, row.decoding_iter))
    return {owner for group in owners.values() if len(group) > 1 for owner in group}


def _shared_unseeded_seeds(trace: RunTrace) -> dict[str, set[int]]:
    """Unseeded scenario requests whose seed another unseeded request also used."""
    seeds: dict[str, set[int]] = defaultdict(set)
    for _step, row in _scenario_rows(trace):
        if trace.request(row.request_id).seed is None:
            seeds[row.request_id].update(e.seed for e in row.events)
    owners: dict[int, set[str]] = defaultdict(set)
    for request, used in seeds.items():
        for seed in used:
            owners[seed].add(request)
    return {
        request: {seed for seed in used if len(owners[seed]) > 1}
        for request, used in seeds.items()
        if any(len(owners[seed]) > 1 for seed in used) or len(used) > 1
    }


@run_check(
    "rng-contract",
    short="rng",
    title="RNG state follows the contract",
    description="Every sampling event's seed, subsequence and offset equal the contract's "
    "prediction from the request's seed, decoding iteration, event slot and kernel row; "
    "unseeded requests under a unique-seed contract each keep one seed of their own, and "
    "under a shared-counter contract take windows of the stated form that no other request "
    "or iteration took.",
    targets=(
        "engine-counter",
        "row-subsequence",
        "overlap-window-reuse",
        "draft-shared-offset",
        "unseeded-shared-stream",
        "neighbor-unseeded",
        "draw-overlap",
    ),
    needs=("steps", "rng-state"),
)
def rng_contract(ctx: CheckContext, trace: RunTrace) -> Iterator[Finding]:
    contract = ctx.contract
    max_draft_len = ctx.max_draft_len(trace)
    shared = _shared_unseeded_seeds(trace) if contract.unseeded == "unique-seed" else {}
    clashes = _shared_window_clashes(trace, contract, max_draft_len)
    observed: dict[str, list[_Observed]] = defaultdict(list)
    suspects: list[Suspect] = []
    mismatched: dict[str, set[str]] = defaultdict(set)
    events = 0
    consumed: dict[str, int] = defaultdict(int)
    for step, row in _scenario_rows(trace):
        info = trace.request(row.request_id)
        for event in row.events:
            events += 1
            expected = contract.expected(
                request_seed=info.seed,
                decoding_iter=row.decoding_iter,
                kind=event.kind,
                index=event.index,
                max_draft_len=max_draft_len,
                consumed=consumed[row.request_id],
            )
            if expected.seed is None or event.seed == expected.seed:
                # Sequential contracts: only a draw from the request's own stream moves it.
                consumed[row.request_id] += event.draws
            expected_subsequence = (
                event.kernel_row if expected.subsequence is None else expected.subsequence
            )
            mismatch = []
            if expected.seed is not None and event.seed != expected.seed:
                mismatch.append("seed")
            if expected.seed is None and event.seed in shared.get(row.request_id, ()):
                mismatch.append("seed")
            if event.subsequence != expected_subsequence:
                mismatch.append("subsequence")
            # Under a sequential contract an event on another generator has a position in
            # that stream, not in the request's: its seed is the whole mismatch.
            other_stream = contract.offsets == "sequential" and "seed" in mismatch
            if not other_stream and (
                not expected.matches_offset(event.offset)
                or (row.request_id, row.decoding_iter) in clashes
            ):
                mismatch.append("offset")
            expected_offset = expected.offset
            if expected.shared_window_base is not None:
                # A shared-counter window is predicted by its form only: show the observed
                # offset where it has that form, else the first window's.
                expected_offset = (
                    event.offset
                    if expected.matches_offset(event.offset)
                    else expected.shared_window_base + (expected.offset or 0)
                )
            # The table row is built only for a request that fails (most events pass).
            observed[row.request_id].append(
                _Observed(
                    step.step,
                    row.decoding_iter,
                    event,
                    expected.seed,
                    expected_subsequence,
                    expected_offset,
                    tuple(mismatch),
                )
            )
            if not mismatch:
                continue
            label = event_state(event, step.step, row.decoding_iter).label()
            mismatched[row.request_id].update(mismatch)
            if "seed" in mismatch:
                suspects.extend(
                    seed_suspects(trace, step, row.request_id, event, info.seed, contract)
                )
            if "subsequence" in mismatch and event.subsequence == event.kernel_row:
                suspects.append(
                    Suspect(
                        "row-subsequence",
                        f"{row.request_id} {label} used subsequence {event.subsequence}, its "
                        f"kernel row; {contract.name} expects {expected_subsequence}",
                    )
                )
            if "offset" in mismatch and expected.shared_window_base is not None:
                clash = (row.request_id, row.decoding_iter) in clashes
                suspects.append(
                    Suspect(
                        "unseeded-shared-stream",
                        f"unseeded request {row.request_id} {label} drew at offset "
                        f"{event.offset}, "
                        + (
                            "a window of the shared counter another request also drew"
                            if clash
                            else "which is no window of the counter shared by unseeded "
                            f"requests (from {expected.shared_window_base})"
                        ),
                    )
                )
            elif "offset" in mismatch and contract.offsets == "window":
                suspects.extend(offset_suspects(event, row.decoding_iter, contract, max_draft_len))
    unrecorded = sampled_without_events(trace)
    if unrecorded:
        yield Finding(
            status="error",
            message=f"{unrecorded_reason(trace, unrecorded)}, though the engine claims to "
            "expose RNG state: the observation is broken (adapter or tap), so the contract "
            "cannot be checked",
            runs=(trace.name,),
            requests=tuple(unrecorded),
        )
        return
    if events == 0:
        yield Finding(
            status="skip",
            message=f"{trace.name}: no random numbers drawn{_why_none(trace)}, nothing to "
            f"hold to {contract.name}",
            runs=(trace.name,),
        )
        return
    if not mismatched:
        yield Finding(
            status="pass",
            message=f"{trace.name}: all {events} sampling events follow {contract.name}",
            runs=(trace.name,),
        )
        return
    bad = sum(1 for table in observed.values() for seen in table if seen.mismatch)
    summary = _mismatch_summary(mismatched)
    details: tuple[str, ...] = ()
    followed = [
        other.name
        for other in all_contracts().values()
        if other.name != contract.name and _follows(trace, other, max_draft_len)
    ]
    if clashes:
        details += (
            "unseeded windows handed out more than once (request, iteration): "
            + ", ".join(f"{r} {n}" for r, n in sorted(clashes)[:MAX_DETAIL_LINES]),
        )
    if followed:
        details += (
            f"every event follows contract {followed[0]} instead: the engine implements another "
            f"layout than {contract.name} (set engine.contract: {followed[0]} to audit it "
            "against its own layout)",
        )
    yield Finding(
        status="fail",
        message=f"{trace.name}: {bad} of {plural(events, 'sampling event')} differ from {contract.name} "
        f"({summary})",
        runs=(trace.name,),
        requests=tuple(sorted(mismatched)),
        suspects=merge(suspects),
        offsets=tuple(
            _offset_row(trace.name, request, seen)
            for request in sorted(mismatched)
            for seen in observed[request]
        ),
        details=details,
    )


def _mismatch_summary(mismatched: dict[str, set[str]]) -> str:
    """Which requests' events differ from the contract, and in what: each request by name up
    to :data:`MAX_DETAIL_LINES` requests; past that, the requests grouped by what differs
    (three named per group), so a defect that touches every request of a 4,096-request run
    still makes a message of a few lines (every event is in the finding's offsets)."""
    if len(mismatched) <= MAX_DETAIL_LINES:
        return "; ".join(
            f"{request}: {', '.join(sorted(fields))}"
            for request, fields in sorted(mismatched.items())
        )
    by_fields: dict[tuple[str, ...], list[str]] = {}
    for request, differing in sorted(mismatched.items()):
        by_fields.setdefault(tuple(sorted(differing)), []).append(request)
    parts = []
    for fields, requests in sorted(by_fields.items(), key=lambda item: (-len(item[1]), item[0])):
        named = ", ".join(requests[:3])
        more = f" and {len(requests) - 3} more" if len(requests) > 3 else ""
        parts.append(f"{', '.join(fields)}: {plural(len(requests), 'request')} ({named}{more})")
    return "; ".join(parts)


class _Observed(NamedTuple):
    """One event as ``rng_contract`` saw it, with the contract's expectation."""

    step: int
    decoding_iter: int
    event: SamplingEvent
    expected_seed: int | None
    expected_subsequence: int
    expected_offset: int | None
    mismatch: tuple[str, ...]


def _offset_row(run: str, request: str, seen: _Observed) -> OffsetRow:
    event = seen.event
    return OffsetRow(
        request=request,
        run=run,
        step=seen.step,
        decoding_iter=seen.decoding_iter,
        event=event_state(event, seen.step, seen.decoding_iter).label(),
        expected_seed=seen.expected_seed,
        expected_subsequence=seen.expected_subsequence,
        expected_offset=seen.expected_offset,
        seed=event.seed,
        subsequence=event.subsequence,
        offset=event.offset,
        draws=event.draws,
        mismatch=seen.mismatch,
    )


def _why_none(trace: RunTrace) -> str:
    failure = trace.end.failure
    if failure is not None:
        # The real reason: the run ended before it drew (a crash, or an interrupt).
        ended = "was interrupted" if failure.exception == "Interrupted" else "crashed"
        return f" (the run {ended} {failure.where}: {failure.exception})"
    scenario = [r for r in trace.header.requests if r.phase == "scenario"]
    return " (every request is greedy)" if all(r.temperature == 0 for r in scenario) else ""


def _follows(trace: RunTrace, contract: RngContract, max_draft_len: int) -> bool:
    """True when every scenario event's state is the one ``contract`` predicts."""
    consumed: dict[str, int] = defaultdict(int)
    for step, row in _scenario_rows(trace):
        seed = trace.request(row.request_id).seed
        for event in row.events:
            state = event_state(event, step.step, row.decoding_iter)
            if not follows_contract(
                state, seed, contract, max_draft_len, consumed=consumed[row.request_id]
            ):
                return False
            consumed[row.request_id] += event.draws  # every event followed: all on its stream
    return True


MAX_PAIRS_JUDGED = 2_000
"""Overlapping pairs kept per request. A crafted trace whose events all read the same draws
has quadratically many pairs; they are counted (sorted offsets, bisection) but only this many
are listed and judged one by one."""


def overlapping_pairs(
    events: list[EventState], limit: int | None = None
) -> tuple[list[tuple[EventState, EventState]], int]:
    """Pairs of events with the same seed and subsequence whose offset ranges intersect: the
    first ``limit`` of them (all with None), and how many there are in all."""
    groups: dict[tuple[int, int], list[EventState]] = defaultdict(list)
    for event in events:
        if event.draws > 0:
            groups[(event.seed, event.subsequence)].append(event)
    pairs: list[tuple[EventState, EventState]] = []
    total = 0
    for group in groups.values():
        group.sort(key=lambda e: (e.offset, e.step))
        offsets = [e.offset for e in group]
        for i, first in enumerate(group):
            end = first.offset + first.draws
            later = bisect.bisect_left(offsets, end, lo=i + 1) - (i + 1)
            total += later
            room = later if limit is None else min(later, limit - len(pairs))
            pairs.extend((first, second) for second in group[i + 1 : i + 1 + room])
    return pairs, total


DRAW_RANGES_DISJOINT = "draw-ranges-disjoint"
"""The check's id, written once: registered with it, and looked up in the contract's limitations."""


@run_check(
    DRAW_RANGES_DISJOINT,
    short="draws",
    title="Draw ranges disjoint",
    description="No two sampling events of one request read overlapping (seed, subsequence, "
    "offset .. offset + draws) ranges, so no random number is used twice.",
    targets=("draw-overlap", "draft-shared-offset", "overlap-window-reuse"),
    needs=("steps", "rng-state"),
)
def draw_ranges_disjoint(ctx: CheckContext, trace: RunTrace) -> Iterator[Finding]:
    contract = ctx.contract
    max_draft_len = ctx.max_draft_len(trace)
    per_request: dict[str, list[EventState]] = defaultdict(list)
    for step, row in _scenario_rows(trace):
        for event in row.events:
            per_request[row.request_id].append(event_state(event, step.step, row.decoding_iter))
    unrecorded = sampled_without_events(trace)
    drawn = sum(1 for events in per_request.values() for e in events if e.draws > 0)
    if unrecorded or drawn == 0:
        why = (
            unrecorded_reason(trace, unrecorded)
            if unrecorded
            else f"{trace.name}: no random numbers drawn{_why_none(trace)}"
        )
        yield Finding(status="skip", message=f"{why}; no draw ranges to compare")
        return
    violations: list[tuple[str, EventState, EventState]] = []
    seeds = {info.request_id: info.seed for info in trace.header.requests}
    excused: list[tuple[str, EventState, EventState]] = []
    limitation = contract.limitation_for(DRAW_RANGES_DISJOINT)
    unjudged = 0
    for request, events in per_request.items():
        seed = trace.request(request).seed
        pairs, total = overlapping_pairs(events, MAX_PAIRS_JUDGED)
        # Past the pairs judged one by one, the rest are excused only if every event of the
        # request follows the contract (checked per event: linear, whatever the pair count).
        rest_excused = total == len(pairs) or (
            limitation is not None
            and all(follows_contract(e, seed, contract, max_draft_len) for e in events)
        )
        if not rest_excused:
            unjudged += total - len(pairs)
        for first, second in pairs:
            if limitation is not None and all(
                follows_contract(e, seed, contract, max_draft_len) for e in (first, second)
            ):
                excused.append((request, first, second))
            else:
                violations.append((request, first, second))
    if unjudged and not violations:
        violations.append(excused.pop(0))  # pairs left unjudged: the layout is not excused

    def describe(items: list[tuple[str, EventState, EventState]]) -> tuple[str, ...]:
        return tuple(
            f"{request}: {a.label()} (iteration {a.decoding_iter}, step {a.step}) reads offsets "
            f"{a.offset}..{a.offset + a.draws - 1} and {b.label()} (iteration "
            f"{b.decoding_iter}, step {b.step}) reads {b.offset}..{b.offset + b.draws - 1} of "
            f"seed {fmt_seed(a.seed)}, subsequence {a.subsequence}"
            for request, a, b in items[:MAX_DETAIL_LINES]
        )

    if violations:
        yield Finding(
            status="fail",
            message=f"{trace.name}: {plural(len(violations) + unjudged, 'pair')} of sampling events read the same "
            f"random numbers ({', '.join(sorted({r for r, _, _ in violations}))})",
            runs=(trace.name,),
            requests=tuple(sorted({r for r, _, _ in violations})),
            suspects=merge(
                overlap_suspect(a, b, seeds.get(r), contract, max_draft_len)
                for r, a, b in violations
            ),
            details=describe(violations),
        )
    elif limitation is not None:
        seen = (
            f"{plural(len(excused), 'overlap')} where the contract puts them"
            if excused
            else "no overlap"
        )
        yield Finding(
            status="known-limitation",
            message=f"{trace.name}: {seen}; {contract.name} does not keep draw ranges disjoint",
            runs=(trace.name,),
            requests=tuple(sorted({r for r, _, _ in excused})),
            limitation=limitation.quoted,
            details=describe(excused),
        )
    else:
        total = sum(len(v) for v in per_request.values())
        yield Finding(
            status="pass",
            message=f"{trace.name}: {plural(total, 'sampling event')} of {plural(len(per_request), 'request')} read "
            "disjoint ranges",
            runs=(trace.name,),
        )
