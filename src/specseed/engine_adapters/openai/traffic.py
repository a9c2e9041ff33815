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

from specseed.engine_adapters.base import RequestPlan, RunPlan
from specseed.engine_adapters.openai.client import (
    Completion,
    CompletionClient,
    HttpEngineError,
    SamplingRequest,
    TokenIdDialect,
)
from specseed.trace import Phase

WARMUP_PROMPT = (1, 2, 3, 4)
WARMUP_MAX_TOKENS = 2
"""Warmup requests: the reference engine's own warmup traffic."""


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
    )


def warmup_requests(number: int, size: int) -> list[RequestPlan]:
    return [
        RequestPlan(
            request_id=f"warmup{number}-{i}",
            prompt=WARMUP_PROMPT,
            seed=None,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_tokens=WARMUP_MAX_TOKENS,
            phase="warmup",
        )
        for i in range(size)
    ]


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

    async def send(
        self, plan: RequestPlan, limit: asyncio.Semaphore, delay: float = 0.0
    ) -> Completion:
        if delay > 0:
            await asyncio.sleep(delay)
        async with limit:
            completion = await self.client.complete(
                _sampling(plan), model=self.model, dialect=self.dialect, extra=self.extra
            )
        self.replay.completions[plan.request_id] = completion
        return completion

    async def together(
        self,
        plans: Sequence[RequestPlan],
        limit: asyncio.Semaphore,
        delays: Sequence[float] | None = None,
    ) -> list[Completion]:
        """Send ``plans`` concurrently; the first error cancels the rest and is raised."""
        tasks = [
            asyncio.create_task(self.send(p, limit, delays[i] if delays else 0.0))
            for i, p in enumerate(plans)
        ]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise


def arrival_delays(plans: Sequence[RequestPlan], shape: TrafficShape) -> list[float]:
    """Send time of each request: its arrival step, then its place among that step's sends."""
    delays = []
    rank: dict[int, int] = {}
    for plan in plans:
        k = rank.get(plan.arrival_step, 0)
        rank[plan.arrival_step] = k + 1
        delays.append(plan.arrival_step * shape.arrival_step_s + k * shape.submit_interval_s)
    return delays


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
    limit = asyncio.Semaphore(shape.concurrency)
    phase: Phase = "warmup"
    size = 0
    try:
        for number, size in enumerate(plan.warmup_batches):
            burst = warmup_requests(number, size)
            # A burst is the point of a warmup batch: all of it in flight at once.
            await sender.together(burst, asyncio.Semaphore(max(size, 1)))
        if plan.prior_traffic:
            phase, size = "prior", len(plan.prior_traffic)
            await sender.together(plan.prior_traffic, limit)
        phase, size = "scenario", len(plan.requests)
        completions = await sender.together(
            plan.requests, limit, arrival_delays(plan.requests, shape)
        )
        for request, completion in zip(plan.requests, completions, strict=True):
            replay.outputs[request.request_id] = completion.token_ids
    except HttpEngineError as exc:
        replay.failure = RunFailure(phase, size, type(exc).__name__, exc.message, exc)
        for request in plan.requests:
            done = replay.completions.get(request.request_id)
            if done is not None:
                replay.outputs[request.request_id] = done.token_ids
    return replay
