"""The reference engine: an in-process one-model speculative decoder built for auditing.

One engine step runs, for every scheduled request at once: the target forward over its new
tokens (the prompt, or the last token plus K drafts), target sampling or verification (greedy
argmax, strict token match, or rejection sampling), then K draft steps of the EAGLE3-style
head. Every random draw goes through ``specseed.sampling`` with the seed/offset/subsequence
the engine's RNG bookkeeping (``rng_assignment``) put in its buffers, and every step is
recorded as a ``StepRecord``.

Scheduling is continuous batching under ``max_num_requests``: requests arrive at given steps,
take the lowest free slot, run in admission order and leave when done. Warmup batches run
before serving and may be larger than ``max_num_requests``. With the overlap scheduler, step
N+1 is prepared (rows chosen, RNG metadata filled) before step N's results are applied, so
the host learns of finished requests one step late and their rows run once more, discarded.
"""

from __future__ import annotations

import platform
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import torch

from specseed.core.contracts import EventKind
from specseed.core.errors import EngineError
from specseed.core.version import __version__
from specseed.engine_adapters.base import (
    EngineAdapter,
    EngineSettings,
    RequestPlan,
    RunOutcome,
    RunPlan,
    RunStart,
    TrafficLimits,
    held_at_once,
    held_within,
    options_of,
    warmup_requests,
)
from specseed.engine_adapters.contracts import get_contract
from specseed.engine_adapters.reference import sampler
from specseed.engine_adapters.reference.info import ENGINE
from specseed.engine_adapters.reference.lockstep import (
    ForwardCall,
    Program,
    serve_alone,
    serve_side_by_side,
)
from specseed.engine_adapters.reference.options import ReferenceOptions
from specseed.engine_adapters.reference.planted import PlantedDefects, StepRow
from specseed.engine_adapters.reference.rng_assignment import (
    AssignedState,
    EventRequest,
    RngAssigner,
    RngBuffers,
)
from specseed.models.model import (
    Eagle3DraftHead,
    KVCache,
    LlamaTarget,
    build_tiny_draft,
    build_tiny_target,
    fingerprints,
)
from specseed.sampling.backend import make_backend
from specseed.sampling.processors import (
    NONE,
    Processors,
    min_p_filter,
    process_logits,
    top_logprobs,
)
from specseed.traces.records import (
    FinishReason,
    Phase,
    RowRecord,
    SamplingEvent,
    StepRecord,
    TokenLogprob,
    TraceRecorder,
)

UNSET_TEMPERATURE = 1e-5
"""The greedy sentinel an unset temperature became on TensorRT-LLM's one-model speculative
path before PR 19390 (``DISABLE_TEMP_VAL``): the ``unset-temperature-greedy`` defect."""


@dataclass(eq=False)
class _Request:
    """Engine-side state of one request."""

    plan: RequestPlan
    prompt_ids: tuple[int, ...]
    engine_seed: int = 0
    slot: int = -1
    output: list[int] = field(default_factory=list)
    scheduled_iters: int = 0
    """Iterations prepared so far (the true decoding iteration of the next one)."""
    applied_iters: int = 0
    """Iterations whose results the host has applied (lags by one under overlap)."""
    done: bool = False
    """Device truth: the request has all its tokens."""
    host_done: bool = False
    """The scheduler's view of ``done`` (late by one step under overlap)."""
    target_cache: KVCache | None = None
    draft_cache: KVCache | None = None
    draft_committed: int = 0
    last_token: int = -1
    drafts: tuple[int, ...] = ()
    draft_probs: torch.Tensor | None = None
    processors: Processors = NONE
    """What the request's knobs do to its logits (``sampling.processors``)."""
    penalty_state: list[int] = field(default_factory=list)
    """The output tokens the ``penalty-stale-in-step`` engine has fed its penalty state."""
    finish: FinishReason | None = None
    logprobs: list[TokenLogprob] = field(default_factory=list)
    """What the engine reports for each emitted token, where the request asked."""

    @property
    def target(self) -> KVCache:
        assert self.target_cache is not None, "request not admitted"
        return self.target_cache

    @property
    def draft(self) -> KVCache:
        assert self.draft_cache is not None, "request not admitted"
        return self.draft_cache

    def release(self) -> None:
        """Give both KV caches back to their pools (the request is finished)."""
        for cache in (self.target_cache, self.draft_cache):
            if cache is not None:
                cache.release()
        self.target_cache = self.draft_cache = None

    @property
    def request_seed(self) -> int | None:
        seed = self.plan.seed
        return None if seed is None else seed & ((1 << 64) - 1)


@dataclass
class _Row:
    """A request prepared for one step."""

    request: _Request
    row: int
    decoding_iter: int
    rng_iter: int
    """The iteration count the engine read when it filled the RNG buffers."""
    prefill: bool
    rng_window: int | None = None
    """The window taken from the counter shared by unseeded requests, where the contract has
    one (``RngAssigner.take_window``)."""


@dataclass
class _RowOutcome:
    """What one step did for one row, filled in as the step runs."""

    drafts_verified: tuple[int, ...] = ()
    accepted: int = 0
    emitted: tuple[int, ...] = ()
    fingerprints: tuple[str, ...] = ()
    drafts_proposed: tuple[int, ...] = ()
    events: list[SamplingEvent] = field(default_factory=list)


