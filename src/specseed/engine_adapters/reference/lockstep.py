"""Forward calls as the one thing an engine run asks of its models, and who answers them.

An engine run's step loop is a generator (a *program*): wherever it needs a forward of the
target or the draft head it yields a :class:`ForwardCall` and receives that call's outputs,
one per chunk, in order; an exception the call raised is thrown in at the same point.
Everything else a run does (scheduling, RNG bookkeeping, sampling, trace records) stays in
the run and happens between its calls.

- :func:`serve_alone` answers a program's calls one by one: the run as a plain loop.
- :func:`serve_side_by_side` runs several programs in lockstep: each round, the calls the
  programs are waiting on are answered with one forward per model, the chunks of every
  program that asks that model concatenated in program order. The models' numerics do not
  depend on batch composition (``numerics``: a chunk's outputs are bit for bit the same in
  any batch, at any row), so every run records exactly what it records alone; only the
  number of forward calls drops. That number is what costs on a small model: a forward's
  fixed cost (one torch op after another) is several times a row's.

Runs stay independent in everything else: each has its own RNG state, caches, recorder
and failure. A program that raises ends with that exception; the others go on. A merged
forward that raises (one run's chunks are bad: a cache beyond its capacity) is answered
again call by call, so the exception reaches the run whose chunks raised it, and the
others get their outputs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Forwards(Protocol):
    """A model that answers a list of chunks with a list of outputs, one per chunk."""

    def forward(self, chunks: Sequence[Any]) -> list[Any]: ...


@dataclass(frozen=True, eq=False)
class ForwardCall:
    """One forward a run needs: ``model.forward(chunks)``."""

    model: Forwards
    chunks: Sequence[Any]


Program = Generator[ForwardCall, list[Any], T]
"""A run's step loop: yields forward calls, receives their outputs, returns its result."""


def serve_alone(program: Program[T]) -> T:
    """Run ``program`` to its end, answering each forward call with its own forward."""
    try:
        call = next(program)
        while True:
            try:
                outputs = call.model.forward(call.chunks)
            except Exception as exc:
                call = program.throw(exc)
            else:
                call = program.send(outputs)
    except StopIteration as done:
        return done.value


@dataclass(frozen=True)
class Finished:
    """How one program of :func:`serve_side_by_side` ended: its result, or its exception."""

    value: Any
    error: Exception | None
    ended: float
    """``time.perf_counter()`` when it ended."""


def serve_side_by_side(programs: Sequence[Program[Any]]) -> list[Finished]:
    """Run ``programs`` in lockstep, one forward per model and round; returns how each ended,
    in the order given. ``BaseException``s that are not ``Exception`` (an interrupt) go on
    up at once."""
    finished: list[Finished | None] = [None] * len(programs)
    waiting: dict[int, ForwardCall] = {}

    def advance(index: int, outputs: list[Any] | None, error: Exception | None) -> None:
        program = programs[index]
        try:
            call = program.throw(error) if error is not None else program.send(outputs)  # type: ignore[arg-type]
        except StopIteration as done:
            finished[index] = Finished(done.value, None, time.perf_counter())
        except Exception as exc:
            finished[index] = Finished(None, exc, time.perf_counter())
        else:
            waiting[index] = call

    for index in range(len(programs)):
        advance(index, None, None)  # send(None) starts a generator
    while waiting:
        rounds: dict[int, list[int]] = {}
        for index, call in waiting.items():
            rounds.setdefault(id(call.model), []).append(index)
        for indices in rounds.values():
            calls = [waiting.pop(index) for index in indices]
            _answer(calls[0].model, indices, calls, advance)
    return [f for f in finished if f is not None]


Advance = Callable[[int, "list[Any] | None", "Exception | None"], None]
"""Hands a program its call's outputs (or the call's exception) and runs it to its next call."""


def _answer(
    model: Forwards, indices: list[int], calls: list[ForwardCall], advance: Advance
) -> None:
    """One forward for every call to ``model`` this round (call by call if it raises)."""
    if len(calls) > 1:
        try:
            outputs = model.forward([chunk for call in calls for chunk in call.chunks])
        except Exception:
            pass  # some run's chunks are bad: find out whose, below
        else:
            start = 0
            for index, call in zip(indices, calls, strict=True):
                end = start + len(call.chunks)
                advance(index, outputs[start:end], None)
                start = end
            return
    for index, call in zip(indices, calls, strict=True):
        try:
            alone = model.forward(call.chunks)
        except Exception as exc:
            advance(index, None, exc)
        else:
            advance(index, alone, None)
