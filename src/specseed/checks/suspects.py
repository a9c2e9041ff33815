"""From evidence to suspects: which known defect classes fit what a check saw.

Each rule reads recorded states only (never engine internals) and returns a ``Suspect`` with
one line of why, so that users read the most likely cause first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from specseed.checks.findings import FAILING, EventState, Finding, Suspect, TokenDiff
from specseed.core.contracts import DEFAULT_SAMPLING_SEED, RngContract
from specseed.core.seeds import fmt_seed
from specseed.traces.records import RequestInfo, RunTrace, SamplingEvent, StepRecord


def merge(suspects: Iterable[Suspect]) -> tuple[Suspect, ...]:
    """Suspects without repeats (first reason kept), in order of first appearance."""
    seen: dict[str, Suspect] = {}
    for suspect in suspects:
        seen.setdefault(suspect.defect, suspect)
    return tuple(seen.values())


AnyEvent = SamplingEvent | EventState
"""Rules read only the fields both records share (kind, index, seed, offset, kernel row)."""


def _call_key(event: AnyEvent) -> tuple[str, int]:
    """Events of one step with the same key ran in one kernel call."""
    return (event.kind, event.index if event.kind == "draft" else 0)


def call_row0(trace: RunTrace, step: StepRecord, event: AnyEvent) -> tuple[str, int] | None:
    """(request id, seed) at kernel row 0 of the call that ran ``event`` in ``step``."""
    call = _calls(trace, step).get(_call_key(event))
    return None if call is None else call.row0


def unseeded_in_call(trace: RunTrace, step: StepRecord, event: AnyEvent) -> list[tuple[str, int]]:
    """Unseeded requests (id, recorded seed) that ran in the same kernel call as ``event``."""
    call = _calls(trace, step).get(_call_key(event))
    return [] if call is None else list(call.unseeded)


@dataclass
class _Call:
    """What the rules ask of one kernel call of a step."""

    row0: tuple[str, int] | None = None
    """(request id, seed) of its first event at kernel row 0."""
    unseeded: list[tuple[str, int]] = field(default_factory=list)
    """(request id, seed) of its events on unseeded requests, in row order."""


def _calls(trace: RunTrace, step: StepRecord) -> dict[tuple[str, int], _Call]:
    """The step's kernel calls by key, indexed once per trace and step: a check asks once per
    pair of requests that shared a stream, and scanning the step's rows each time made the
    check quadratic in rows (300 rows whose streams are all shared: seconds per audit)."""
    # Keyed by identity; the step is kept beside its index, so a step that is not the
    # trace's own (whose id a later object may reuse) never reads another step's index.
    held, calls = trace.derived(
        ("kernel-calls", id(step)), lambda: (step, _index_calls(trace, step))
    )
    return calls if held is step else _index_calls(trace, step)


def _index_calls(trace: RunTrace, step: StepRecord) -> dict[tuple[str, int], _Call]:
    calls: dict[tuple[str, int], _Call] = {}
    for row in step.rows:
        info = _info(trace, row.request_id)
        unseeded = info is None or info.seed is None
        for event in row.events:
            call = calls.setdefault(_call_key(event), _Call())
            if event.kernel_row == 0 and call.row0 is None:
                call.row0 = (row.request_id, event.seed)
            if unseeded:
                call.unseeded.append((row.request_id, event.seed))
    return calls


def _info(trace: RunTrace, request_id: str) -> RequestInfo | None:
    try:
        return trace.request(request_id)
    except KeyError:
        return None


def children_suspect(trace: RunTrace, request_id: str, seed: int) -> Suspect | None:
    """A child of ``n`` (``<request>#i``) that sampled under its parent's seed instead of its
    own (seed + i): the children share one stream."""
    try:
        info = trace.request(request_id)
    except KeyError:
        return None
    if info.parent is None:
        return None
    try:
        parent = trace.request(info.parent)
    except KeyError:
        return None
    if parent.seed is None or info.seed is None or seed != parent.seed or info.seed == seed:
        return None
    return Suspect(
        "children-shared-stream",
        f"{request_id}, a child of {info.parent} (n {parent.n}), sampled with seed "
        f"{fmt_seed(seed)}, its parent's, not its own {fmt_seed(info.seed)}",
    )


def seed_suspects(
    trace: RunTrace,
    step: StepRecord,
    request_id: str,
    event: AnyEvent,
    request_seed: int | None,
    contract: RngContract,
) -> list[Suspect]:
    """Why a request's event carries a seed other than the contract's."""
    family = children_suspect(trace, request_id, event.seed)
    if family is not None:
        return [family]
    suspects: list[Suspect] = []
    # An engine-wide counter gives every row of a call one seed at offset 0, so it fits any
    # wrong seed read at offset 0; the other rules name what else fits, and attribution
    # keeps the hypothesis that explains every finding.
    counter = (
        Suspect(
            "engine-counter",
            f"{request_id} sampled with seed {fmt_seed(event.seed)} at offset 0: a seed that "
            "comes from the engine, not the request",
        )
        if event.offset == 0
        else None
    )
    if request_seed is None:
        if event.seed == DEFAULT_SAMPLING_SEED and contract.unseeded == "unique-seed":
            suspects.append(
                Suspect(
                    "unseeded-shared-stream",
                    f"unseeded request {request_id} sampled with the default seed "
                    f"{DEFAULT_SAMPLING_SEED}, which every unseeded request shares",
                )
            )
        elif contract.unseeded == "unique-seed":
            others = [
                rid
                for rid, seed in unseeded_in_call(trace, step, event)
                if rid != request_id and seed == event.seed
            ]
            if others:
                suspects.append(
                    Suspect(
                        "neighbor-unseeded",
                        f"unseeded request {request_id} sampled with the seed of unseeded "
                        f"request {others[0]} in the same kernel call: one stream for the call",
                    )
                )
        if counter is not None and event.seed != DEFAULT_SAMPLING_SEED:
            suspects.append(counter)
        return suspects
    low = request_seed & ((1 << 32) - 1)
    if event.seed == low != request_seed & ((1 << 64) - 1):
        # The seed asked for, less its high 32 bits: no other explanation gives exactly that.
        return [
            Suspect(
                "seed-high-bits-dropped",
                f"{request_id} asked for seed {fmt_seed(request_seed)} but sampled with seed "
                f"{fmt_seed(event.seed)}: its low 32 bits only",
            )
        ]
    neighbours = [
        (rid, seed) for rid, seed in unseeded_in_call(trace, step, event) if rid != request_id
    ]
    if any(seed == event.seed for _, seed in neighbours):
        rid = next(r for r, seed in neighbours if seed == event.seed)
        suspects.append(
            Suspect(
                "neighbor-unseeded",
                f"{request_id} asked for seed {fmt_seed(request_seed)} but sampled with seed {fmt_seed(event.seed)}, "
                f"the engine's seed of unseeded request {rid} in the same kernel call",
            )
        )
    row0 = call_row0(trace, step, event)
    if not suspects and row0 is not None and row0[0] != request_id and row0[1] == event.seed:
        suspects.append(
            Suspect(
                "row0-seed",
                f"{request_id} asked for seed {fmt_seed(request_seed)} but sampled with seed "
                f"{fmt_seed(event.seed)}, the seed of {row0[0]} at kernel row 0 of the same call",
            )
        )
    if counter is not None:
        suspects.append(
            Suspect(
                "engine-counter",
                f"{request_id} asked for seed {fmt_seed(request_seed)} but sampled with seed "
                f"{fmt_seed(event.seed)} at offset 0: the seed comes from the engine, not the "
                "request",
            )
        )
    # A wrong seed that fits none of these gets no catalogue name: the finding is named by
    # its evidence (attribution), not stretched onto a defect it does not show.
    return suspects


def offset_suspects(
    event: AnyEvent,
    decoding_iter: int,
    contract: RngContract,
    max_draft_len: int,
) -> list[Suspect]:
    """Why an event's offset differs from the contract's prediction."""
    suspects: list[Suspect] = []
    stale = (
        contract.offset(decoding_iter - 1, event.kind, event.index, max_draft_len)
        if decoding_iter > 0
        else None
    )
    if stale is not None and event.offset == stale:
        suspects.append(
            Suspect(
                "overlap-window-reuse",
                f"iteration {decoding_iter} sampled at offset {event.offset}, the window of "
                f"iteration {decoding_iter - 1}: the iteration count read was one behind",
            )
        )
    if event.kind == "draft" and event.index > 0:
        first = contract.offset(decoding_iter, "draft", 0, max_draft_len)
        if event.offset == first:
            suspects.append(
                Suspect(
                    "draft-shared-offset",
                    f"draft step {event.index} sampled at offset {event.offset}, the offset of "
                    "draft step 0",
                )
            )
    if contract.slot_stride > 1:
        narrow = replace(contract, slot_stride=1)
        if event.offset == narrow.offset(decoding_iter, event.kind, event.index, max_draft_len):
            suspects.append(
                Suspect(
                    "draw-overlap",
                    f"offset {event.offset} puts the slots of an iteration one draw apart, so "
                    "a kernel that draws more than once reads into the next slot",
                )
            )
    return suspects


def overlap_suspect(
    first: EventState,
    second: EventState,
    request_seed: int | None,
    contract: RngContract | None = None,
    max_draft_len: int = 0,
) -> Suspect:
    """The defect that best explains two overlapping draw ranges of one request."""
    if contract is not None and contract.offsets == "window":
        # Draft step i drawing where the next iteration's accept kernel reads its uniform i:
        # the accept test reuses the draft's number, and the draft steps, one draw apart,
        # run into each other as well.
        for draft in (first, second):
            if draft.kind != "draft":
                continue
            accept = contract.offset(draft.decoding_iter + 1, "accept", 0, max_draft_len)
            if accept is not None and draft.offset == accept + draft.index:
                return Suspect(
                    "accept-reuses-draft-draw",
                    f"draft[{draft.index}] of iteration {draft.decoding_iter} draws at offset "
                    f"{draft.offset}, where the accept test of iteration "
                    f"{draft.decoding_iter + 1} reads its uniform {draft.index}",
                )
    # Seeds are compared as the uint64 a kernel reads (a request may ask for -4873).
    asked = None if request_seed is None else request_seed & ((1 << 64) - 1)
    if asked is not None and first.seed != asked and first.offset == 0:
        return Suspect(
            "engine-counter",
            f"{first.label()} and {second.label()} both read seed {fmt_seed(first.seed)} from offset 0, "
            f"not the request's seed {fmt_seed(asked)}: an engine-wide seed, offset always 0",
        )
    pair = {first.kind: first, second.kind: second}
    if set(pair) == {"accept", "draft"}:
        drafted, accepting = pair["draft"], pair["accept"]
        if (
            accepting.decoding_iter == drafted.decoding_iter + 1
            and drafted.offset == accepting.offset + drafted.index
        ):
            return Suspect(
                "accept-reuses-draft-draw",
                f"draft[{drafted.index}] of iteration {drafted.decoding_iter} draws at offset "
                f"{drafted.offset}, the number the accept test of iteration "
                f"{accepting.decoding_iter} reads for that draft",
            )
    if (
        first.kind == second.kind == "draft"
        and first.decoding_iter == second.decoding_iter
        and first.offset == second.offset
    ):
        return Suspect(
            "draft-shared-offset",
            f"draft steps {first.index} and {second.index} of iteration {first.decoding_iter} "
            f"read the same offset {first.offset}",
        )
    if (
        first.decoding_iter != second.decoding_iter
        and first.kind == second.kind
        and first.index == second.index
        and first.offset == second.offset
    ):
        return Suspect(
            "overlap-window-reuse",
            f"iterations {first.decoding_iter} and {second.decoding_iter} read the same window "
            f"(offset {first.offset})",
        )
    return Suspect(
        "draw-overlap",
        f"{first.label()} at iteration {first.decoding_iter} reads offsets "
        f"{first.offset}..{first.offset + first.draws - 1}, into {second.label()} at "
        f"{second.offset}",
    )


def divergence_suspects(
    diff: TokenDiff,
    left: RunTrace,
    right: RunTrace,
    contract: RngContract,
) -> list[Suspect]:
    """Defects that fit the first divergence of a request between two runs."""
    suspects: list[Suspect] = []
    request_seed = left.request(diff.request).seed if _info(left, diff.request) else None
    pairs: list[tuple[EventState, EventState]]
    first = diff.first_state_difference
    if first is not None and first[0] is not None and first[1] is not None:
        pairs = [(first[0], first[1])]
    else:
        left_events = {(e.kind, e.index): e for e in diff.left.events}
        right_events = {(e.kind, e.index): e for e in diff.right.events}
        keys = sorted(set(left_events) & set(right_events))
        pairs = [(left_events[k], right_events[k]) for k in keys]
    for a, b in pairs:
        if a.seed != b.seed:
            odd = [
                e
                for e in (a, b)
                if request_seed is not None and e.seed != request_seed & ((1 << 64) - 1)
            ]
            for e in odd:
                trace = left if e is a else right
                step = _step(trace, e.step)
                if step is not None:
                    suspects.extend(
                        seed_suspects(trace, step, diff.request, e, request_seed, contract)
                    )
            if not odd:
                suspects.append(
                    Suspect(
                        "engine-counter",
                        f"{a.label()} sampled with seed {fmt_seed(a.seed)} in {diff.left.run} and "
                        f"{fmt_seed(b.seed)} in {diff.right.run}",
                    )
                )
        if a.subsequence != b.subsequence:
            suspects.append(
                Suspect(
                    "row-subsequence",
                    f"{a.label()} used subsequence {a.subsequence} (kernel row {a.kernel_row}) "
                    f"in {diff.left.run} and {b.subsequence} (kernel row {b.kernel_row}) in "
                    f"{diff.right.run}",
                )
            )
        if a.offset != b.offset:
            for e, trace in ((a, left), (b, right)):
                suspects.extend(
                    offset_suspects(e, e.decoding_iter, contract, _max_draft_len(trace))
                )
    if diff.attribution == "sampler":
        suspects.extend(sampler_suspects(diff, left, right))
    return suspects


def sampler_suspects(diff: TokenDiff, left: RunTrace, right: RunTrace) -> list[Suspect]:
    """Same recorded state and logits, different token: the kernel read another row's state."""
    found: list[Suspect] = []
    for side, trace in ((diff.left, left), (diff.right, right)):
        for event in side.events:
            if event.kernel_row == 0:
                continue
            step = _step(trace, event.step)
            row0 = call_row0(trace, step, event) if step is not None else None
            if row0 is not None and row0[1] != event.seed:
                found.append(
                    Suspect(
                        "row0-seed",
                        f"in {side.run}, {event.label()} sat at kernel row {event.kernel_row} "
                        f"with seed {fmt_seed(event.seed)}; row 0 of that call ({row0[0]}) had seed "
                        f"{fmt_seed(row0[1])}: a kernel reading element 0 draws from that seed",
                    )
                )
                return found
    # Same state and logits, different token, and no other row's seed to blame: no defect
    # of the catalogue shows this; attribution names it by its evidence.
    return found


def _step(trace: RunTrace, number: int) -> StepRecord | None:
    for step in trace.steps:
        if step.step == number:
            return step
    return None


def _max_draft_len(trace: RunTrace) -> int:
    return trace.header.engine_config.max_draft_len


def with_departures(finding: Finding, contract: RngContract) -> Finding:
    """A failing finding whose suspects include a departure of the contract's layout (an
    upstream bug it carries, not a limitation its authors stated): each such suspect says
    so and names upstream's report or fix."""
    if finding.status not in FAILING or not contract.departures:
        return finding
    suspects = []
    for suspect in finding.suspects:
        departure = contract.departure_for(suspect.defect)
        if departure is not None and departure.upstream not in suspect.why:
            suspect = Suspect(suspect.defect, f"{suspect.why} ({contract.name}: {departure.note})")
        suspects.append(suspect)
    return replace(finding, suspects=tuple(suspects))
