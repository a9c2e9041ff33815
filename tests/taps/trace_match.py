"""Match a tap's kernel rows to an engine trace's sampling events, one to one."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from specseed.taps.flashinfer_tap import FlashinferTap, TapRow
from specseed.traces.records import RunTrace

Event = tuple[str, int, int, int, int, tuple[int, ...] | None]
"""(kernel, seed, subsequence, offset, draws, tokens or None where the trace cannot say)."""


def trace_events(trace: RunTrace) -> Iterator[Event]:
    """Every kernel row the engine's trace records (argmax rows launch no kernel)."""
    for step in trace.steps:
        for row in step.rows:
            for event in row.events:
                if event.kernel == "argmax":
                    continue
                tokens: tuple[int, ...] | None = None
                if not row.discarded:
                    if event.kind == "draft":
                        tokens = (row.drafts_proposed[event.index],)
                    elif event.kind == "accept":
                        tokens = row.emitted
                    elif event.index < len(row.emitted):
                        tokens = (row.emitted[event.index],)
                yield (
                    event.kernel,
                    event.seed,
                    event.subsequence,
                    event.offset,
                    event.draws,
                    tokens,
                )


def _same(want: Event, function: str, row: TapRow, *, given: bool) -> bool:
    kernel, seed, subsequence, offset, draws, tokens = want
    seen = (row.seed_given, row.offset_given) if given else (row.seed, row.offset)
    return (
        function == kernel
        and seen == (seed, offset)
        and row.subsequence == subsequence
        and (row.draws is None or row.draws == draws)
        # A request that reaches max_tokens keeps only a prefix of what the kernel emitted.
        and (tokens is None or (bool(tokens) and row.tokens[: len(tokens)] == tokens))
    )


def unmatched(tap: FlashinferTap, traces: Sequence[RunTrace]) -> tuple[list[Event], int]:
    """(trace events no tap row accounts for, tap rows left over), under the matching that
    accounts for the most events: a tap row that would fit several events (one run's draws
    beside another's on the same seed and offset, a discarded row whose tokens the trace
    cannot say) is not taken by the first event that fits, if another needs it.

    A tap row's state is the one the kernel used; where a release reads only element 0
    (``call.element0``) the engine's trace holds what it asked for, which the tap records as
    ``seed_given``/``offset_given``: those rows are matched on that.
    """
    rows = [(call.function, row, call.element0) for call, row in tap.rows()]
    events = [want for trace in traces for want in trace_events(trace)]
    fits = [
        [
            i
            for i, (function, row, given) in enumerate(rows)
            if _same(want, function, row, given=given)
        ]
        for want in events
    ]
    owner: dict[int, int] = {}  # tap row -> event

    def assign(event: int, seen: set[int]) -> bool:  # an augmenting path (Kuhn's algorithm)
        for i in fits[event]:
            if i not in seen:
                seen.add(i)
                if i not in owner or assign(owner[i], seen):
                    owner[i] = event
                    return True
        return False

    missing = [want for event, want in enumerate(events) if not assign(event, set())]
    return missing, len(rows) - len(owner)
