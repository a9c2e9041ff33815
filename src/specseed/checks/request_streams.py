"""Checks between requests of one run: distinct seeds, and unseeded requests, get streams of
their own."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from specseed.checks.context import CheckContext
from specseed.checks.findings import EventState, Finding, Suspect
from specseed.checks.registry import run_check
from specseed.checks.suspects import merge, seed_suspects
from specseed.checks.trace_evidence import (
    event_state,
    follows_contract,
    sampled_without_events,
    unrecorded_reason,
)
from specseed.core.contracts import RngContract
from specseed.core.seeds import fmt_seed
from specseed.core.wording import plural
from specseed.traces.records import RequestInfo, RunTrace, SamplingEvent, StepRecord

MIN_TOKENS_FOR_IDENTITY = 8
"""Shorter identical streams prove nothing: peaked distributions repeat short outputs."""
IDENTITY_MIN_TEMPERATURE = 0.7
IDENTITY_MIN_TOP_P = 0.9
"""Identical outputs count as evidence only for requests sampled broadly: at least this
temperature and top_p, and top_k not 1. Narrower sampling repeats itself on a correct engine
(top_k 1 is argmax: two unseeded requests with one prompt always agree; ``specseed search``
found that false alarm)."""


Located = tuple[EventState, StepRecord, SamplingEvent]
Triple = tuple[int, int, int]


def _events(trace: RunTrace, request: str) -> list[Located]:
    out = []
    for step, row in trace.rows_of(request):
        if row.discarded:
            continue
        for event in row.events:
            out.append((event_state(event, step.step, row.decoding_iter), step, event))
    return out


DETAILED_PAIRS = 100
"""Pairs a stream-sharing finding describes one by one; it counts the rest. A defect that
gives N requests one stream makes N(N-1)/2 pairs (300 requests: 44,850 pairs, which took 3.5 s
to describe and 5.4 MB of the JSON report). Past the first pairs, a pair is heard for its
suspects only when it names a request no described pair named, and listed only when it
shows a kind of sharing (recorded states, or tokens alone) none listed did."""


class _StreamIndex:
    """Every request's sampling events, indexed once by (seed, subsequence, offset).

    Comparing each pair of requests by rescanning the trace was quadratic in requests (1,600
    seeded requests took minutes); the index finds the pairs that share a state, and the pairs
    whose outputs could be identical, in one pass, as sets of requests (the events two requests
    share are gathered only for the pairs a finding describes).
    """

    def __init__(self, trace: RunTrace, requests: list[RequestInfo]) -> None:
        self.trace = trace
        self.position = {r.request_id: i for i, r in enumerate(requests)}
        self.events = {r.request_id: _events(trace, r.request_id) for r in requests}
        # For each state, each request's last event that drew from it (drawing events only).
        self.by_state: dict[Triple, dict[str, Located]] = {}
        for request_id, located in self.events.items():
            for item in located:
                if item[0].draws > 0:
                    self.by_state.setdefault(item[0].triple(), {})[request_id] = item
        # The requests that drew at a state, one set per distinct membership (a defect that
        # gives every request one stream makes one set, not one per state).
        distinct: dict[frozenset[str], frozenset[str]] = {}
        self._drew_at: dict[Triple, frozenset[str]] = {}
        for triple, drawn in self.by_state.items():
            members = frozenset(drawn)
            self._drew_at[triple] = distinct.setdefault(members, members)

    def state_partners(self, request_id: str) -> set[str]:
        """Later requests (in request order) that drew at a state one of ``request_id``'s
        events starts at."""
        groups = {}
        for item in self.events[request_id]:
            group = self._drew_at.get(item[0].triple())
            if group is not None:
                groups[id(group)] = group
        mine = self.position[request_id]
        return {
            other for group in groups.values() for other in group if self.position[other] > mine
        }

    def shared_events(self, x: str, y: str) -> list[tuple[Located, Located]]:
        """``x``'s events that start where one of ``y``'s drawing events starts, in order,
        each with that event."""
        out = []
        for item in self.events[x]:
            drawn = self.by_state.get(item[0].triple())
            if drawn is not None and y in drawn:
                out.append((item, drawn[y]))
        return out

    def identity_groups(self, requests: list[RequestInfo]) -> dict[str, list[str]]:
        """Each request whose output might equal another's (same setup, same first tokens)
        with the later requests of its group, in request order."""
        groups: dict[tuple[object, ...], list[str]] = {}
        for r in requests:
            tokens = self.trace.end.outputs.get(r.request_id, ())
            if len(tokens) >= MIN_TOKENS_FOR_IDENTITY:
                key = (r.prompt_ids, r.temperature, r.top_k, r.top_p)
                groups.setdefault((*key, tokens[:MIN_TOKENS_FOR_IDENTITY]), []).append(r.request_id)
        return {
            member: members[number + 1 :]
            for members in groups.values()
            if len(members) > 1
            for number, member in enumerate(members)
        }

    def candidate_pairs(
        self, requests: list[RequestInfo]
    ) -> Iterator[tuple[RequestInfo, RequestInfo, bool]]:
        """Pairs that may share random numbers, in ``combinations(requests, 2)`` order, each
        with whether they share a recorded state; every other pair shares none and has
        different outputs."""
        info = {r.request_id: r for r in requests}
        identity = self.identity_groups(requests)
        for x in requests:
            sharing = self.state_partners(x.request_id)
            others = sharing.union(identity.get(x.request_id, ()))
            for other in sorted(others, key=self.position.__getitem__):
                yield x, info[other], other in sharing


class _PairFindings:
    """The problem pairs of a stream-sharing check: all counted, the first
    :data:`DETAILED_PAIRS` described, and past them a pair only when it brings a request or a
    kind of sharing no described pair showed."""

    def __init__(self) -> None:
        self.count = 0
        self.details: list[str] = []
        self.suspects: list[Suspect] = []
        self.affected: set[str] = set()
        self._kinds: set[bool] = set()

    def wants(self, x: RequestInfo, y: RequestInfo, shares_state: bool) -> bool:
        """Whether the pair (a problem) is to be described, not only counted."""
        return (
            len(self.details) < DETAILED_PAIRS
            or shares_state not in self._kinds
            or x.request_id not in self.affected
            or y.request_id not in self.affected
        )

    def add(
        self,
        x: RequestInfo,
        y: RequestInfo,
        shares_state: bool,
        found: tuple[str, list[Suspect]] | None,
    ) -> None:
        """A problem pair, described (``found``) or only counted (None)."""
        self.count += 1
        if found is not None:
            if len(self.details) < DETAILED_PAIRS or shares_state not in self._kinds:
                self.details.append(found[0])
                self._kinds.add(shares_state)
            self.suspects.extend(found[1])
        self.affected.update((x.request_id, y.request_id))

    @property
    def untold(self) -> int:
        """Problem pairs counted but not described."""
        return self.count - len(self.details)


def _knobs(info: RequestInfo) -> dict[str, object]:
    return {k: v for k, v in info.knobs().items() if k != "n"}


def _same_setup(x: RequestInfo, y: RequestInfo) -> bool:
    return (x.prompt_ids, x.temperature, x.top_k, x.top_p, _knobs(x)) == (
        y.prompt_ids,
        y.temperature,
        y.top_k,
        y.top_p,
        _knobs(y),
    )


def broad(request: RequestInfo) -> bool:
    """Sampled broadly enough that two independent streams rarely agree for 8 tokens: no
    min_p or logit_bias either (either can force every token on a correct engine), and no
    penalty that rewards repetition (a repetition_penalty below 1, a negative presence or
    frequency penalty: a loop it feeds can take every token)."""
    return (
        request.temperature >= IDENTITY_MIN_TEMPERATURE
        and request.top_p >= IDENTITY_MIN_TOP_P
        and request.top_k != 1
        and not request.min_p
        and not request.logit_bias
        and (request.repetition_penalty is None or request.repetition_penalty >= 1.0)
        and (request.presence_penalty or 0.0) >= 0.0
        and (request.frequency_penalty or 0.0) >= 0.0
    )


def _identical_outputs(trace: RunTrace, x: RequestInfo, y: RequestInfo) -> bool:
    a = trace.end.outputs.get(x.request_id, ())
    b = trace.end.outputs.get(y.request_id, ())
    n = min(len(a), len(b))
    same = n >= MIN_TOKENS_FOR_IDENTITY and a[:n] == b[:n] and _same_setup(x, y)
    return same and broad(x)


def _family(x: RequestInfo, y: RequestInfo) -> bool:
    """Whether two requests are children of one request's ``n`` (or it and its child)."""
    return (x.parent or x.request_id) == (y.parent or y.request_id)


