"""The adapter contract: what an engine adapter receives, what it must do, and what the base
class does for it.

The runner resolves model.yaml and a scenario's run into a :class:`RunPlan`. The base class
owns the lifecycle of a run (:meth:`EngineAdapter.run`): it writes the trace header (the
requests as the engine received them, what the engine observes, whether the engine is fresh),
times the run, turns an exception inside the run into a recorded :class:`EngineFailure`, and
writes the end record. An adapter implements serving (:meth:`EngineAdapter.serve`), not
bookkeeping. Only an engine that cannot start at all raises ``EngineError``.
"""

from __future__ import annotations

import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel

from specseed.core.errors import plugin_code
from specseed.engine_adapters.registry import EngineInfo
from specseed.traces.records import (
    REQUEST_KNOBS,
    EngineConfigRecord,
    EngineFailure,
    Observability,
    Phase,
    RequestInfo,
    RunEnd,
    RunHeader,
    RunTrace,
    TraceRecorder,
    child_id,
    child_seed,
)

T = TypeVar("T")


class NoOptions(BaseModel):
    """Options of an engine that declares none (any key is an error)."""

    model_config = {"extra": "forbid", "frozen": True}


@dataclass(frozen=True)
class EngineSettings:
    """Engine configuration of one run (model.yaml's ``engine`` plus the run's overrides).

    The shared keys are fields; each engine's own keys are its ``options`` model, validated
    against the model the engine declares in the registry.
    """

    name: str = "reference"
    device: Literal["cpu", "cuda"] = "cpu"
    max_num_requests: int = 8
    max_draft_len: int = 3
    verification: Literal["rejection", "strict"] = "rejection"
    overlap_scheduler: bool = False
    checkpoint: Path | None = None
    draft_checkpoint: Path | None = None
    contract: str = "ideal"
    """The RNG contract the audit holds the engine to."""
    options: BaseModel = field(default_factory=NoOptions)
    """The engine's own options (its pydantic options model, validated)."""

    def record(self) -> EngineConfigRecord:
        """These settings as a trace header records them."""
        return EngineConfigRecord(
            name=self.name,
            device=self.device,
            max_num_requests=self.max_num_requests,
            max_draft_len=self.max_draft_len,
            verification=self.verification,
            overlap_scheduler=self.overlap_scheduler,
            checkpoint=str(self.checkpoint) if self.checkpoint else None,
            draft_checkpoint=str(self.draft_checkpoint) if self.draft_checkpoint else None,
            contract=self.contract,
            options=self.options.model_dump(mode="json"),
        )


@dataclass(frozen=True)
class RequestPlan:
    """One request as the engine must serve it."""

    request_id: str
    prompt: tuple[int, ...] | str
    seed: int | None
    temperature: float
    top_k: int
    top_p: float
    max_tokens: int
    arrival_step: int = 0
    """Engine step, counted from the start of the scenario's traffic, at which it arrives."""
    phase: Phase = "scenario"
    warmup_batch: int | None = None
    """For warmup requests: the warmup batch (0-based) they belong to."""
    min_p: float | None = None
    logit_bias: tuple[tuple[int, float], ...] | None = None
    """(token id, bias) pairs, sorted by token id."""
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    stop_token_ids: tuple[int, ...] | None = None
    stop: tuple[str, ...] | None = None
    ignore_eos: bool | None = None
    logprobs: int | None = None
    n: int | None = None
    parent: str | None = None
    """For child i > 0 of a request with ``n`` > 1 (``children``): the request's id."""

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def knobs(self) -> dict[str, Any]:
        """The knobs this request sets (``REQUEST_KNOBS`` that are not None): what an adapter
        sends; an unset one is the engine's default and is not sent."""
        return {k: getattr(self, k) for k in REQUEST_KNOBS if getattr(self, k) is not None}

    def children(self) -> tuple[RequestPlan, ...]:
        """The request as its ``n`` children: itself, then child i > 0 as the request
        ``child_id(request_id, i)`` with seed ``child_seed(seed, i)``, ``n`` None and
        ``parent`` set. Engines that serve children as requests of their own serve these;
        traces list them (the header's requests, the end's outputs)."""
        count = self.n or 1
        if count == 1:
            return (self,)
        children = (
            replace(
                self,
                request_id=child_id(self.request_id, i),
                seed=child_seed(self.seed, i),
                n=None,
                parent=self.request_id,
            )
            for i in range(1, count)
        )
        return (self, *children)

    def received(self, prompt_ids: tuple[int, ...]) -> RequestInfo:
        """This request as a trace header records it: the same fields, the prompt encoded."""
        return RequestInfo(prompt_ids=prompt_ids, **{n: getattr(self, n) for n in _RECEIVED})