@dataclass(frozen=True)
class _Report:
    """A row whose request asked for log-probabilities, to report once its step's tokens are
    known, and how many of them were accepted drafts (the target logits rows that decided
    them travel beside it, gathered per step: ``_EngineRun._unreported``)."""

    row: _Row
    emitted: tuple[int, ...]
    n_accepted: int


class ReferenceEngine(EngineAdapter):
    """The embedded default engine (CPU, or CUDA where present)."""

    info = ENGINE

    def __init__(self, settings: EngineSettings) -> None:
        super().__init__(settings)
        if settings.device == "cuda" and not torch.cuda.is_available():
            raise EngineError(
                "engine.device is cuda but torch sees no CUDA device",
                hint="set engine.device: cpu, or run on a machine with a GPU",
            )
        self.options: ReferenceOptions = options_of(settings, ReferenceOptions)
        model_seed = self.options.model_seed
        self.device = torch.device(settings.device)
        self.backend = make_backend(self.options.sampling_backend, settings.device)
        # The build runs the target once (the draft head's calibration): on one thread, as the
        # runs do (measured: 2.4 s with two spinning threads on the loaded 2-core machine,
        # against 0.03 s). The weights do not depend on the thread count.
        with _cpu_threads(1 if self.device.type == "cpu" else None):
            self._build_models(settings, model_seed)
        self.vocab_size = self.target.config.vocab_size
        eos = self.target.config.eos_token_id
        self.eos_ids: frozenset[int] = frozenset(
            () if eos is None else (eos,) if isinstance(eos, int) else eos
        )
        """The model's end-of-sequence ids: a request stops at one unless ``ignore_eos``."""

    def _build_models(self, settings: EngineSettings, model_seed: int) -> None:
        try:
            if settings.checkpoint is not None:
                self.target = LlamaTarget.from_checkpoint(
                    settings.checkpoint, device=settings.device
                )
                self.model_description = f"checkpoint {settings.checkpoint}"
            else:
                self.target = build_tiny_target(model_seed, device=settings.device)
                self.model_description = f"built-in tiny Llama (model_seed {model_seed})"
            if settings.draft_checkpoint is not None:
                self.draft = Eagle3DraftHead.from_checkpoint(settings.draft_checkpoint, self.target)
            elif settings.checkpoint is None:
                self.draft = build_tiny_draft(self.target, model_seed)
            else:
                self.draft = Eagle3DraftHead.derived_from(self.target, model_seed)
        except (OSError, ValueError, KeyError) as exc:
            raise EngineError(
                f"could not load the reference model: {exc}",
                hint="check engine.checkpoint / engine.draft_checkpoint in model.yaml",
            ) from exc

    def environment(self) -> dict[str, str]:
        return {
            "specseed": __version__,
            "engine": "reference",
            "python": platform.python_version(),
            "torch": torch.__version__,
            "torch_threads": str(torch.get_num_threads()),
            "device": str(self.device),
            "platform": platform.platform(),
            "model": self.model_description,
            "sampling_backend": self.backend.name,
            **({"flashinfer": self.backend.version} if self.backend.version else {}),
            # What the samplers see (the distribution check's precision envelope).
            "logits_dtype": "float32",
        }

    @staticmethod
    def decode(tokens: Sequence[int]) -> str:
        """Text of token ids, the inverse of :meth:`encode` for text: ids below 256 are the
        UTF-8 bytes; other ids stand for no text. What ``stop`` strings are matched against."""
        return bytes(t for t in tokens if 0 <= t < 256).decode("utf-8", errors="replace")

    def encode(self, prompt: tuple[int, ...] | str) -> tuple[int, ...]:
        """Token ids of a prompt. Text is encoded byte by byte (UTF-8) into the vocabulary."""
        if isinstance(prompt, str):
            return tuple(b % self.vocab_size for b in prompt.encode("utf-8"))
        bad = [t for t in prompt if not 0 <= t < self.vocab_size]
        if bad:
            raise ValueError(
                f"prompt token ids {bad[:5]} are outside the vocabulary (size {self.vocab_size})"
            )
        return tuple(prompt)

    def traffic_limits(self) -> TrafficLimits:
        return TrafficLimits(self.vocab_size, min(self.target.max_seq_len, self.draft.max_seq_len))

    def start_run(self, plan: RunPlan) -> RunStart:
        # Every run gets fresh engine state (slots, caches, counters); only weights are shared.
        return RunStart(fresh_engine=True, contract=self.rng_profile(plan))

    def rng_profile(self, plan: RunPlan) -> str:
        """The contract this engine follows in a run (its option, or the audited one)."""
        options = options_of(plan.settings, ReferenceOptions)
        return options.rng_profile or plan.settings.contract

    def serve(self, plan: RunPlan, recorder: TraceRecorder) -> dict[str, tuple[int, ...]]:
        with self._serving():
            self._reserve_caches([plan])
            return serve_alone(_program(self, plan, recorder))

    def serves_side_by_side(self) -> bool:
        # Merged forwards keep every run's bits only where the numerics are batch-invariant,
        # which is promised (and tested) on the CPU, not on CUDA.
        return self.device.type == "cpu"

    def serve_side_by_side(self, runs: Sequence[tuple[RunPlan, TraceRecorder]]) -> list[RunOutcome]:
        """Every run on a fresh engine state of its own, in lockstep: each round, the runs'
        target forwards are one call and their draft forwards another (``lockstep``). Runs
        go side by side in groups of at most :data:`SIDE_BY_SIDE_REQUESTS` requests at once
        (one run alone may hold more), so the KV caches held together stay within what one
        large run holds on its own."""
        outcomes: list[RunOutcome] = []
        with self._serving():
            for group in side_by_side_groups([plan for plan, _ in runs]):
                self._reserve_caches([runs[i][0] for i in group])
                ended = serve_side_by_side([_program(self, *runs[i]) for i in group])
                outcomes += [RunOutcome(e.value, e.error, e.ended) for e in ended]
        return outcomes

    def _reserve_caches(self, plans: Sequence[RunPlan]) -> None:
        """Room in both models' KV pools for every request the runs hold at once, made in
        one step (growing by doubling copies every slot each time: about 0.3 s of the
        built-in library's 300-request run)."""
        held = sum(held_at_once(plan) for plan in plans)
        self.target.reserve_caches(held)
        self.draft.reserve_caches(held)

    @contextmanager
    def _serving(self) -> Iterator[None]:
        with _cpu_threads(1 if self.device.type == "cpu" else None), torch.inference_mode():
            yield


