"""Run-level health: every run, warmup batches above ``max_num_requests`` included, completes."""

from __future__ import annotations

import re
from collections.abc import Iterator

from specseed.checks.context import CheckContext
from specseed.checks.findings import Finding, Suspect
from specseed.checks.registry import run_check
from specseed.core.wording import plural
from specseed.engine_adapters.openai.info import SERVER_FAILURES, STOPPED_ANSWERING
from specseed.traces.records import EngineFailure, RunTrace

INTERRUPTED = "Interrupted"
"""The failure an interrupt (SIGINT/SIGTERM) ends a run's trace with (``run/execute.py``)."""
SERVER_DID_NOT_ANSWER = "did not answer"
SERVER_ANSWERED = "answered with an error"
NOT_SERVED = re.compile(
    rf" was not served: the server ({SERVER_DID_NOT_ANSWER}|{SERVER_ANSWERED}) at (.+?): "
    r"(\w+): "
)
"""How a runs-complete finding says a server did not serve its run: whether it answered,
where the run stopped, the exception (``root_causes`` reads it back)."""


def stopped_where(failure: EngineFailure) -> str:
    """Where a run stopped, in words: the engine step where it has one, else the phase."""
    batch = f"batch of {failure.batch_size}"
    if failure.step >= 0:
        return f"step {failure.step} ({failure.phase}, {batch})"
    if failure.batch_size == 0:
        return "its start (before its first request)"
    return f"the {failure.phase} phase ({batch})"


def server_answered(failure: EngineFailure) -> bool:
    """Whether a server failure came with an HTTP answer (an error status, a body that is
    not a completion) and the server still answered afterwards, rather than none (nothing
    listening, the connection dropped, or silence once the run had failed)."""
    if STOPPED_ANSWERING in failure.message:
        return False
    return failure.exception != "ServerUnavailable" or "HTTP " in failure.message


@run_check(
    "runs-complete",
    short="runs",
    title="Runs complete",
    description="Every run finishes without an engine error, including warmup batches larger "
    "than max_num_requests.",
    targets=("warmup-overflow",),
    needs=("tokens",),
)
def runs_complete(ctx: CheckContext, trace: RunTrace) -> Iterator[Finding]:
    limit = ctx.max_num_requests(trace)
    failure = trace.end.failure
    if failure is None:
        above = [size for size in _warmup_sizes(trace) if size > limit]
        extra = f", warmup batches {above} above max_num_requests {limit}" if above else ""
        yield Finding(
            status="pass",
            message=f"{trace.name} completed {_duration(trace)}{extra}",
            runs=(trace.name,),
        )
        return
    if failure.exception == INTERRUPTED:
        # Stopped by the user, not by the engine: unfinished, never an engine failure.
        yield Finding(
            status="skip",
            message=f"{trace.name} unfinished: interrupted {failure.where}: {failure.message}",
            runs=(trace.name,),
        )
        return
    if failure.exception in SERVER_FAILURES:
        yield _server_failure(trace, failure, limit)
        return
    suspects = []
    if failure.batch_size > limit:
        suspects.append(
            Suspect(
                "warmup-overflow",
                f"the engine failed while running a {failure.phase} batch of "
                f"{plural(failure.batch_size, 'row')}, above max_num_requests {limit}: buffers sized "
                "max_num_requests cannot hold it",
            )
        )
    yield Finding(
        status="fail",
        message=(f"{trace.name} crashed {failure.where}: {failure.exception}: {failure.message}"),
        runs=(trace.name,),
        suspects=tuple(suspects),
        # The traceback names the crash's site (attribution reads its innermost frame).
        details=(
            f"{failure.exception}: {failure.message}",
            *((failure.traceback,) if failure.traceback else ()),
        ),
    )


def _server_failure(trace: RunTrace, failure: EngineFailure, limit: int) -> Finding:
    """A run the server did not serve: failing, with where and why, and the traceback kept
    out (its frames are specseed's HTTP client, which only reported what the server did)."""
    answered = server_answered(failure)
    suspects = []
    if answered and failure.batch_size > limit:
        # A server that answered a burst above max_num_requests with an error, and (as root
        # causes decide from the whole audit) served the runs after it: its buffers.
        suspects.append(
            Suspect(
                "warmup-overflow",
                f"the server failed a {failure.phase} batch of "
                f"{plural(failure.batch_size, 'row')}, above max_num_requests {limit}: "
                "buffers sized max_num_requests cannot hold it",
            )
        )
    how = SERVER_ANSWERED if answered else SERVER_DID_NOT_ANSWER
    where = stopped_where(failure)
    return Finding(
        status="fail",
        message=(
            f"{trace.name} was not served: the server {how} at {where}: "
            f"{failure.exception}: {failure.message}"
        ),
        runs=(trace.name,),
        suspects=tuple(suspects),
        details=(f"{failure.exception}: {failure.message}",),
    )


def _warmup_sizes(trace: RunTrace) -> list[int]:
    """Sizes of the warmup batches the run served (typed in the trace header)."""
    sizes = list(trace.header.warmup_batches)
    if sizes or trace.header.schema_version != "1.0":
        return sizes
    # 1.0 traces did not record them: the rows of each warmup batch's first step.
    seen: set[str] = set()
    for step in trace.steps:
        if step.phase == "warmup" and step.rows:
            batch = step.rows[0].request_id.split("-")[0]
            if batch not in seen:
                seen.add(batch)
                sizes.append(len(step.rows))
    return sizes


def _duration(trace: RunTrace) -> str:
    """How long the run was: engine steps where the engine exposes them, else seconds."""
    if trace.header.observability.steps:
        return f"in {plural(len(trace.steps), 'step')}"
    return f"in {trace.end.seconds:.1f} s"