_RECEIVED = tuple(f.name for f in fields(RequestInfo) if f.name != "prompt_ids")
"""The fields a trace's request takes from the plan's, by name (all but the prompt)."""


class KnobRefused(Exception):
    """Raised by an adapter's ``serve`` when the engine refuses a sampling knob a request
    sets (vLLM's ``VLLMValidationError``, a server's 400 naming it): the message is the
    engine's own words. The run is recorded unserved (``RunEnd.refused``) and every check
    that would read it says skip quoting them: a refusal is honest, never a failure."""


@dataclass(frozen=True)
class RunPlan:
    """A run: warmup, prior traffic, then the scenario's requests."""

    scenario: str
    run: str
    settings: EngineSettings
    requests: tuple[RequestPlan, ...]
    warmup_batches: tuple[int, ...] = ()
    """Warmup batch sizes run before serving (may exceed ``max_num_requests``)."""
    prior_traffic: tuple[RequestPlan, ...] = field(default=())
    """Requests served to completion before the scenario's requests arrive."""


WARMUP_PROMPT: tuple[int, ...] = (1, 2, 3, 4)
"""Prompt ids of warmup requests (reduced modulo the vocabulary by adapters)."""
WARMUP_MAX_TOKENS = 2


def warmup_requests(plan: RunPlan) -> tuple[RequestPlan, ...]:
    """The warmup traffic of a run, typed: unseeded sampled requests, one group per batch."""
    return tuple(
        RequestPlan(
            request_id=f"warmup{number}-{i}",
            prompt=WARMUP_PROMPT,
            seed=None,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_tokens=WARMUP_MAX_TOKENS,
            phase="warmup",
            warmup_batch=number,
        )
        for number, size in enumerate(plan.warmup_batches)
        for i in range(size)
    )


@dataclass(frozen=True)
class RunStart:
    """What an adapter says about a run before it serves it."""

    fresh_engine: bool = True
    """False when the run reuses an engine instance that served earlier runs."""
    contract: str | None = None
    """The contract the engine claims to follow (None: the one the audit holds it to)."""
    not_served: str | None = None
    """Why the engine cannot serve this run as planned (a setting it cannot take, such as
    ``max_draft_len: 0`` on a server that speculates); the run is recorded unserved and every
    check that would read it says skip with this reason."""


@dataclass(frozen=True)
class RunOutcome:
    """How one run served side by side with others ended
    (:meth:`EngineAdapter.serve_side_by_side`)."""

    outputs: Mapping[str, tuple[int, ...]] | None
    """Each scenario request's tokens (None when the run failed)."""
    error: Exception | None
    """What the run raised, when it failed."""
    ended: float
    """``time.perf_counter()`` when the run ended."""


@dataclass(frozen=True)
class TrafficLimits:
    """What traffic an engine takes, as far as it can say, for what generates traffic
    (``specseed search``); None where it cannot say."""

    vocab_size: int | None = None
    """Prompt token ids must be below it."""
    context_length: int | None = None
    """Most tokens one request may hold: its prompt, its output and the drafts in flight."""
    fixed_settings: bool = False
    """True when a run cannot change the engine settings (a server over HTTP): every run is
    served with the settings the engine has."""
    refused_knobs: frozenset[str] = frozenset()
    """Sampling knobs (``REQUEST_KNOBS``) the engine refuses whatever their value, known
    before any run (a knob refused only at serve time is ``KnobRefused`` there)."""


def held_at_once(plan: RunPlan) -> int:
    """Most requests a run holds at once: the larger of ``max_num_requests`` and its
    largest warmup batch."""
    return max(plan.settings.max_num_requests, *plan.warmup_batches, 0)


