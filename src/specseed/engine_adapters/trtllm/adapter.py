"""The TensorRT-LLM adapter: ``tensorrt_llm.LLM`` (PyTorch backend, one-model speculation),
observed through the flashinfer tap.

NEVER EXECUTED HERE: TensorRT-LLM cannot be installed on the machines this was written on
(PyPI hosts a placeholder; the wheels come from NVIDIA's index). What runs on the CPU is what
this module is made of: the options model, ``config`` (model.yaml to ``LLM`` and
``SamplingParams`` arguments), ``observe`` (tap records to steps, tested on recorded tap
data) and the failure when the package is missing. API names are checked against
TensorRT-LLM's source (see ``config``); ``TLLM_WORKER_USE_SINGLE_PROCESS=1`` keeps the
executor worker in this process, where the tap is (the default spawns an MPI worker the tap
cannot see; TensorRT-LLM's own tests set it for the same reason).

A run: the engine is built once per distinct ``LLM`` configuration (CUDA graphs off while
tapping), the tap is installed after construction, then warmup (all warmup requests submitted
at once, a burst above ``max_num_requests`` if the scenario asks), prior traffic and the
scenario's requests each go through one ``LLM.generate`` call. The tap's calls of each phase
become steps where they can be attributed (``observe``); otherwise the run says steps are
not observed.
"""

from __future__ import annotations

import importlib
import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specseed.core.errors import EngineError, EngineUnavailable
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
from specseed.engine_adapters.trtllm.config import (
    ConfigurationError,
    LlmSpec,
    llm_spec,
    sampling_kwargs,
)
from specseed.engine_adapters.trtllm.info import ENGINE
from specseed.engine_adapters.trtllm.options import TrtllmOptions
from specseed.traces.records import FinishReason, Observability, Phase, TraceRecorder

INSTALL_HINT = (
    "install TensorRT-LLM from NVIDIA's package index (pip install tensorrt-llm "
    "--extra-index-url https://pypi.nvidia.com); PyPI's tensorrt-llm is only a placeholder"
)


def import_tensorrt_llm() -> Any:
    """``tensorrt_llm``, or ``EngineUnavailable`` saying how to install it."""
    try:
        return importlib.import_module("tensorrt_llm")
    except ImportError as exc:
        raise EngineUnavailable(
            f"engine 'trtllm' needs the tensorrt_llm package, which is not installed ({exc})",
            hint=INSTALL_HINT,
        ) from exc