LOGPROB_BATCH = 1 << 20
"""Logits elements (rows x vocabulary) of emitted tokens held at most before their
log-probabilities are computed (4 MiB of float32). Reports wait for one another: the
computation is a dozen torch ops whatever the rows (a call per step cost ``losslessness``, 150
requests asking 20 each, 0.05 s of its 1.6 s of runs on a 2-core VM)."""

SIDE_BY_SIDE_REQUESTS = 1024
"""Most requests runs served side by side may hold at once (a run's most: the larger of
``max_num_requests`` and its largest warmup batch). A request holds KV caches of about 330
KiB in the built-in model (target and draft head, 256 positions); one run alone may hold up
to 4,096 (a warmup batch)."""


def side_by_side_groups(plans: Sequence[RunPlan]) -> list[list[int]]:
    """Consecutive runs (by index) whose requests held at once fit
    :data:`SIDE_BY_SIDE_REQUESTS`; a run above it goes alone."""
    return held_within(
        range(len(plans)), lambda index: held_at_once(plans[index]), SIDE_BY_SIDE_REQUESTS
    )


def _program(
    engine: ReferenceEngine, plan: RunPlan, recorder: TraceRecorder
) -> Program[dict[str, tuple[int, ...]]]:
    """One run's step loop; the engine state is made when the program starts, so a run whose
    state cannot be made fails alone."""
    return (yield from _EngineRun(engine, plan, recorder).serve())


class ContinuousBatcher:
    """Continuous batching under ``max_num_requests`` over one engine run, one step at a time.

    Each :meth:`step` frees the slots of requests the host knows are done, admits arrivals
    into the lowest free slots, and runs every active request together. ``_serve`` drives it
    with a plan's arrival steps; ``specseed serve`` drives it with requests as they come in
    over HTTP (``live.py``), so both schedule with the same code.
    """

    def __init__(self, run: _EngineRun) -> None:
        self.run = run
        self.active: list[_Request] = []
        self.free_slots = list(range(run.settings.max_num_requests))
        self.pending: list[_Row] | None = None

    @property
    def busy(self) -> bool:
        """True while a request is active or the overlap scheduler holds unapplied results."""
        return bool(self.active or self.pending)

    def step(self, arrival: Callable[[], _Request | None]) -> Program[None]:
        """One engine step; ``arrival()`` yields the next request to admit, or None. A program
        (``lockstep``): it yields the step's forward calls."""
        run = self.run
        # Prepare this step from the host's view of the engine.
        for request in list(self.active):
            if request.host_done:
                run.planted.freed(request.plan, request.slot, request.scheduled_iters)
                self.active.remove(request)
                self.free_slots.append(request.slot)
                request.release()
        self.free_slots.sort()
        while self.free_slots:
            arrived = arrival()
            if arrived is None:
                break
            run._admit(arrived, self.free_slots.pop(0))
            self.active.append(arrived)
        rows = [run._prepare(request, i) for i, request in enumerate(self.active)]
        if self.pending is not None:
            # Overlap: the previous step's results land only after this step is prepared.
            run._apply(self.pending)
            self.pending = None
        if rows:
            yield from run._compute(rows)
            if run.settings.overlap_scheduler:
                self.pending = rows
            else:
                run._apply(rows)
        run.step += 1


