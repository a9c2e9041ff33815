"""The reference engine serving requests as they arrive, for ``specseed serve``.

An audit run replays a plan on a fresh engine; a server has one engine for its whole life,
and requests come in whenever clients send them. :class:`LiveEngine` keeps one engine run
open and drives the same :class:`ContinuousBatcher` the audit runs use, from one thread:
each loop admits whatever arrived (into free slots, in arrival order) and steps every
active request together, so requests sent concurrently really share engine steps and batch
composition is what the scheduler made of the traffic, as in a production server.

Thread model: only the engine thread touches engine state. Other threads call
:meth:`LiveEngine.submit` with a callback; the callback runs on the engine thread when the
request finishes (or fails), and must hand the result over without blocking.
:meth:`LiveEngine.cancel` (a client hung up) and :meth:`LiveEngine.close` (the server is
shutting down) are notes the engine thread acts on between steps: a cancelled request leaves
the batch as a finished one does, its slot and KV blocks freed, and no callback runs; once
closing, queued requests and, past the deadline, running ones end ``unavailable``.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from specseed.engine_adapters.base import EngineSettings, RequestPlan, RunPlan
from specseed.engine_adapters.reference.adapter import (
    ContinuousBatcher,
    ReferenceEngine,
    _cpu_threads,
    _EngineRun,
    _Request,
)
from specseed.engine_adapters.reference.lockstep import serve_alone
from specseed.traces.records import FinishReason, StepRecord, TokenLogprob, TraceRecorder


@dataclass(frozen=True)
class LiveResult:
    """What a finished request gives back: its tokens, or why the engine could not serve it."""

    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    error: str | None = None
    """``ExceptionType: message`` when an engine step raised while the request was in it."""
    unavailable: bool = False
    """Not served: the server is shutting down (``error`` says so); the client may retry."""
    finish_reason: FinishReason | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None
    """Per emitted token, where the request asked ``logprobs``."""


Callback = Callable[[LiveResult], None]


@dataclass(frozen=True)
class _Submission:
    plan: RequestPlan
    done: Callback


class _StepCounter(TraceRecorder):
    """A recorder that counts steps and keeps none: a server runs for as long as it likes."""

    def __init__(self) -> None:
        super().__init__(None)
        self.step_count = 0
        self.largest_batch = 0

    def step(self, step: StepRecord) -> None:
        self.step_count += 1
        self.largest_batch = max(self.largest_batch, len(step.rows))


GATHER_LIMIT = 5
"""The most quiet windows one gathering may take (a client that never stops sending still
gets its first step: 1 s at the default window)."""


class LiveEngine:
    """One reference engine run kept open; requests join it as they arrive.

    ``batch_window_s``: when the engine is idle and a request arrives, keep accepting
    others until none has come for this long before the first step, so that requests a
    client sends together start together, in the order they came (a busy engine admits
    arrivals at its next step anyway).
    """

    def __init__(
        self, engine: ReferenceEngine, settings: EngineSettings, *, batch_window_s: float = 0.2
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.batch_window_s = batch_window_s
        self._inbox: queue.SimpleQueue[_Submission] = queue.SimpleQueue()
        self._gone: queue.SimpleQueue[str] = queue.SimpleQueue()
        """Request ids whose clients hung up (``cancel``), for the engine thread."""
        self._cancelled_ids: set[str] = set()
        self._ids = itertools.count()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closing_at: float | None = None
        """Set by ``close``: the monotonic time past which running requests end unavailable."""
        self.failures = 0
        """Engine steps that raised (each one failed its requests and reset the engine)."""
        self.cancelled = 0
        """Requests dropped because their clients hung up before they finished."""
        self._fresh()

    def _fresh(self) -> None:
        """A new engine state: the model stays loaded, every RNG counter starts again."""
        plan = RunPlan(scenario="serve", run="live", settings=self.settings, requests=())
        self.recorder = _StepCounter()
        self._run = _EngineRun(self.engine, plan, self.recorder)
        self._run.phase = "scenario"
        self._batcher = ContinuousBatcher(self._run)
        self._waiting: deque[_Request] = deque()
        self._callbacks: dict[int, Callback] = {}

    # -- the client side (any thread) ----------------------------------------------------

    def submit(self, plan: RequestPlan, done: Callback) -> None:
        """Queue a request; ``done`` is called on the engine thread when it finishes (at once,
        on this thread, when the engine is closing)."""
        if self._closing_at is not None:
            done(_shutting_down())
            return
        self._inbox.put(_Submission(plan, done))

    def cancel(self, request_id: str) -> None:
        """The client of ``request_id`` hung up: drop the request wherever it is (queued or
        running), between two steps; its callback is not called."""
        self._gone.put(request_id)

    def close(self, grace_s: float) -> None:
        """The server is shutting down: new and queued requests end unavailable now, running
        ones may finish for ``grace_s`` seconds and then end unavailable too."""
        self._closing_at = time.monotonic() + max(0.0, grace_s)

    def new_request_id(self) -> str:
        return f"http-{next(self._ids)}"

    def children_of(self, plan: RequestPlan) -> tuple[RequestPlan, ...]:
        """A request as the engine serves it: its ``n`` children (each submitted alone)."""
        return self._run.children_of(plan)

    @property
    def capacity(self) -> int:
        """KV positions one request may use (the target's and the draft head's, if smaller)."""
        sizes = [self.engine.target.max_seq_len]
        draft_capacity = getattr(self.engine.draft, "max_seq_len", None)
        if isinstance(draft_capacity, int):
            sizes.append(draft_capacity)
        return min(sizes)

    @property
    def lookahead(self) -> int:
        """Positions past the last emitted token a step may fill: the draft tokens."""
        return self.settings.max_draft_len

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def steps(self) -> int:
        """Engine steps since the last (re)start of the engine state."""
        return self.recorder.step_count

    @property
    def largest_batch(self) -> int:
        """Most rows one step has run since the last (re)start: evidence of real batching."""
        return self.recorder.largest_batch

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="specseed-engine", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the engine thread --------------------------------------------------------------

    def _accept(self, submission: _Submission) -> None:
        if submission.plan.request_id in self._cancelled_ids:  # hung up while queued
            self._cancelled_ids.discard(submission.plan.request_id)
            self.cancelled += 1
            return
        if self._closing_at is not None:
            submission.done(_shutting_down())
            return
        try:
            request = self._run._new_request(submission.plan)
        except ValueError as exc:  # a prompt outside the vocabulary: that request only
            submission.done(LiveResult((), (), f"ValueError: {exc}"))
            return
        self._callbacks[id(request)] = submission.done
        self._waiting.append(request)

    def _drain(self, quiet_s: float) -> None:
        """Accept everything queued; with ``quiet_s``, keep accepting until no request has
        arrived for that long (at most ``GATHER_LIMIT`` windows in all), so that requests a
        client sends together start together however slowly a loaded machine delivers them."""
        limit = time.monotonic() + quiet_s * GATHER_LIMIT
        while True:
            wait = min(quiet_s, limit - time.monotonic())
            try:
                submission = self._inbox.get(timeout=wait) if wait > 0 else None
            except queue.Empty:
                submission = None
            if submission is None:
                try:
                    submission = self._inbox.get_nowait()
                except queue.Empty:
                    return
            self._accept(submission)

    def _next_arrival(self) -> _Request | None:
        return self._waiting.popleft() if self._waiting else None

    def _loop(self) -> None:
        with _cpu_threads(1 if self.engine.device.type == "cpu" else None):
            while not self._stop.is_set():
                self._drop_gone()
                if self._closing_at is not None:
                    self._wind_down()
                idle = not (self._batcher.busy or self._waiting)
                if idle:
                    try:
                        first = self._inbox.get(timeout=0.1)
                    except queue.Empty:
                        continue
                    self._accept(first)
                    self._drain(self.batch_window_s)
                else:
                    self._drain(0.0)
                if not (self._batcher.busy or self._waiting):
                    continue
                try:
                    serve_alone(self._batcher.step(self._next_arrival))
                except Exception as exc:  # a crashed step fails its requests, not the server
                    self._fail_all(f"{type(exc).__name__}: {exc}")
                    continue
                self._finish()

    def _finish(self) -> None:
        if any(request.done for request in self._batcher.active):
            self._batcher.run.report_logprobs()  # the finished requests' are whole now
        for request in self._batcher.active:
            done = self._callbacks.pop(id(request), None) if request.done else None
            if done is not None:
                asked = request.plan.logprobs is not None
                done(
                    LiveResult(
                        request.prompt_ids,
                        tuple(request.output),
                        finish_reason=request.finish,
                        logprobs=tuple(request.logprobs) if asked else None,
                    )
                )

    def _drop_gone(self) -> None:
        """Drop the requests whose clients hung up: a queued one leaves the queue, a running
        one is marked done, so the batcher frees it as it frees any finished request (its
        row is skipped from the next step on)."""
        while True:
            try:
                request_id = self._gone.get_nowait()
            except queue.Empty:
                return
            queued = next((r for r in self._waiting if r.plan.request_id == request_id), None)
            running = next(
                (r for r in self._batcher.active if r.plan.request_id == request_id), None
            )
            request = queued or running
            if request is None or id(request) not in self._callbacks:
                # Still in the inbox (dropped when accepted), or finished already.
                if request is None and len(self._cancelled_ids) < 4096:
                    self._cancelled_ids.add(request_id)
                continue
            self._callbacks.pop(id(request))
            self.cancelled += 1
            if queued is not None:
                self._waiting.remove(queued)
            else:
                request.done = True

    def _wind_down(self) -> None:
        """Closing: every queued request ends unavailable now; running ones too once the
        grace period is over."""
        assert self._closing_at is not None
        while True:
            try:
                self._accept(self._inbox.get_nowait())  # unavailable, through _accept
            except queue.Empty:
                break
        ending = list(self._waiting)
        self._waiting.clear()
        if time.monotonic() >= self._closing_at:
            ending += [r for r in self._batcher.active if not r.done]
            for request in ending:
                request.done = True
        for request in ending:
            done = self._callbacks.pop(id(request), None)
            if done is not None:
                done(_shutting_down(request.prompt_ids, tuple(request.output)))

    def _fail_all(self, error: str) -> None:
        """An engine step raised: fail every request the engine holds and start afresh."""
        self.failures += 1
        for request in [*self._batcher.active, *self._waiting]:
            done = self._callbacks.pop(id(request), None)
            if done is not None:
                done(LiveResult(request.prompt_ids, tuple(request.output), error))
            request.release()
        self._fresh()


def _shutting_down(prompt_ids: tuple[int, ...] = (), output: tuple[int, ...] = ()) -> LiveResult:
    return LiveResult(prompt_ids, output, "the server is shutting down", unavailable=True)
