"""Checks between requests of one run: distinct seeds, and unseeded requests, get streams of
their own."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations

from specseed.checks.context import CheckContext
from specseed.checks.evidence import (
    event_state,
    follows_contract,
    sampled_without_events,
    unrecorded_reason,
)
from specseed.checks.findings import EventState, Finding, Suspect
from specseed.checks.registry import run_check
from specseed.checks.suspects import merge, seed_suspects
from specseed.contracts import RngContract
from specseed.seeds import fmt_seed
from specseed.trace import RequestInfo, RunTrace, SamplingEvent, StepRecord
from specseed.wording import plural

MIN_TOKENS_FOR_IDENTITY = 8
"""Shorter identical streams prove nothing: peaked distributions repeat short outputs."""


def _events(trace: RunTrace, request: str) -> list[tuple[EventState, StepRecord, SamplingEvent]]:
    out = []
    for step, row in trace.rows_of(request):
        if row.discarded:
            continue
        for event in row.events:
            out.append((event_state(event, step.step, row.decoding_iter), step, event))
    return out


Located = tuple[EventState, StepRecord, SamplingEvent]


def _events_by_request(trace: RunTrace) -> dict[str, list[Located]]:
    """Every request's events in one pass (a run may hold thousands of requests, and the
    checks below look at every pair of them)."""
    out: dict[str, list[Located]] = {}
    for step in trace.steps:
        for row in step.rows:
            if row.discarded:
                continue
            located = out.setdefault(row.request_id, [])
            for event in row.events:
                located.append((event_state(event, step.step, row.decoding_iter), step, event))
    return out


def _shared_states(
    events: dict[str, list[Located]], a: str, b: str
) -> list[tuple[Located, Located]]:
    """Events of ``a`` and ``b`` that start at the same (seed, subsequence, offset)."""
    index = {item[0].triple(): item for item in events.get(b, []) if item[0].draws > 0}
    return [
        (item, index[item[0].triple()]) for item in events.get(a, []) if item[0].triple() in index
    ]


def _candidate_pairs(
    trace: RunTrace,
    events: dict[str, list[Located]],
    pairs: list[tuple[RequestInfo, RequestInfo]],
) -> list[tuple[RequestInfo, RequestInfo]]:
    """The pairs that can share a stream: a (seed, subsequence, offset) in common, or the
    same setup and first tokens. Looking only at these keeps the checks linear in practice
    for runs of thousands of requests (the distribution scenarios)."""
    by_state: dict[tuple[int, int, int], set[str]] = {}
    by_output: dict[tuple[object, ...], set[str]] = {}
    involved = {r.request_id for pair in pairs for r in pair}
    for request in involved:
        # Every event, drawing or not: a superset of what _shared_states matches.
        for state, _, _ in events.get(request, []):
            by_state.setdefault(state.triple(), set()).add(request)
    for pair in pairs:
        for info in pair:
            head = trace.end.outputs.get(info.request_id, ())[:MIN_TOKENS_FOR_IDENTITY]
            if len(head) == MIN_TOKENS_FOR_IDENTITY:
                key = (info.prompt_ids, info.temperature, info.top_k, info.top_p, head)
                by_output.setdefault(key, set()).add(info.request_id)
    together: set[frozenset[str]] = set()
    for group in (*by_state.values(), *by_output.values()):
        if len(group) > 1:
            together.update(frozenset((a, b)) for a, b in combinations(sorted(group), 2))
    return [(x, y) for x, y in pairs if frozenset((x.request_id, y.request_id)) in together]


def _same_setup(x: RequestInfo, y: RequestInfo) -> bool:
    return (x.prompt_ids, x.temperature, x.top_k, x.top_p) == (
        y.prompt_ids,
        y.temperature,
        y.top_k,
        y.top_p,
    )


def _identical_outputs(trace: RunTrace, x: RequestInfo, y: RequestInfo) -> bool:
    a = trace.end.outputs.get(x.request_id, ())
    b = trace.end.outputs.get(y.request_id, ())
    n = min(len(a), len(b))
    return n >= MIN_TOKENS_FOR_IDENTITY and a[:n] == b[:n] and _same_setup(x, y)


def _scenario_requests(trace: RunTrace) -> list[RequestInfo]:
    return [r for r in trace.header.requests if r.phase == "scenario"]


def _label(request: RequestInfo) -> str:
    return (
        request.request_id
        if request.seed is None
        else f"{request.request_id} (seed {fmt_seed(request.seed)})"
    )


def _shared_stream(
    trace: RunTrace,
    x: RequestInfo,
    y: RequestInfo,
    shared: list[tuple[Located, Located]],
    contract: RngContract,
) -> tuple[str, list[Suspect]] | None:
    """Why two requests that must not share random numbers did (None: they did not)."""
    identical = _identical_outputs(trace, x, y)
    if shared:
        (a, _, _), _ = shared[0]
        same = ", same prompt, identical tokens" if identical else ""
        problem = (
            f"{_label(x)} and {_label(y)} both drew from seed {fmt_seed(a.seed)}, subsequence "
            f"{a.subsequence}, offset {a.offset} ({plural(len(shared), 'event')}{same})"
        )
        suspects: list[Suspect] = []
        for (_, step, event), request in zip(shared[0], (x, y), strict=True):
            suspects.extend(
                seed_suspects(trace, step, request.request_id, event, request.seed, contract)
            )
        if a.offset == 0 and len({e.seed for e, _, _ in _events(trace, x.request_id)}) > 1:
            suspects.append(
                Suspect(
                    "engine-counter",
                    f"{x.request_id}'s seed changes from call to call at offset 0: an "
                    "engine-wide counter, shared by every row of a call",
                )
            )
        return problem, suspects
    if identical:
        problem = (
            f"{_label(x)} and {_label(y)} have the same prompt and produced identical tokens, "
            "though their recorded states differ"
        )
        why = (
            f"{x.request_id} and {y.request_id} recorded different states yet drew the same "
            "numbers: the kernel read one row's seed and offset for every row"
        )
        return problem, [Suspect("row0-seed", why)]
    return None


@run_check(
    "distinct-seeds",
    short="seeds",
    title="Distinct seeds, distinct streams",
    description="Seeded requests with different seeds draw from different Philox streams, and "
    "two such requests with the same prompt produce different tokens.",
    targets=("row0-seed", "engine-counter", "neighbor-unseeded"),
    needs=("steps", "rng-state"),
)
def distinct_seeds(ctx: CheckContext, trace: RunTrace) -> Iterator[Finding]:
    seeded = [r for r in _scenario_requests(trace) if r.seed is not None and r.temperature > 0]
    pairs = [(x, y) for x, y in combinations(seeded, 2) if x.seed != y.seed]
    if not pairs or trace.failed:
        return
    unrecorded = sorted({r.request_id for r in seeded} & set(sampled_without_events(trace)))
    if unrecorded:
        why = unrecorded_reason(trace, unrecorded)
        yield Finding(status="skip", message=f"{why}; their streams cannot be compared")
        return
    problems: list[str] = []
    suspects: list[Suspect] = []
    affected: set[str] = set()
    events = _events_by_request(trace)
    for x, y in _candidate_pairs(trace, events, pairs):
        found = _shared_stream(
            trace, x, y, _shared_states(events, x.request_id, y.request_id), ctx.contract
        )
        if found is not None:
            problems.append(found[0])
            suspects.extend(found[1])
            affected.update((x.request_id, y.request_id))
    if not problems:
        yield Finding(
            status="pass",
            message=f"{trace.name}: {plural(len(pairs), 'pair')} of differently seeded requests drew from "
            "different streams",
            runs=(trace.name,),
        )
        return
    yield Finding(
        status="fail",
        message=f"{trace.name}: {plural(len(problems), 'pair')} of differently seeded requests share "
        "random numbers",
        runs=(trace.name,),
        requests=tuple(sorted(affected)),
        suspects=merge(suspects),
        details=tuple(problems),
    )


@run_check(
    "unseeded-independence",
    short="unseeded",
    title="Unseeded requests independent",
    description="Unseeded requests each draw from a stream of their own: none shares a "
    "(seed, subsequence, offset) with another, and two with the same prompt produce "
    "different tokens.",
    targets=("unseeded-shared-stream",),
    needs=("steps", "rng-state"),
)
def unseeded_independence(ctx: CheckContext, trace: RunTrace) -> Iterator[Finding]:
    unseeded = [r for r in _scenario_requests(trace) if r.seed is None and r.temperature > 0]
    pairs = list(combinations(unseeded, 2))
    if not pairs or trace.failed:
        return
    unrecorded = sorted({r.request_id for r in unseeded} & set(sampled_without_events(trace)))
    if unrecorded:
        why = unrecorded_reason(trace, unrecorded)
        yield Finding(status="skip", message=f"{why}; their streams cannot be compared")
        return
    contract = ctx.contract
    limitation = contract.limitation_for("unseeded-independence")
    problems: list[str] = []
    excused: list[str] = []
    suspects: list[Suspect] = []
    affected: set[str] = set()
    max_draft_len = ctx.max_draft_len(trace)
    events = _events_by_request(trace)
    for x, y in _candidate_pairs(trace, events, pairs):
        shared = _shared_states(events, x.request_id, y.request_id)
        if (
            limitation is not None
            and shared
            and all(
                follows_contract(state, None, contract, max_draft_len)
                for pair in shared
                for state, _, _ in pair
            )
        ):
            excused.append(
                f"{x.request_id} and {y.request_id} share {len(shared)} (seed, subsequence, "
                "offset) states, as the contract lays them out"
            )
            continue
        found = _shared_stream(trace, x, y, shared, contract)
        if found is not None:
            problems.append(found[0])
            suspects.extend(found[1])
            affected.update((x.request_id, y.request_id))
    if limitation is not None and not problems:
        seen = (
            f"{plural(len(excused), 'pair shares', 'pairs share')} a stream"
            if excused
            else "no shared stream"
        )
        yield Finding(
            status="known-limitation",
            message=f"{trace.name}: {seen}; {contract.name} does not give unseeded requests "
            "streams of their own",
            runs=(trace.name,),
            limitation=limitation.reason,
            details=tuple(excused),
        )
        return
    if not problems:
        yield Finding(
            status="pass",
            message=f"{trace.name}: {len(unseeded)} unseeded requests drew from streams of "
            "their own",
            runs=(trace.name,),
        )
        return
    yield Finding(
        status="fail",
        message=f"{trace.name}: {plural(len(problems), 'pair')} of unseeded requests share random numbers",
        runs=(trace.name,),
        requests=tuple(sorted(affected)),
        suspects=merge(suspects)
        or (
            Suspect(
                "unseeded-shared-stream",
                "unseeded requests were given the same (seed, subsequence, offset) stream",
            ),
        ),
        details=tuple(problems),
    )