@contextmanager
def _cpu_threads(count: int | None) -> Iterator[None]:
    """Run with ``count`` torch CPU threads, then restore the previous count.

    The tiny model's ops are far too small to split: with two OpenMP threads on a busy
    two-core machine, the threads spin against each other and an audit ran 15x slower
    (52 s against 3.5 s). Logits do not depend on the thread count (tested).
    """
    if count is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class _EngineRun:
    """One engine lifetime serving one run plan."""

    def __init__(self, engine: ReferenceEngine, plan: RunPlan, recorder: TraceRecorder) -> None:
        self.engine = engine
        self.plan = plan
        self.recorder = recorder
        settings = plan.settings
        self.settings = settings
        options = options_of(settings, ReferenceOptions)
        defects = tuple(options.defects)
        self.max_draft_len = settings.max_draft_len
        self.ignore_eos = options.ignore_eos
        """What a request that leaves ``ignore_eos`` unset gets."""
        self.defects = frozenset(defects)
        self.rng = RngAssigner(get_contract(engine.rng_profile(plan)), defects, self.max_draft_len)
        self.buffers = RngBuffers(
            settings.max_num_requests, max(plan.warmup_batches, default=0), defects
        )
        self.element0 = "row0-seed" in self.defects
        self.planted = PlantedDefects(defects)
        self.step = 0
        self.phase: Phase = "warmup"
        self.batch_size = 0
        self._unreported: list[tuple[list[_Report], torch.Tensor]] = []
        """Steps whose log-probabilities are not computed yet: their reports, and the
        reports' logits rows gathered in one tensor (``report_logprobs``)."""
        self._unreported_rows = 0

    # -- run ----------------------------------------------------------------------------

    def serve(self) -> Program[dict[str, tuple[int, ...]]]:
        """The run, as a program (``lockstep``): yields its forward calls, returns each
        scenario request's tokens."""
        prior = [self._new_request(p) for p in self.plan.prior_traffic]
        scenario = [self._new_request(c) for p in self.plan.requests for c in self.children_of(p)]
        warmup = [self._new_request(p) for p in warmup_requests(self.plan)]
        for number in range(len(self.plan.warmup_batches)):
            yield from self._warmup([r for r in warmup if r.plan.warmup_batch == number])
        if prior:
            self.phase = "prior"
            yield from self._serve(prior)
        self.phase = "scenario"
        yield from self._serve(scenario)
        self.report_logprobs()
        for r in scenario:
            reported = tuple(r.logprobs) if r.plan.logprobs is not None else None
            self.recorder.finish(r.plan.request_id, r.finish, reported)
        return {r.plan.request_id: tuple(r.output) for r in scenario}

    def children_of(self, plan: RequestPlan) -> tuple[RequestPlan, ...]:
        """A request as the engine serves it: its ``n`` children, each a request of its own
        on a stream of its own (seed + i), as vLLM's parallel sampling does."""
        children = plan.children()
        if "children-shared-stream" in self.defects:
            # Each child copies the parent's sampling parameters, seed included.
            return tuple(replace(child, seed=plan.seed) for child in children)
        return children

    def _new_request(self, plan: RequestPlan) -> _Request:
        processors = Processors(
            logit_bias=plan.logit_bias,
            presence_penalty=plan.presence_penalty,
            frequency_penalty=plan.frequency_penalty,
            repetition_penalty=plan.repetition_penalty,
            min_p=plan.min_p,
        )
        return _Request(
            plan=plan, prompt_ids=self.engine.encode(plan.prompt), processors=processors
        )

    def _admit(self, request: _Request, slot: int) -> None:
        request.slot = slot
        request.engine_seed = self.rng.seed_for_new_request(request.request_seed)
        self.planted.admitted(request.plan, slot)
        request.target_cache = self.engine.target.new_cache()
        request.draft_cache = self.engine.draft.new_cache()

    # -- warmup and serving ---------------------------------------------------------------

    def _warmup(self, batch: Sequence[_Request]) -> Program[None]:
        """One warmup batch, run together whatever ``max_num_requests`` says."""
        self.phase = "warmup"
        for i, request in enumerate(batch):
            self._admit(request, slot=i)
        while not all(r.done for r in batch):
            rows = [self._prepare(r, i) for i, r in enumerate(r for r in batch if not r.done)]
            yield from self._compute(rows)
            self._apply(rows)
            self.step += 1
        for request in batch:
            request.release()

    def _serve(self, requests: Sequence[_Request]) -> Program[None]:
        """Continuous batching of ``requests`` until all are done."""
        order = sorted(range(len(requests)), key=lambda i: (requests[i].plan.arrival_step, i))
        waiting = deque(requests[i] for i in order)
        batcher = ContinuousBatcher(self)
        start = self.step

        def arrived() -> _Request | None:
            if waiting and waiting[0].plan.arrival_step <= self.step - start:
                return waiting.popleft()
            return None

        while waiting or batcher.busy:
            yield from batcher.step(arrived)

    def _prepare(self, request: _Request, row: int) -> _Row:
        decoding_iter = request.scheduled_iters
        request.scheduled_iters += 1
        rng_iter = decoding_iter
        if "overlap-window-reuse" in self.defects:
            # The buggy engine reads the counter that moves when results are applied.
            rng_iter = request.applied_iters
        # Warmup requests stand for TensorRT-LLM's dummies, which hold no sequence slot.
        slot = None if self.phase == "warmup" else request.slot
        window = self.rng.take_window(request.request_seed, slot)
        return _Row(
            request, row, decoding_iter, rng_iter, prefill=decoding_iter == 0, rng_window=window
        )

    def _apply(self, rows: Sequence[_Row]) -> None:
        for row in rows:
            row.request.applied_iters += 1
            if row.request.done:
                row.request.host_done = True

    # -- one engine step ------------------------------------------------------------------

    def _compute(self, rows: Sequence[_Row]) -> Program[None]:
        self.batch_size = len(rows)
        self.recorder.at(self.step, self.phase, len(rows))
        live = [r for r in rows if not r.request.done]
        if self.planted.on:
            self.planted.step(
                [StepRow(r.request.plan, r.prefill, len(r.request.prompt_ids)) for r in live]
            )
        outcomes = {id(r): _RowOutcome() for r in rows}
        if live:
            yield from self._run_live(live, outcomes)
        self.recorder.step(
            StepRecord(
                step=self.step,
                phase=self.phase,
                rows=tuple(self._row_record(r, outcomes[id(r)]) for r in rows),
            )
        )

    def _row_record(self, row: _Row, outcome: _RowOutcome) -> RowRecord:
        request = row.request
        discarded = not outcome.emitted and not row.prefill and request.done
        first_position = len(request.output) - len(outcome.emitted)
        return RowRecord(
            request_id=request.plan.request_id,
            row=row.row,
            slot=request.slot,
            phase=request.plan.phase,
            decoding_iter=row.decoding_iter,
            drafts_verified=outcome.drafts_verified,
            accepted=outcome.accepted,
            emitted=outcome.emitted,
            first_position=first_position,
            logits_fingerprints=outcome.fingerprints,
            drafts_proposed=outcome.drafts_proposed,
            events=tuple(outcome.events),
            discarded=discarded,
        )

    def _run_live(self, live: Sequence[_Row], outcomes: dict[int, _RowOutcome]) -> Program[None]:
        target = self.engine.target
        inputs = []
        for row in live:
            request = row.request
            if row.prefill:
                inputs.append(list(request.prompt_ids))
            else:
                inputs.append([request.last_token, *request.drafts])
        cache_lengths = [row.request.target.length for row in live]
        outputs = yield ForwardCall(
            target,
            [(row.request.target, tokens) for row, tokens in zip(live, inputs, strict=True)],
        )
        # Logits rows that decide tokens: the prompt's last row, or the K + 1 verification rows.
        decide: list[torch.Tensor] = []
        for row, out in zip(live, outputs, strict=True):
            # The samplers run on the CPU (flashinfer's CPU twins): logits come home.
            logits = (out.logits[-1:] if row.prefill else out.logits).float().cpu()
            if "greedy-drift" in self.defects and logits.shape[0] > 1:
                # Verification of draft positions in bfloat16, unlike one-token decoding.
                logits = logits.to(torch.bfloat16).to(torch.float32)
            decide.append(logits)

        processed = [
            self._target_logits(row, logits) for row, logits in zip(live, decide, strict=True)
        ]
        accepted = self._choose_tokens(live, processed, outcomes)

        reports: list[_Report] = []
        reported: list[torch.Tensor] = []  # their target logits rows (after the processors)
        printed: list[torch.Tensor] = []  # each row's logits rows of its emitted tokens
        for row, logits, rows, before, n_accepted in zip(
            live, decide, processed, cache_lengths, accepted, strict=True
        ):
            request = row.request
            outcome = outcomes[id(row)]
            remaining = request.plan.max_tokens - len(request.output)
            emitted = outcome.emitted[:remaining]
            stop = self._stop_index(request, emitted)
            if stop is not None:
                emitted = emitted[: stop + 1]
            if request.plan.logprobs is not None and emitted:
                reports.append(_Report(row, emitted, n_accepted))
                reported.append(rows[: len(emitted)])
            outcome.emitted = emitted
            printed.append(logits[: len(emitted)])
            request.output.extend(emitted)
            request.last_token = emitted[-1]
            request.penalty_state.append(emitted[-1])
            if stop is not None:
                request.done, request.finish = True, "stop"
            elif len(request.output) >= request.plan.max_tokens:
                request.done, request.finish = True, "length"
            if not row.prefill:
                request.target.truncate(before + 1 + n_accepted)
        # One fingerprint call for the step's rows (a call per row cost more than its hashing).
        prints = iter(fingerprints(torch.cat(printed)))
        for row, part in zip(live, printed, strict=True):
            outcomes[id(row)].fingerprints = tuple(next(prints) for _ in range(part.shape[0]))
        if reports:
            self._defer_logprobs(reports, torch.cat(reported))

        if self.max_draft_len > 0:
            drafting = [
                (row, out, n)
                for row, out, n in zip(live, outputs, accepted, strict=True)
                if not row.request.done
            ]
            if drafting:
                yield from self._draft(drafting, outcomes)

    # -- the sampling knobs ---------------------------------------------------------------

    def _processors(self, request: _Request, speculative: bool) -> Processors:
        """The request's processors at a position; ``speculative``: a verified or drafted
        position of a speculating engine (not the prefill's token, not K = 0 decoding)."""
        if speculative and "spec-knobs-dropped" in self.defects:
            # The fused speculative sampler takes temperature, top-k and top-p only.
            return NONE
        return request.processors

    def _temperature(self, plan: RequestPlan) -> float:
        """The temperature a sampled request is drawn at."""
        if (
            "unset-temperature-greedy" in self.defects
            and self.max_draft_len > 0
            and plan.temperature == 1.0
            and (plan.top_k > 0 or plan.top_p < 1.0)
        ):
            # 1.0 is what an unset temperature stands for; the speculative path took it for
            # unset and handed the row the greedy sentinel.
            return UNSET_TEMPERATURE
        return plan.temperature

    def _target_logits(self, row: _Row, logits: torch.Tensor) -> torch.Tensor:
        """The target logits rows of a live row after logit_bias and the penalties: row j
        is conditioned on the output and the drafts before it (accepted earlier in this
        step, if it is reached at all)."""
        request = row.request
        processors = self._processors(request, self.max_draft_len > 0 and not row.prefill)
        if not processors.changes_logits:
            return logits
        output = list(request.output)
        if "penalty-stale-in-step" in self.defects:
            # The defect: the penalty state takes one token per step (its last), so every
            # position of a step is penalised as at its start, and accepted drafts never count.
            contexts = [list(request.penalty_state)] * logits.shape[0]
        elif row.prefill:
            contexts = [output]
        else:
            contexts = [output + list(request.drafts[:j]) for j in range(logits.shape[0])]
        return process_logits(logits, processors, request.prompt_ids, contexts)

    def _probs(
        self, requests: Sequence[_Request], logits: torch.Tensor, speculative: bool
    ) -> torch.Tensor:
        """Probabilities of processed logits rows, row i at ``requests[i]``'s temperature
        with its min_p applied (top-k/top-p are the kernels'): one softmax for all rows
        (row by row, the same bits)."""
        probs = sampler.probs_from_logits(logits, [self._temperature(r.plan) for r in requests])
        for i, request in enumerate(requests):
            min_p = self._processors(request, speculative).min_p
            if min_p:
                probs[i : i + 1] = min_p_filter(probs[i : i + 1], min_p)
        return probs

    def _stop_index(self, request: _Request, emitted: Sequence[int]) -> int | None:
        """Index in ``emitted`` of the first token that ends the request (a stop token id,
        the model's end-of-sequence unless ``ignore_eos``, the token that completes a stop
        string), or None."""
        plan = request.plan
        stops = set(plan.stop_token_ids or ())
        ignore_eos = self.ignore_eos if plan.ignore_eos is None else plan.ignore_eos
        if not ignore_eos:
            stops |= self.engine.eos_ids
        if not stops and not plan.stop:
            return None
        positions: Sequence[int] = range(len(emitted))
        if "tokens-past-stop" in self.defects:
            # The defect: only the step's last token is tested; accepted drafts are not.
            positions = [len(emitted) - 1] if emitted else []
        for i in positions:
            if emitted[i] in stops:
                return i
            if plan.stop:
                text = self.engine.decode([*request.output, *emitted[: i + 1]])
                if any(s in text for s in plan.stop):
                    return i
        return None

    def _defer_logprobs(self, reports: list[_Report], rows: torch.Tensor) -> None:
        """Keep a step's reports and their logits ``rows`` (one tensor, so nothing else of
        the step is held) until :data:`LOGPROB_BATCH` elements wait, or someone reads them
        (:meth:`report_logprobs`)."""
        self._unreported.append((reports, rows))
        self._unreported_rows += rows.shape[0]
        if self._unreported_rows * rows.shape[1] >= LOGPROB_BATCH:
            self.report_logprobs()

    def report_logprobs(self) -> None:
        """Append their log-probabilities to the requests of every step not reported yet
        (``request.logprobs`` is whole only after this): under the target distribution after
        every processor (temperature, min_p, top-k/top-p; temperature 1 for a greedy
        request), one softmax and one pick of the most probable tokens for all those rows,
        each row's filters on its own rows in between. Rows are computed one by one, so the
        bits do not depend on how many steps wait together."""
        if not self._unreported:
            return
        reports = [r for step, _ in self._unreported for r in step]
        logits = torch.cat([rows for _, rows in self._unreported])
        self._unreported, self._unreported_rows = [], 0
        temperatures = [
            self._temperature(r.row.request.plan) if r.row.request.plan.temperature > 0 else 1.0
            for r in reports
            for _ in r.emitted
        ]
        probs = sampler.probs_from_logits(logits, temperatures)
        start = 0
        for r in reports:
            request, end = r.row.request, start + len(r.emitted)
            speculative = self.max_draft_len > 0 and not r.row.prefill
            min_p = self._processors(request, speculative).min_p
            plan = request.plan
            if min_p or (0 < plan.top_k < probs.shape[-1]) or plan.top_p < 1.0:
                own = min_p_filter(probs[start:end], min_p)
                probs[start:end] = sampler.filter_probs(own, plan.top_k, plan.top_p)
            start = end
        count = max(r.row.request.plan.logprobs or 0 for r in reports)
        tokens = [t for r in reports for t in r.emitted]
        reported = iter(top_logprobs(probs, tokens, count))
        for r in reports:
            request = r.row.request
            own_count = request.plan.logprobs or 0
            for j in range(len(r.emitted)):
                chosen, top = next(reported)
                if "fake-logprobs" in self.defects and not r.row.prefill and j < r.n_accepted:
                    chosen = 0.0  # an accepted draft's log-probability, never computed
                request.logprobs.append(TokenLogprob(chosen, top[:own_count]))

    def _choose_tokens(
        self,
        live: Sequence[_Row],
        decide: Sequence[torch.Tensor],
        outcomes: dict[int, _RowOutcome],
    ) -> list[int]:
        """Sample or verify target tokens for every live row; returns accepted draft counts."""
        strict = self.settings.verification == "strict"
        sample_rows: list[tuple[_Row, int]] = []  # (row, target row index j)
        sample_logits: list[torch.Tensor] = []
        verify_rows: list[_Row] = []
        accepted = [0] * len(live)
        for row, logits in zip(live, decide, strict=True):
            request = row.request
            outcome = outcomes[id(row)]
            outcome.drafts_verified = () if row.prefill else request.drafts
            if request.plan.greedy:
                choice = logits.argmax(dim=-1).tolist()
                outcome.emitted = tuple(self._accept_prefix(request.drafts, choice, row.prefill))
            elif row.prefill or not request.drafts or strict:
                for j in range(logits.shape[0]):
                    sample_rows.append((row, j))
                    sample_logits.append(logits[j])
            else:
                verify_rows.append(row)

        if sample_rows:
            probs = sampler.probs_from_logits(
                torch.stack(sample_logits),
                [self._temperature(r.request.plan) for r, _ in sample_rows],
            )
            for i, (row, _j) in enumerate(sample_rows):
                speculative = self.max_draft_len > 0 and not row.prefill
                min_p = self._processors(row.request, speculative).min_p
                if min_p:
                    probs[i] = min_p_filter(probs[i : i + 1], min_p)[0]
            entries: list[tuple[_Row, EventKind, int]] = [
                (row, "target", j) for row, j in sample_rows
            ]
            tokens = self._sample_call(entries, probs, outcomes)
            sampled: dict[int, list[int]] = {}
            for (row, _j), token in zip(sample_rows, tokens, strict=True):
                sampled.setdefault(id(row), []).append(token)
            for row in live:
                if id(row) in sampled:
                    outcome = outcomes[id(row)]
                    outcome.emitted = tuple(
                        self._accept_prefix(row.request.drafts, sampled[id(row)], row.prefill)
                    )

        if verify_rows:
            logits_of = {id(row): logits for row, logits in zip(live, decide, strict=True)}
            self._kernel_verify(verify_rows, logits_of, outcomes)

        for i, row in enumerate(live):
            outcome = outcomes[id(row)]
            accepted[i] = 0 if row.prefill else len(outcome.emitted) - 1
            outcome.accepted = accepted[i]
        return accepted

    @staticmethod
    def _accept_prefix(drafts: Sequence[int], choice: Sequence[int], prefill: bool) -> list[int]:
        """Target choices per row -> emitted tokens: drafts while they match, then the target's."""
        if prefill or not drafts:
            return [choice[0]]
        emitted = []
        for j, token in enumerate(choice):
            emitted.append(token)
            if j >= len(drafts) or token != drafts[j]:
                break
        return emitted

    def _assign(self, rows: Sequence[tuple[_Row, EventKind, int]]) -> list[AssignedState]:
        """RNG states for one kernel call's rows (row, kind, index), written to the buffers."""
        requests = [
            EventRequest(
                request_seed=self.planted.seed(row.request.plan, row.request.request_seed),
                engine_seed=row.request.engine_seed,
                slot=row.request.slot,
                decoding_iter=self.planted.iteration(row.request.plan, row.rng_iter),
                kind=kind,
                index=index,
                shared_window=row.rng_window,
            )
            for row, kind, index in rows
        ]
        states = self.rng.assign(requests)
        self.buffers.fill([row.request.slot for row, _, _ in rows], states)
        return states

    def _record_events(
        self,
        rows: Sequence[tuple[_Row, EventKind, int]],
        states: Sequence[AssignedState],
        result: sampler.KernelResult,
        outcomes: dict[int, _RowOutcome],
    ) -> None:
        for kernel_row, ((row, kind, index), state) in enumerate(zip(rows, states, strict=True)):
            outcomes[id(row)].events.append(
                SamplingEvent(
                    kind=kind,
                    index=index,
                    kernel=result.kernel,
                    kernel_row=kernel_row,
                    seed=state.seed,
                    subsequence=result.subsequences[kernel_row],
                    offset=state.offset,
                    draws=result.draws[kernel_row],
                )
            )

    def _sample_call(
        self,
        entries: Sequence[tuple[_Row, EventKind, int]],
        probs: torch.Tensor,
        outcomes: dict[int, _RowOutcome],
    ) -> list[int]:
        """One sampling kernel launch over ``entries`` (row, event kind, index)."""
        states = self._assign(entries)
        result = sampler.sample(
            probs,
            [row.request.plan.top_k for row, _, _ in entries],
            [row.request.plan.top_p for row, _, _ in entries],
            states,
            element0=self.element0,
            backend=self.engine.backend,
        )
        self._record_events(entries, states, result, outcomes)
        return [tokens[0] for tokens in result.tokens]

    def _kernel_verify(
        self,
        verify_rows: Sequence[_Row],
        logits_of: dict[int, torch.Tensor],
        outcomes: dict[int, _RowOutcome],
    ) -> None:
        """One rejection-sampling launch over the non-greedy rows with drafts."""
        target_probs = []
        for row in verify_rows:
            plan = row.request.plan
            logits = logits_of[id(row)]
            probs = self._probs([row.request] * logits.shape[0], logits, speculative=True)
            target_probs.append(sampler.filter_probs(probs, plan.top_k, plan.top_p))
        draft_probs = torch.stack([row.request.draft_probs for row in verify_rows])  # type: ignore[misc]
        draft_ids = torch.tensor(
            [list(row.request.drafts) for row in verify_rows], dtype=torch.int32
        )
        entries: list[tuple[_Row, EventKind, int]] = [(row, "accept", 0) for row in verify_rows]
        states = self._assign(entries)
        result = sampler.verify(
            draft_probs,
            draft_ids,
            torch.stack(target_probs),
            states,
            element0=self.element0,
            backend=self.engine.backend,
        )
        self._record_events(entries, states, result, outcomes)
        tokens_per_row = result.tokens
        if "biased-acceptance" in self.defects:
            tokens_per_row = sampler.resample_residual_unnormalised(
                draft_probs,
                torch.stack(target_probs),
                tokens_per_row,
                states,
                element0=self.element0,
                backend=self.engine.backend,
            )
        for row, tokens in zip(verify_rows, tokens_per_row, strict=True):
            outcomes[id(row)].emitted = tuple(tokens)

    def _draft_logits(
        self, request: _Request, logits: torch.Tensor, proposed: Sequence[int]
    ) -> torch.Tensor:
        """A draft step's logits after the request's logit_bias and penalties (conditioned on
        the output and the drafts proposed before it), so that drafts follow the target's
        processed distribution."""
        processors = self._processors(request, speculative=True)
        if not processors.changes_logits:
            return logits
        context = [*request.output, *proposed]
        return process_logits(logits.unsqueeze(0), processors, request.prompt_ids, [context])[0]

    def _draft(
        self,
        drafting: Sequence[tuple[_Row, object, int]],
        outcomes: dict[int, _RowOutcome],
    ) -> Program[None]:
        """K draft steps for every row still running, batched per step."""
        draft = self.engine.draft
        chunks = []
        for row, out, n_accepted in drafting:
            request = row.request
            if row.prefill:
                tokens = [*request.prompt_ids[1:], request.last_token]
                hidden = out.aux_hidden  # type: ignore[attr-defined]
            else:
                tokens = list(outcomes[id(row)].emitted)
                hidden = out.aux_hidden[: n_accepted + 1]  # type: ignore[attr-defined]
            request.draft.truncate(request.draft_committed)
            request.draft_committed += len(tokens)
            chunks.append((request.draft, tokens, hidden))
        rows = [row for row, _, _ in drafting]
        proposals: list[list[int]] = [[] for _ in rows]
        q_rows: list[list[torch.Tensor]] = [[] for _ in rows]
        for step in range(self.max_draft_len):
            results = yield ForwardCall(draft, chunks)
            last_logits = [
                self._draft_logits(row.request, r.logits[-1].float().cpu(), proposals[i])
                for i, (row, r) in enumerate(zip(rows, results, strict=True))
            ]
            chosen = [0] * len(rows)
            sampled = [i for i, row in enumerate(rows) if not row.request.plan.greedy]
            for i, row in enumerate(rows):
                if row.request.plan.greedy:
                    chosen[i] = int(last_logits[i].argmax())
            if sampled:
                probs = self._probs(
                    [rows[i].request for i in sampled],
                    torch.stack([last_logits[i] for i in sampled]),
                    speculative=True,
                )
                entries: list[tuple[_Row, EventKind, int]] = [
                    (rows[i], "draft", step) for i in sampled
                ]
                tokens = self._sample_call(entries, probs, outcomes)
                for k, i in enumerate(sampled):
                    chosen[i] = tokens[k]
                    plan = rows[i].request.plan
                    q = probs[k]
                    if "draft-temperature-skipped" in self.defects:
                        q = sampler.probs_from_logits(last_logits[i].unsqueeze(0), [1.0])[0]
                    q_rows[i].append(sampler.filter_probs(q, plan.top_k, plan.top_p))
            for i in range(len(rows)):
                proposals[i].append(chosen[i])
            chunks = [
                (row.request.draft, [chosen[i]], results[i].hidden_out[-1:])
                for i, row in enumerate(rows)
            ]
        for i, row in enumerate(rows):
            request = row.request
            request.drafts = tuple(proposals[i])
            request.draft_probs = torch.stack(q_rows[i]) if q_rows[i] else None
            outcomes[id(row)].drafts_proposed = request.drafts
