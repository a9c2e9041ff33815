"""Comparison checks: a request's tokens must not change with how it was served.

Each check compares the runs a scenario names under ``expect`` (each to the first) and yields
one finding per expectation, with a diff per diverging request. Each states beside it the
suspects a divergence seen in tokens only points at (``token_suspects=``); the id it is known
by comes from the expectation, as the runner stamps it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from specseed.checks.context import CheckContext
from specseed.checks.findings import ATTRIBUTION_TEXT, Finding, Margin, Suspect, TokenDiff
from specseed.checks.near_ties import measure
from specseed.checks.registry import comparison_check, comparison_checks
from specseed.checks.suspects import divergence_suspects, merge, sampler_suspects
from specseed.checks.token_suspects import TokenDivergence, token_suspects
from specseed.checks.trace_evidence import stream_diff
from specseed.core.contracts import RngContract
from specseed.core.wording import plural
from specseed.scenarios.schema import Expectation
from specseed.traces.records import RequestInfo, RunTrace

RequestFilter = Callable[[RequestInfo], bool]


def _seeded_or_greedy(info: RequestInfo) -> bool:
    return info.seed is not None or info.temperature == 0.0


def _any(_: RequestInfo) -> bool:
    return True


def _greedy(info: RequestInfo) -> bool:
    return info.temperature == 0.0


def _excused_by_row(diff: TokenDiff, contract: RngContract, check_id: str) -> bool:
    """True when the divergence is exactly what a row-subsequence contract allows."""
    if contract.limitation_for(check_id, "row-subsequence") is None:
        return False
    if diff.attribution != "rng-state" or diff.first_state_difference is None:
        return False
    a, b = diff.first_state_difference
    if a is None or b is None:
        return False
    same_event = (a.kind, a.index, a.decoding_iter, a.seed, a.offset) == (
        b.kind,
        b.index,
        b.decoding_iter,
        b.seed,
        b.offset,
    )
    follows_rows = a.subsequence == a.kernel_row and b.subsequence == b.kernel_row
    return same_event and follows_rows and a.subsequence != b.subsequence


def _excused_by_element0(
    diff: TokenDiff, left: RunTrace, right: RunTrace, contract: RngContract, check_id: str
) -> bool:
    """True when a contract states that its kernels read element 0 of the seed tensor and
    the divergence is exactly that: the same recorded state and logits on both sides, and
    row 0 of the kernel call had another seed (the token came from that row's stream)."""
    if contract.limitation_for(check_id, "row0-seed") is None:
        return False
    if diff.attribution != "sampler":
        return False
    return any(s.defect == "row0-seed" for s in sampler_suspects(diff, left, right))


def _rows_moved(left: RunTrace, right: RunTrace, request: str) -> bool:
    """True when a sampled request's events ran at other kernel rows in the two runs."""

    def rows(trace: RunTrace) -> list[int]:
        return [e.subsequence for _, row in trace.rows_of(request) for e in row.events]

    return rows(left) != rows(right)


def _streams(count: int) -> str:
    return plural(count, "request stream changes", "request streams change")


def _compare(
    ctx: CheckContext,
    expectation: Expectation,
    applies: RequestFilter,
    varied: str,
    extra_suspects: Callable[[TokenDiff], list[Suspect]] | None = None,
    note: str = "",
) -> Iterator[Finding]:
    check_id = expectation.check
    rule = comparison_checks()[check_id].token_suspects
    traces = [ctx.traces[run] for run in expectation.runs]
    runs = tuple(expectation.runs)
    broken = [t.name for t in traces if t.failed]
    stopped = [t.name for t in traces if t.end.failure and t.end.failure.exception == "Interrupted"]
    if stopped:
        # Interrupted is not crashed: the comparison is unfinished, not an engine failure.
        yield Finding(
            status="skip",
            message=f"cannot compare {varied}: run {', '.join(stopped)} was interrupted "
            "(unfinished)",
            runs=runs,
        )
        return
    if broken:
        yield Finding(
            status="error",
            message=f"cannot compare {varied}: run {', '.join(broken)} did not complete "
            "(see runs-complete)",
            runs=runs,
        )
        return
    base = traces[0]
    if expectation.requests is not None:
        requests = list(expectation.requests)
    else:
        requests = [
            info.request_id
            for info in base.header.requests
            if info.phase == "scenario"
            and applies(info)
            and all(info.request_id in t.end.outputs for t in traces[1:])
        ]
    if not requests:
        yield Finding(
            status="skip",
            message=f"no request in {', '.join(runs)} that {check_id} applies to{note}",
            runs=runs,
        )
        return
    contract = ctx.contract
    limitation = contract.limitation_for(check_id)
    diffs: list[TokenDiff] = []
    excused: list[TokenDiff] = []
    moved: list[str] = []
    suspects: list[Suspect] = []
    groups: list[tuple[str, tuple[str, ...]]] = []
    held_seeded_change: set[str] = set()
    held_behind_own_seed: set[str] = set()
    near_ties: list[Margin] = []
    for other in traces[1:]:
        for request in requests:
            diff = stream_diff(base, other, request)
            sampled = base.request(request).temperature > 0
            if diff is None:
                if rule is not None and _only_seeds_changed(base, other, requests):
                    held_seeded_change.add(request)
                if rule is not None and _behind_its_own_seed(base, other, request):
                    held_behind_own_seed.add(request)
                if limitation is not None and sampled and _rows_moved(base, other, request):
                    moved.append(request)
                continue
            if _excused_by_row(diff, contract, check_id) or _excused_by_element0(
                diff, base, other, contract, check_id
            ):
                excused.append(diff)
                continue
            margin = measure(diff, base, other)
            if margin is not None:
                diff = replace(diff, margin=margin)
            diffs.append(diff)
            if margin is not None and margin.near_tie:
                near_ties.append(margin)  # the numerics can flip it: no defect blamed
                continue
            if diff.attribution == "tokens-only":
                found = token_suspects(rule, diff, base, other, set(requests))
                suspects.extend(found)
                groups.append((request, tuple(dict.fromkeys(x.defect for x in found))))
                continue
            suspects.extend(divergence_suspects(diff, base, other, contract))
            if extra_suspects is not None:
                suspects.extend(extra_suspects(diff))
    if diffs:
        first = diffs[0]
        how = ATTRIBUTION_TEXT[first.attribution]
        if first.margin is not None:
            how += f"; {first.margin.text()}"
        if len(near_ties) == len(diffs):
            how += " (every divergence is a near-tie: numerics, not a defect)"
        yield Finding(
            status="fail",
            message=f"{_streams(len(diffs))} with {varied}; "
            f"{first.request} first diverges at token {first.position} "
            f"({first.left.run} vs {first.right.run}): {how}",
            runs=runs,
            requests=tuple(dict.fromkeys(d.request for d in diffs)),
            suspects=merge(suspects),
            diffs=tuple(diffs),
            # Only where every diff was seen in tokens alone (state evidence has no groups).
            suspect_groups=(
                _groups(groups, held_seeded_change, held_behind_own_seed)
                if len(groups) == len(diffs) - len(near_ties) and groups
                else ()
            ),
        )
    elif limitation is not None and (excused or moved):
        affected = tuple(dict.fromkeys([d.request for d in excused] + moved))
        by_element0 = [d for d in excused if d.attribution == "sampler"]
        stated = contract.limitation_for(check_id, "row0-seed" if by_element0 else None)
        if by_element0:
            what = (
                f"{plural(len(by_element0), 'stream changes', 'streams change')} with the "
                "seed at kernel row 0"
            )
            how = "reads element 0 of the seed tensor"
        elif excused:
            what = f"{plural(len(excused), 'stream changes', 'streams change')} with the kernel row"
            how = "makes the subsequence the batch row"
        else:
            what, how = "rows moved without changing tokens", "makes the subsequence the batch row"
        yield Finding(
            status="known-limitation",
            message=f"{what} ({', '.join(affected)}); {contract.name} {how}",
            runs=runs,
            requests=affected,
            limitation=(stated or limitation).quoted,
            diffs=tuple(excused),
        )
    else:
        yield Finding(
            status="pass",
            message=f"{plural(len(requests), 'request')} identical across {varied} "
            f"({', '.join(runs)}){note}",
            runs=runs,
            requests=tuple(requests),
        )


def _neighbour_seeds(trace: RunTrace, compared: Sequence[str]) -> tuple[int, ...] | None:
    """The seeds of the sampled neighbours (besides the compared requests); None where one
    of them is unseeded."""
    seeds = [
        info.seed
        for info in trace.header.requests
        if info.phase == "scenario" and info.request_id not in compared and info.temperature > 0
    ]
    known = [seed for seed in seeds if seed is not None]
    return None if len(known) < len(seeds) else tuple(sorted(known))


def _only_seeds_changed(left: RunTrace, right: RunTrace, compared: Sequence[str]) -> bool:
    """Both runs had seeded sampled neighbours only, with other seeds on each side."""
    a, b = _neighbour_seeds(left, compared), _neighbour_seeds(right, compared)
    return bool(a) and bool(b) and a != b


def _sampled_ahead(trace: RunTrace, request: str) -> list[RequestInfo]:
    """The sampled scenario requests listed before ``request`` in a run: the rows ahead of
    it in the batch its requests start in (over HTTP: sent before it)."""
    ahead: list[RequestInfo] = []
    for info in trace.header.requests:
        if info.phase != "scenario":
            continue
        if info.request_id == request:
            return ahead
        if info.temperature > 0:
            ahead.append(info)
    return ahead


def _behind_its_own_seed(base: RunTrace, other: RunTrace, request: str) -> bool:
    """``request`` leads the sampled rows in ``base`` and sits behind sampled requests of its
    own seed only in ``other``: a kernel reading row 0's seed gives it its own seed there, a
    kernel using the row as the subsequence does not (the control that tells them apart)."""
    seed = base.request(request).seed
    ahead = _sampled_ahead(other, request)
    return (
        seed is not None
        and not _sampled_ahead(base, request)
        and bool(ahead)
        and all(info.seed == seed for info in ahead)
    )


def _groups(
    groups: list[tuple[str, tuple[str, ...]]], held: set[str], held_behind_own_seed: set[str]
) -> tuple[tuple[str, ...], ...]:
    """Each token-only divergence's defects, less row0-seed for a request whose tokens held
    while only seeded neighbours changed (a kernel reading another row's seed would not),
    and less row-subsequence for one whose tokens held behind requests of its own seed (a
    kernel using the row as the subsequence would not)."""
    out = []
    for request, defects in groups:
        kept = tuple(
            d
            for d in defects
            if not (d == "row0-seed" and request in held)
            and not (d == "row-subsequence" and request in held_behind_own_seed)
        )
        if kept:
            out.append(kept)
    return tuple(dict.fromkeys(out))


def _batched_with_others(d: TokenDivergence) -> list[Suspect]:
    """On a server that batches by timing (not restarted between runs), a seeded request
    served beside other sampled requests may change with which of them shared its steps,
    and in which rows, however identical the traffic sent: the defects that make a stream
    follow its neighbours fit too. Tokens cannot tell them from an ignored seed."""
    if d.left.header.fresh_engine and d.right.header.fresh_engine:
        return []
    if not (d.sampled_neighbours(d.left) or d.sampled_neighbours(d.right)):
        return []
    found = [
        Suspect(
            "row0-seed",
            f"{d.what} differs at {d.where} and shared the server with other sampled "
            "requests: its draws may follow the seed of whichever sat in row 0",
        )
    ]
    if d.unseeded_neighbours(d.left) or d.unseeded_neighbours(d.right):
        found.append(
            Suspect(
                "neighbor-unseeded",
                f"{d.what} differs at {d.where} and shared the server with an unseeded "
                "request: its seed may have been dropped for the engine's",
            )
        )
    return found


def _seed_not_deciding(d: TokenDivergence) -> list[Suspect]:
    if not d.seeded:
        return []
    return [
        Suspect(
            "engine-counter",
            f"{d.what} differs at {d.where} between two identical runs: its seed does not "
            "decide its stream (the engine ignores it, or a proxy drops it)",
        ),
        *_batched_with_others(d),
    ]


@comparison_check(
    "run-to-run",
    short="repeat",
    title="Run-to-run equality",
    description="Serving the same requests the same way twice, each on a fresh engine, gives "
    "identical tokens for every request, seeded or not (on an engine not restarted between "
    "runs, such as a server: every seeded and greedy request).",
    targets=(),
    token_suspects=_seed_not_deciding,
)
def run_to_run(ctx: CheckContext, expectation: Expectation) -> Iterator[Finding]:
    traces = [ctx.traces[run] for run in expectation.runs if run in ctx.traces]
    if all(t.header.fresh_engine for t in traces):
        yield from _compare(ctx, expectation, _any, "a second identical run")
        return
    # Without a restart between runs, unseeded requests draw from wherever the engine's
    # own stream has got to; only seeded and greedy ones must repeat.
    note = "; unseeded requests not compared: the engine was not restarted between runs"
    yield from _compare(ctx, expectation, _seeded_or_greedy, "a second identical run", note=note)


def _stream_follows_uptime(d: TokenDivergence) -> list[Suspect]:
    return [
        Suspect(
            "engine-counter",
            f"{d.what} differs at {d.where} after earlier traffic: the stream depends on how "
            "much the engine served before",
        ),
        *(_batched_with_others(d) if d.seeded else []),
    ]


@comparison_check(
    "uptime-invariance",
    short="uptime",
    title="Uptime invariance",
    description="A seeded or greedy request's tokens do not depend on the traffic the engine "
    "served before it (warmup batches, earlier requests).",
    targets=("engine-counter",),
    token_suspects=_stream_follows_uptime,
)
def uptime_invariance(ctx: CheckContext, expectation: Expectation) -> Iterator[Finding]:
    yield from _compare(ctx, expectation, _seeded_or_greedy, "engine uptime")


def _stream_follows_neighbours(d: TokenDivergence) -> list[Suspect]:
    if not d.seeded:
        return []
    if d.unseeded_neighbours(d.left) != d.unseeded_neighbours(d.right):
        # A kernel reading another row's seed also changes with any neighbour; a comparison
        # where only seeded neighbours changed and the tokens held rules that out (_compare).
        return [
            Suspect(
                "neighbor-unseeded",
                f"{d.what} differs at {d.where}, and only one side had an unseeded neighbour",
            ),
            Suspect(
                "row0-seed",
                f"{d.what} differs at {d.where} when its neighbours changed: its draws may "
                "follow another row's seed",
            ),
        ]
    return [
        Suspect(
            "row0-seed",
            f"{d.what} differs at {d.where} when only its neighbours changed: its draws "
            "follow another row's seed",
        )
    ]


@comparison_check(
    "batch-invariance",
    short="batch",
    title="Batch-composition invariance",
    description="A seeded or greedy request's tokens do not depend on which other requests "
    "share its batch (seeded, unseeded, greedy neighbours) when its own row is unchanged.",
    targets=("row0-seed", "neighbor-unseeded", "engine-counter"),
    token_suspects=_stream_follows_neighbours,
)
def batch_invariance(ctx: CheckContext, expectation: Expectation) -> Iterator[Finding]:
    yield from _compare(ctx, expectation, _seeded_or_greedy, "batch composition")


def _stream_follows_row(d: TokenDivergence) -> list[Suspect]:
    if not d.seeded:
        return []
    found = [
        Suspect("row-subsequence", f"{d.what} differs at {d.where} when only its batch row changed")
    ]
    ahead = [
        info
        for trace in (d.left, d.right)
        for info in _sampled_ahead(trace, d.diff.request)
        if info.seed != d.request.seed
    ]
    if ahead:
        # Behind a request of another seed, a kernel reading row 0's seed changes it too.
        found.append(
            Suspect(
                "row0-seed",
                f"{d.what} differs at {d.where} behind {ahead[0].request_id} (seed "
                f"{ahead[0].seed}): its draws may follow row 0's seed",
            )
        )
    return found


@comparison_check(
    "position-invariance",
    short="position",
    title="Batch-position invariance",
    description="A seeded or greedy request's tokens do not depend on its row in the batch.",
    targets=("row-subsequence",),
    token_suspects=_stream_follows_row,
)
def position_invariance(ctx: CheckContext, expectation: Expectation) -> Iterator[Finding]:
    yield from _compare(ctx, expectation, _seeded_or_greedy, "batch position")


def _stream_follows_overlap(d: TokenDivergence) -> list[Suspect]:
    if not d.seeded:
        return []
    return [
        Suspect(
            "overlap-window-reuse", f"{d.what} differs at {d.where} with the overlap scheduler on"
        )
    ]


@comparison_check(
    "overlap-invariance",
    short="overlap",
    title="Overlap-scheduler invariance",
    description="A seeded or greedy request's tokens are the same with the overlap scheduler "
    "on and off.",
    targets=("overlap-window-reuse",),
    token_suspects=_stream_follows_overlap,
)
def overlap_invariance(ctx: CheckContext, expectation: Expectation) -> Iterator[Finding]:
    yield from _compare(ctx, expectation, _seeded_or_greedy, "the overlap scheduler")


def _greedy_drift(diff: TokenDiff) -> list[Suspect]:
    if diff.attribution in ("logits", "rng-state-and-logits"):
        return [
            Suspect(
                "greedy-drift",
                f"{diff.request}: the target logits behind token {diff.position} differ "
                f"({diff.left.logits_fingerprint} in {diff.left.run}, "
                f"{diff.right.logits_fingerprint} in {diff.right.run}): verification does not "
                "compute what plain decoding computes",
            )
        ]
    return [
        Suspect(
            "greedy-drift",
            f"{diff.request}: greedy tokens differ at {diff.position} with the same logits: "
            "verification accepted or emitted the wrong token",
        )
    ]


def _greedy_differs(d: TokenDivergence) -> list[Suspect]:
    return [
        Suspect(
            "greedy-drift",
            f"{d.diff.request} (greedy) differs at {d.where} with and without speculation",
        )
    ]


@comparison_check(
    "greedy-spec-equivalence",
    short="greedy",
    title="Greedy speculative = greedy non-speculative",
    description="Greedy requests produce the same tokens with speculation (any verification "
    "mode) as with max_draft_len 0.",
    targets=("greedy-drift",),
    token_suspects=_greedy_differs,
)
def greedy_spec_equivalence(ctx: CheckContext, expectation: Expectation) -> Iterator[Finding]:
    traces = [ctx.traces[run] for run in expectation.runs]
    if traces and not any(t.header.engine_config.max_draft_len > 0 for t in traces):
        # Equal outputs of runs that all decode without drafts say nothing of speculation.
        yield Finding(
            status="skip",
            message=f"no run of {', '.join(expectation.runs)} speculates (max_draft_len 0 in "
            "each): nothing to compare speculation with",
            runs=tuple(expectation.runs),
        )
        return
    yield from _compare(
        ctx,
        expectation,
        _greedy,
        "speculation",
        extra_suspects=_greedy_drift,
    )