class TrtllmEngine(EngineAdapter):
    """TensorRT-LLM's LLM API with an EAGLE3 one-model or MTP speculative config."""

    info = ENGINE

    def __init__(self, settings: EngineSettings) -> None:
        super().__init__(settings)
        self._trtllm = import_tensorrt_llm()
        self.options: TrtllmOptions = options_of(settings, TrtllmOptions)
        # The executor worker must run in this process for the tap to see its calls.
        os.environ["TLLM_WORKER_USE_SINGLE_PROCESS"] = "1"
        self._llm: Any = None
        self._spec: LlmSpec | None = None
        self._tap: Any = None
        self.finished: dict[str, FinishReason | None] = {}
        """Why each request of the last ``generate`` ended, as TensorRT-LLM said."""

    # -- what the engine can take -----------------------------------------------------------

    def encode(self, prompt: tuple[int, ...] | str) -> tuple[int, ...]:
        if isinstance(prompt, str):
            raise ValueError(
                "engine trtllm takes prompt token ids (the checkpoint is loaded without a "
                "tokenizer): write the prompt as a list of ids"
            )
        if any(token < 0 for token in prompt):
            raise ValueError("prompt token ids must be non-negative")
        return tuple(prompt)

    def validate(self, plan: RunPlan) -> list[str]:
        problems = super().validate(plan)
        where = f"{plan.scenario}/{plan.run}"
        if plan.settings.device != "cuda":
            problems.append(f"{where}: engine trtllm runs on CUDA only (set engine.device: cuda)")
        late = [r.request_id for r in (*plan.prior_traffic, *plan.requests) if r.arrival_step]
        if late:
            problems.append(
                f"{where}: engine trtllm schedules requests itself; arrival steps cannot be "
                f"placed (requests {', '.join(late)})"
            )
        try:
            llm_spec(plan.settings, options_of(plan.settings, TrtllmOptions))
        except ConfigurationError as exc:
            problems.append(f"{where}: {exc}")
        return problems

    def observes(self, plan: RunPlan) -> Observability:
        from specseed.engine_adapters.trtllm.observe import tap_observability

        options = options_of(plan.settings, TrtllmOptions)
        return tap_observability(
            plan.settings,
            options.cuda_graphs,
            (plan.prior_traffic, plan.requests),
            tree=options.tree,
        )

    def environment(self) -> dict[str, str]:
        env = {
            "engine": "trtllm",
            "tensorrt_llm": str(getattr(self._trtllm, "__version__", "unknown")),
            "python": platform.python_version(),
        }
        try:
            import flashinfer

            env["flashinfer"] = str(getattr(flashinfer, "__version__", "unknown"))
        except ImportError:
            env["flashinfer"] = "not installed"
        try:
            import torch

            env["torch"] = torch.__version__
            if torch.cuda.is_available():
                env["gpu"] = torch.cuda.get_device_name(0)
        except ImportError:  # pragma: no cover - tensorrt_llm needs torch
            pass
        return env

    # -- a run ------------------------------------------------------------------------------

    def start_run(self, plan: RunPlan) -> RunStart:
        spec = llm_spec(plan.settings, options_of(plan.settings, TrtllmOptions))
        fresh = self._spec != spec or self._llm is None
        if fresh:
            self._shutdown()
            self._llm = self._build(spec)
            self._spec = spec
        return RunStart(fresh_engine=fresh)

    def _build(self, spec: LlmSpec) -> Any:
        llmapi = importlib.import_module("tensorrt_llm.llmapi")
        kwargs: dict[str, Any] = dict(spec.kwargs)
        kwargs["kv_cache_config"] = llmapi.KvCacheConfig(**spec.kv_cache)
        kwargs["cuda_graph_config"] = llmapi.CudaGraphConfig() if spec.cuda_graphs else None
        if spec.speculative is not None:
            config_class = getattr(llmapi, spec.speculative.config_class)
            kwargs["speculative_config"] = config_class(**spec.speculative.kwargs)
        try:
            return self._trtllm.LLM(**kwargs)
        except Exception as exc:  # the engine could not start at all: exit 3
            raise EngineError(f"tensorrt_llm.LLM could not start: {exc}") from exc

    def serve(self, plan: RunPlan, recorder: TraceRecorder) -> Mapping[str, tuple[int, ...]]:
        from specseed.engine_adapters.trtllm.observe import UnattributableCalls, steps_from_tap
        from specseed.taps.flashinfer_tap import FlashinferTap

        observes = self.observes(plan)
        tap = FlashinferTap().install() if observes.rng_state is not None else None
        step = 0
        outputs: dict[str, tuple[int, ...]] = {}
        try:
            phases: list[tuple[Phase, Sequence[RequestPlan]]] = [
                ("warmup", warmup_requests(plan)),
                ("prior", plan.prior_traffic),
                ("scenario", plan.requests),
            ]
            for phase, requests in phases:
                if not requests:
                    continue
                if tap is not None:
                    tap.calls.clear()
                recorder.at(step, phase, len(requests))
                tokens = self._generate(requests)
                if phase == "scenario":
                    outputs = tokens
                    for request_id, reason in self.finished.items():
                        recorder.finish(request_id, reason)
                if tap is None or not observes.steps or phase == "warmup":
                    continue  # warmup requests are unseeded: their rows are not attributable
                blind = tap.blind_spots()
                if blind:
                    raise UnattributableCalls("; ".join(blind))
                for record in steps_from_tap(tap.calls, requests, phase, first_step=step):
                    recorder.step(record)
                    step += 1
        finally:
            if tap is not None:
                tap.uninstall()
        return outputs

    def _generate(self, requests: Sequence[RequestPlan]) -> dict[str, tuple[int, ...]]:
        sampling_params = [self._sampling_params(r) for r in requests]
        prompts = [list(self.encode(r.prompt)) for r in requests]
        results = self._llm.generate(prompts, sampling_params, use_tqdm=False)
        outputs: dict[str, tuple[int, ...]] = {}
        self.finished = {}
        for request, result in zip(requests, results, strict=True):
            # n children come back as result.outputs[i]; child i is recorded as id#i.
            for child, output in zip(request.children(), result.outputs, strict=False):
                outputs[child.request_id] = tuple(int(t) for t in output.token_ids)
                reason = getattr(output, "finish_reason", None)
                self.finished[child.request_id] = reason if reason in ("stop", "length") else None
        return outputs

    def traffic_limits(self) -> TrafficLimits:
        # Stop strings need the tokenizer this adapter loads TensorRT-LLM without.
        return TrafficLimits(refused_knobs=frozenset({"stop"}))

    def _sampling_params(self, request: RequestPlan) -> Any:
        if request.stop is not None:
            raise KnobRefused(
                "stop strings: specseed loads TensorRT-LLM without a tokenizer "
                "(skip_tokenizer_init), so it cannot match text; use stop_token_ids"
            )
        vocab = None
        if request.logit_bias is not None:
            from specseed.models.checkpoint import config_vocab_size

            vocab = config_vocab_size(Path(str(self.settings.checkpoint)))
        kwargs = sampling_kwargs(request, self.options, vocab)
        if "embedding_bias" in kwargs:
            import torch

            kwargs["embedding_bias"] = torch.tensor(kwargs["embedding_bias"], dtype=torch.float32)
        return self._trtllm.SamplingParams(**kwargs)

    def close(self) -> None:
        self._shutdown()

    def _shutdown(self) -> None:
        if self._llm is not None:
            shutdown = getattr(self._llm, "shutdown", None)
            if shutdown is not None:
                shutdown()
            self._llm = None