def _parent_seed(trace: RunTrace, child: RequestInfo) -> int | None:
    """The seed of the request whose ``n`` a child belongs to (its own, for the parent)."""
    if child.parent is None:
        return child.seed
    try:
        return trace.request(child.parent).seed
    except KeyError:
        return None


def _scenario_requests(trace: RunTrace) -> list[RequestInfo]:
    return [r for r in trace.header.requests if r.phase == "scenario"]


def _label(request: RequestInfo) -> str:
    return (
        request.request_id
        if request.seed is None
        else f"{request.request_id} (seed {fmt_seed(request.seed)})"
    )


IDENTICAL_DESPITE_STATES = "though their recorded states differ"
"""How a problem seen in tokens only (not in recorded states) ends; attribution reads it."""


def _shared_stream(
    index: _StreamIndex,
    x: RequestInfo,
    y: RequestInfo,
    shared: list[tuple[Located, Located]],
    contract: RngContract,
) -> tuple[str, list[Suspect]] | None:
    """Why two requests that must not share random numbers did (None: they did not)."""
    trace = index.trace
    identical = _identical_outputs(trace, x, y)
    if shared and _family(x, y) and shared[0][0][0].seed == _parent_seed(trace, x):
        (a, _, _), _ = shared[0]
        problem = (
            f"{_label(x)} and {_label(y)}, children of one request's n, both drew from seed "
            f"{fmt_seed(a.seed)}, subsequence {a.subsequence}, offset {a.offset} "
            f"({plural(len(shared), 'event')})"
        )
        why = (
            f"{x.request_id} and {y.request_id} are children of one request: each must sample "
            "under a seed of its own, yet they shared states"
        )
        return problem, [Suspect("children-shared-stream", why)]
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
        if a.offset == 0 and len({e.seed for e, _, _ in index.events[x.request_id]}) > 1:
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
            f"{IDENTICAL_DESPITE_STATES}"
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
    # Counted, not listed: the pairs themselves are quadratic in requests.
    by_seed = Counter(r.seed for r in seeded)
    pairs = (len(seeded) * (len(seeded) - 1) - sum(n * (n - 1) for n in by_seed.values())) // 2
    if not pairs or trace.failed:
        return
    unrecorded = sorted({r.request_id for r in seeded} & set(sampled_without_events(trace)))
    if unrecorded:
        why = unrecorded_reason(trace, unrecorded)
        yield Finding(status="skip", message=f"{why}; their streams cannot be compared")
        return
    index = _StreamIndex(trace, seeded)
    problems = _PairFindings()
    for x, y, shares_state in index.candidate_pairs(seeded):
        if x.seed == y.seed or not (shares_state or _identical_outputs(trace, x, y)):
            continue
        found = None
        if problems.wants(x, y, shares_state):
            shared = index.shared_events(x.request_id, y.request_id) if shares_state else []
            found = _shared_stream(index, x, y, shared, ctx.contract)
        problems.add(x, y, shares_state, found)
    if not problems.count:
        yield Finding(
            status="pass",
            message=f"{trace.name}: {plural(pairs, 'pair')} of differently seeded requests drew from "
            "different streams",
            runs=(trace.name,),
        )
        return
    yield Finding(
        status="fail",
        message=f"{trace.name}: {plural(problems.count, 'pair')} of differently seeded requests "
        f"share random numbers{_described(problems)}",
        runs=(trace.name,),
        requests=tuple(sorted(problems.affected)),
        suspects=merge(problems.suspects),
        details=tuple(problems.details),
    )


