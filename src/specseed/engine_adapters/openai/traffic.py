"""Replaying a run plan as HTTP traffic: warmup bursts, prior traffic, then the scenario.

Over HTTP the only lever on batching is timing. A run's scenario requests are sent
concurrently in submission order (a small gap between sends keeps that order at the
server), each after its arrival step times ``arrival_step_s``; the server's scheduler
makes batches of whatever is in flight together. Warmup batches are bursts of that many
concurrent requests, whatever the concurrency limit, because a burst above the server's
``max_num_requests`` is the point of a warmup batch. Prior traffic is served to the end
before the scenario starts.

Every loop here is bounded: one task per planned request, each with bounded retries and
timeouts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from specseed.engine_adapters.base import RequestPlan, RunPlan, warmup_requests
from specseed.engine_adapters.openai.client import (
    Completion,
    CompletionClient,
    HttpEngineError,
    SamplingRequest,
    TokenIdDialect,
)
from specseed.traces.records import Phase


@dataclass(frozen=True)
class TrafficShape:
    """How requests are spread in time."""

    concurrency: int = 16
    arrival_step_s: float = 0.05
    """Seconds standing for one engine step of a scenario's ``arrivals``."""
    submit_interval_s: float = 0.002
    """Gap between sends that arrive at the same step, so the server sees submission order."""


@dataclass(frozen=True)
class RunFailure:
    """Why a run stopped: the phase it was in, the burst size, and the error."""

    phase: Phase
    batch_size: int
    exception: str
    message: str
    error: HttpEngineError | None = None
    """The error itself, re-raised by the adapter so the trace names its type."""


@dataclass
class Replay:
    """What a run's traffic produced."""

    outputs: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Token ids per scenario request that completed."""
    completions: dict[str, Completion] = field(default_factory=dict)
    """Every completed request (warmup and prior included), by request id."""
    failure: RunFailure | None = None


def _sampling(plan: RequestPlan) -> SamplingRequest:
    return SamplingRequest(
        prompt=plan.prompt,
        seed=plan.seed,
        temperature=plan.temperature,
        top_k=plan.top_k,
        top_p=plan.top_p,
        max_tokens=plan.max_tokens,
        knobs=plan.knobs(),
    )


class _Sender:
    def __init__(
        self,
        client: CompletionClient,
        *,
        model: str,
        dialect: TokenIdDialect,
        extra: dict[str, object],
        replay: Replay,
    ) -> None:
        self.client = client
        self.model = model
        self.dialect = dialect
        self.extra = extra
        self.replay = replay

    async def _complete(self, plan: RequestPlan, limit: asyncio.Semaphore) -> Completion:
        """One request; ``limit`` was acquired for it by the caller and is released here."""
        try:
            completion = await self.client.complete(
                _sampling(plan), model=self.model, dialect=self.dialect, extra=self.extra
            )
        finally:
            limit.release()
        self.replay.completions[plan.request_id] = completion
        return completion

    async def in_order(
        self, plans: Sequence[RequestPlan], concurrency: int, shape: TrafficShape | None = None
    ) -> list[Completion]:
        """Send ``plans`` concurrently, one sender starting them in submission order.

        With ``shape``, each waits for its arrival step; sends that go out back to back are
        ``submit_interval_s`` apart so the server sees them in this order (a send that had to
        wait for a free slot is ordered by that wait already). The first error cancels the
        rest and is raised.
        """
        loop = asyncio.get_running_loop()
        limit = asyncio.Semaphore(concurrency)
        order = sorted(range(len(plans)), key=lambda i: plans[i].arrival_step)
        tasks: dict[int, asyncio.Task[Completion]] = {}
        started = loop.time()
        last_send = -1.0
        try:
            for i in order:
                if shape is not None:
                    arrival = started + plans[i].arrival_step * shape.arrival_step_s
                    if arrival > loop.time():
                        await asyncio.sleep(arrival - loop.time())
                    gap = last_send + shape.submit_interval_s - loop.time()
                    if gap > 0 and not limit.locked():
                        await asyncio.sleep(gap)
                await limit.acquire()
                tasks[i] = asyncio.create_task(self._complete(plans[i], limit))
                last_send = loop.time()
            return list(await asyncio.gather(*(tasks[i] for i in range(len(plans)))))
        except BaseException:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
            raise


async def replay_plan(
    client: CompletionClient,
    plan: RunPlan,
    *,
    model: str,
    dialect: TokenIdDialect,
    shape: TrafficShape,
    extra: dict[str, object] | None = None,
) -> Replay:
    """Serve a run plan through ``client``; an HTTP error ends the run as its failure."""
    replay = Replay()
    sender = _Sender(client, model=model, dialect=dialect, extra=extra or {}, replay=replay)
    phase: Phase = "warmup"
    size = 0
    try:
        warmup = warmup_requests(plan)
        for number, size in enumerate(plan.warmup_batches):
            burst = [r for r in warmup if r.warmup_batch == number]
            # A burst is the point of a warmup batch: all of it in flight at once.
            await sender.in_order(burst, max(size, 1))
        if plan.prior_traffic:
            phase, size = "prior", len(plan.prior_traffic)
            await sender.in_order(plan.prior_traffic, shape.concurrency)
        phase, size = "scenario", len(plan.requests)
        completions = await sender.in_order(plan.requests, shape.concurrency, shape)
        for request, completion in zip(plan.requests, completions, strict=True):
            replay.outputs[request.request_id] = completion.token_ids
    except HttpEngineError as exc:
        replay.failure = RunFailure(phase, size, type(exc).__name__, exc.message, exc)
        for request in plan.requests:
            done = replay.completions.get(request.request_id)
            if done is not None:
                replay.outputs[request.request_id] = done.token_ids
    return replay