def held_within(items: Sequence[T], held: Callable[[T], int], budget: int) -> list[list[T]]:
    """``items`` cut, in order, into groups whose ``held`` sum stays within ``budget``; an
    item above it goes alone. How runs (or audits) served side by side bound the requests,
    hence the KV caches, they hold at once."""
    groups: list[list[T]] = []
    total = 0
    for item in items:
        most = held(item)
        if not groups or total + most > budget:
            groups.append([])
            total = 0
        groups[-1].append(item)
        total += most
    return groups


def plain_environment(environment: Mapping[str, object]) -> dict[str, str]:
    """An engine's environment as plain strings. ``torch.__version__`` is a ``str`` subclass
    defined in torch: kept as it is, every pickle of a trace header (``--jobs`` results)
    would make its reader import torch (about a second) to rebuild one string."""
    return {str(key): str(value) for key, value in environment.items()}


class EngineAdapter(ABC):
    """An engine that can serve run plans. Constructed once per audit (loads the model).

    Subclasses set ``info`` (their ``EngineInfo``, which gives ``name`` and
    ``observability``; a test double may set those two instead), and implement :meth:`serve`,
    :meth:`encode` and :meth:`environment`. They may override :meth:`start_run` (fresh or
    reused engine), :meth:`validate` (limits the engine can state up front) and :meth:`close`.
    """

    info: ClassVar[EngineInfo]
    """The engine's one description (``engine_adapters.registry``)."""
    name: ClassVar[str]
    observability: ClassVar[Observability]
    """What this engine exposes; recorded in every trace header."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        info = cls.__dict__.get("info")
        if info is not None:  # name and observability are the EngineInfo's, never repeated
            cls.name = info.name
            cls.observability = info.observability

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings

    # -- what an adapter implements ------------------------------------------------------

    @abstractmethod
    def serve(self, plan: RunPlan, recorder: TraceRecorder) -> Mapping[str, tuple[int, ...]]:
        """Serve warmup, prior traffic, then the scenario's requests; return each scenario
        request's tokens. Record steps with ``recorder.step`` (as far as the engine exposes
        them) and say where the engine is with ``recorder.at``. Raise on failure: the base
        class records the exception with the last position."""

    @abstractmethod
    def encode(self, prompt: tuple[int, ...] | str) -> tuple[int, ...]:
        """Prompt token ids as the engine will see them; ``ValueError`` if it cannot take
        them. Engines that tokenize remotely may return ``()`` for text."""

    @abstractmethod
    def environment(self) -> dict[str, str]:
        """Versions and devices worth recording in every trace and report."""

    def start_run(self, plan: RunPlan) -> RunStart:
        """Prepare a run (reset or reuse engine state); called before its header is written."""
        return RunStart()

    def observes(self, plan: RunPlan) -> Observability:
        """What this engine exposes in this run (default: the class's ``observability``)."""
        return self.observability

    def validate(self, plan: RunPlan) -> list[str]:
        """Problems with a plan the engine can tell before anything runs (prompt ids outside
        the vocabulary, requests beyond its capacity). The runner checks every plan first."""
        problems = []
        for request in (*plan.prior_traffic, *plan.requests):
            try:
                self.encode(request.prompt)
            except ValueError as exc:
                problems.append(f"{plan.scenario}/{plan.run}: request {request.request_id}: {exc}")
        return problems

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release engine resources."""

    def traffic_limits(self) -> TrafficLimits:
        """The vocabulary and context this engine takes, and whether a run may change its
        settings (default: it does not say)."""
        return TrafficLimits()

    def serves_side_by_side(self) -> bool:
        """Whether :meth:`serve_side_by_side` can serve several runs at once, each exactly as
        it would be served alone (default: no, runs are served one after another)."""
        return False

    def serve_side_by_side(self, runs: Sequence[tuple[RunPlan, TraceRecorder]]) -> list[RunOutcome]:
        """Serve ``runs`` at once, each on a fresh engine state and recorded as :meth:`serve`
        records it alone; one outcome per run, in order. Called only where
        :meth:`serves_side_by_side` says so."""
        raise NotImplementedError(f"engine {self.name} serves runs one after another")

    # -- the lifecycle (owned by the base class) ---------------------------------------------

    def run(self, plan: RunPlan, recorder: TraceRecorder) -> RunTrace:
        """Serve ``plan``: header, the adapter's :meth:`serve`, end. Never raises for a failure
        inside the run: it becomes the end record's ``failure``."""
        started = time.perf_counter()
        outputs: dict[str, tuple[int, ...]] = {}
        try:
            start = self.start_run(plan)
            recorder.header(self._header(plan, start))
            if start.not_served is None:
                with plugin_code(f"engine {self.name}"):  # a plugin's sys.exit() too
                    outputs = dict(self.serve(plan, recorder))
        except KnobRefused as exc:
            return recorder.end(
                RunEnd(outputs={}, seconds=time.perf_counter() - started, refused=str(exc))
            )
        except Exception as exc:  # an engine crash is evidence, not a reason to stop the audit
            return recorder.end(self._failed(exc, plan, recorder, time.perf_counter() - started))
        return recorder.end(RunEnd(outputs=outputs, seconds=time.perf_counter() - started))

    def run_all(self, runs: Sequence[tuple[RunPlan, TraceRecorder]]) -> list[RunTrace]:
        """Serve several runs (a scenario's), each recorded as :meth:`run` records it: side
        by side where the engine can (:meth:`serves_side_by_side`), else one after another.
        Never raises for a failure inside a run."""
        if len(runs) < 2 or not self.serves_side_by_side():
            return [self.run(plan, recorder) for plan, recorder in runs]
        started = time.perf_counter()
        ends: dict[int, RunEnd] = {}
        served: list[int] = []
        for index, (plan, recorder) in enumerate(runs):
            try:
                start = self.start_run(plan)
                recorder.header(self._header(plan, start))
            except Exception as exc:
                ends[index] = self._failed(exc, plan, recorder, time.perf_counter() - started)
                continue
            if start.not_served is None:
                served.append(index)
            else:
                ends[index] = RunEnd(outputs={}, seconds=time.perf_counter() - started)
        outcomes = self.serve_side_by_side([runs[i] for i in served]) if served else []
        for index, outcome in zip(served, outcomes, strict=True):
            plan, recorder = runs[index]
            seconds = outcome.ended - started
            if isinstance(outcome.error, KnobRefused):
                ends[index] = RunEnd(outputs={}, seconds=seconds, refused=str(outcome.error))
            elif outcome.error is not None:
                ends[index] = self._failed(outcome.error, plan, recorder, seconds)
            else:
                ends[index] = RunEnd(outputs=dict(outcome.outputs or {}), seconds=seconds)
        return [recorder.end(ends[index]) for index, (_, recorder) in enumerate(runs)]

    def _failed(
        self, exc: Exception, plan: RunPlan, recorder: TraceRecorder, seconds: float
    ) -> RunEnd:
        """A run's end record when it raised: the failure, and what it emitted before."""
        failure = failure_from(exc, recorder)
        if not recorder.has_header:
            recorder.header(self._header(plan, RunStart()))
        return RunEnd(outputs=recorder.emitted_outputs(), failure=failure, seconds=seconds)

    def _header(self, plan: RunPlan, start: RunStart) -> RunHeader:
        scenario = tuple(child for r in plan.requests for child in r.children())
        traffic = (*warmup_requests(plan), *plan.prior_traffic, *scenario)
        return RunHeader(
            scenario=plan.scenario,
            run=plan.run,
            engine=self.name,
            engine_config=plan.settings.record(),
            contract=start.contract or plan.settings.contract,
            requests=tuple(self._request_info(r) for r in traffic),
            environment=plain_environment(self.environment()),
            observability=self.observes(plan),
            fresh_engine=start.fresh_engine,
            not_served=start.not_served,
            warmup_batches=plan.warmup_batches,
        )

    def _request_info(self, request: RequestPlan) -> RequestInfo:
        try:
            prompt_ids = self.encode(request.prompt)
        except ValueError:
            prompt_ids = ()
        return request.received(prompt_ids)


def failure_from(exc: BaseException, recorder: TraceRecorder) -> EngineFailure:
    """An exception as a trace's failure record, at the position the adapter last noted."""
    step, phase, batch_size = recorder.position
    return EngineFailure(
        step=step,
        phase=phase,
        batch_size=batch_size,
        exception=type(exc).__name__,
        message=str(exc),
        traceback="".join(traceback.format_exception(exc)),
    )


def options_of(settings: EngineSettings, model: type[Any]) -> Any:
    """The engine's options as its own model (validating a plain model or dict if needed)."""
    if isinstance(settings.options, model):
        return settings.options
    return model.model_validate(settings.options.model_dump())