def _described(problems: _PairFindings) -> str:
    """What a message adds when it describes only some of its pairs."""
    if not problems.untold:
        return ""
    return f" ({len(problems.details)} of them described)"


UNSEEDED_INDEPENDENCE = "unseeded-independence"
"""The check's id, written once: registered with it, and looked up in the contract's limitations."""


@run_check(
    UNSEEDED_INDEPENDENCE,
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
    if len(unseeded) < 2 or trace.failed:
        return
    unrecorded = sorted({r.request_id for r in unseeded} & set(sampled_without_events(trace)))
    if unrecorded:
        why = unrecorded_reason(trace, unrecorded)
        yield Finding(status="skip", message=f"{why}; their streams cannot be compared")
        return
    contract = ctx.contract
    limitation = contract.limitation_for(UNSEEDED_INDEPENDENCE)
    problems = _PairFindings()
    excused: list[str] = []
    excused_pairs = 0
    max_draft_len = ctx.max_draft_len(trace)
    index = _StreamIndex(trace, unseeded)
    for x, y, shares_state in index.candidate_pairs(unseeded):
        # The events they share: for the contract's excuse, or to describe the pair.
        shared: list[tuple[Located, Located]] | None = None
        if limitation is not None and shares_state:
            shared = index.shared_events(x.request_id, y.request_id)
            if all(
                follows_contract(state, None, contract, max_draft_len)
                for pair in shared
                for state, _, _ in pair
            ):
                excused_pairs += 1
                if len(excused) < DETAILED_PAIRS:
                    excused.append(
                        f"{x.request_id} and {y.request_id} share {len(shared)} (seed, "
                        "subsequence, offset) states, as the contract lays them out"
                    )
                continue
        if not (shares_state or _identical_outputs(trace, x, y)):
            continue
        found = None
        if problems.wants(x, y, shares_state):
            if shared is None:
                shared = index.shared_events(x.request_id, y.request_id) if shares_state else []
            found = _shared_stream(index, x, y, shared, contract)
        problems.add(x, y, shares_state, found)
    if limitation is not None and not problems.count:
        seen = (
            f"{plural(excused_pairs, 'pair shares', 'pairs share')} a stream"
            if excused_pairs
            else "no shared stream"
        )
        yield Finding(
            status="known-limitation",
            message=f"{trace.name}: {seen}; {contract.name} does not give unseeded requests "
            "streams of their own",
            runs=(trace.name,),
            limitation=limitation.quoted,
            details=tuple(excused),
        )
        return
    if not problems.count:
        yield Finding(
            status="pass",
            message=f"{trace.name}: {len(unseeded)} unseeded requests drew from streams of "
            "their own",
            runs=(trace.name,),
        )
        return
    yield Finding(
        status="fail",
        message=f"{trace.name}: {plural(problems.count, 'pair')} of unseeded requests share "
        f"random numbers{_described(problems)}",
        runs=(trace.name,),
        requests=tuple(sorted(problems.affected)),
        suspects=merge(problems.suspects)
        or (
            Suspect(
                "unseeded-shared-stream",
                "unseeded requests were given the same (seed, subsequence, offset) stream",
            ),
        ),
        details=tuple(problems.details),
    )
