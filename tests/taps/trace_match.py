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
    """(trace events no tap row accounts for, tap rows left over).

    A tap row's state is the one the kernel used; where a release reads only element 0
    (``call.element0``) the engine's trace holds what it asked for, which the tap records as
    ``seed_given``/``offset_given``: those rows are matched on that.
    """
    rows = [(call.function, row, call.element0) for call, row in tap.rows()]
    left = list(range(len(rows)))
    missing: list[Event] = []
    for trace in traces:
        for want in trace_events(trace):
            hit = next(
                (i for i in left if _same(want, rows[i][0], rows[i][1], given=rows[i][2])),
                None,
            )
            if hit is None:
                missing.append(want)
            else:
                left.remove(hit)
    return missing, len(left)
