"""The probability oracle: the target model's exact next-token distributions.

Given a prompt and the tokens emitted so far, the oracle returns the distribution a correct
engine samples the next token from: softmax of the target logits at the request's
temperature, then flashinfer's joint top-k/top-p filter (``filter_probs``, the exact
distribution the joint kernel samples from), renormalised. It loads the checkpoint the
engine served (a local Hugging Face Llama directory, or the built-in tiny model from
``model_seed``) on its own, runs each request's sequence teacher-forced (a prompt the
requests share once), and computes
everything after the logits in float64.

It is independent of the engine under test: it never runs the engine's decode loop,
scheduler or samplers, only the checkpoint's forward. For the reference engine, the logits it
computes are the float32 logits the engine computed (the forward is batch- and
chunk-invariant), so the only difference left is the float32 probability arithmetic of the
engine's kernels; ``analysis`` accounts for that (and for engines whose logits are in a lower
precision) with an explicit envelope.

Where it runs. On the CUDA device when torch sees one (a checkpoint the size a user serves
needs it), else on the CPU; ``SPECSEED_ORACLE_DEVICE`` (``cpu``, ``cuda``, ``auto``) chooses
by hand, and a model that cannot be loaded on CUDA (out of memory, say) is loaded on the CPU,
the description saying why. Either way the forward is float32 (weights are upcast). On the
CPU it is the reference engine's own arithmetic, bit for bit; on CUDA the reductions run in
another order, so the oracle states ``logits_error``: the bound on its logits' deviation, as
a fraction of the row's largest |logit|, that ``analysis`` adds to the engine's rounding in
the envelope (``CUDA_LOGITS_ERROR``). That bound holds only in true float32: TF32 matrix
products (10-bit mantissas, about 1e-3 relative) would be far outside it, so the oracle
turns TF32 off for its forward whatever the process set, and puts the setting back.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import torch

from specseed.distribution.evidence import SamplingSetup
from specseed.traces.records import EngineConfigRecord

if TYPE_CHECKING:
    from specseed.models.kv_cache import KVCache
    from specseed.models.model import LlamaTarget

__all__ = ["OracleUnavailable", "ProbabilityOracle", "SamplingSetup", "distributions", "oracle_for"]


class OracleUnavailable(Exception):
    """The oracle cannot load the model an engine served (the check is then ``skip``)."""


class ProbabilityOracle(Protocol):
    """Exact next-token distributions of the target an engine served."""

    description: str
    vocab_size: int
    # An oracle may also state ``logits_error`` (float): the bound on its logits' deviation
    # as a fraction of the row's largest |logit|; ``analysis`` reads 0 where it is absent.

    def logits(
        self, sequences: Sequence[tuple[Sequence[int], Sequence[int]]]
    ) -> list[torch.Tensor]:
        """Per (prompt, emitted tokens): ``[len(emitted), vocab]`` float64 logits; row ``t``
        is the next-token logits after the prompt and ``emitted[:t]``."""
        ...


def distributions(logits: torch.Tensor, setup: SamplingSetup) -> torch.Tensor:
    """Rows of float64 probabilities after temperature and the joint top-k/top-p filter."""
    from specseed.sampling.distributions import filter_probs

    probs = torch.softmax(logits.to(torch.float64) / setup.temperature, dim=-1)
    return filter_probs(probs, setup.top_k, setup.top_p)


CUDA_LOGITS_ERROR = 2.0**-14
"""``logits_error`` of the float32 oracle on CUDA (TF32 off): 6.1e-5 of the row's largest
|logit|. Measured on an H200 against the CPU float32 forward (``benchmarks/bench_oracle.py``,
tools/gpu/logs/run7-oracle.log): at most 5.3e-7 for the built-in tiny model, 3.4e-6 for a
random Llama-3.2-1B-shaped model and 4.8e-6 for a Llama-3-8B-shaped one, so a margin of
12x at 8B. With TF32 left on the same models measured 4.7e-4, 1.9e-3 and 1.8e-3: outside it,
which is why the oracle turns TF32 off."""

DEVICE_VARIABLE = "SPECSEED_ORACLE_DEVICE"


def oracle_device(requested: str | None = None) -> str:
    """``cuda`` or ``cpu``: ``requested`` (or ``SPECSEED_ORACLE_DEVICE``), ``auto`` (the
    default) meaning CUDA when torch sees a device."""
    wanted = (requested or os.environ.get(DEVICE_VARIABLE) or "auto").strip().lower()
    if wanted not in ("auto", "cpu", "cuda"):
        raise OracleUnavailable(f"{DEVICE_VARIABLE}={wanted!r}: expected cpu, cuda or auto")
    if wanted == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return wanted


@contextmanager
def true_float32() -> Iterator[None]:
    """float32 matrix products in float32 (no TF32) inside, the process's setting after."""
    precision = torch.get_float32_matmul_precision()
    cudnn = torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(precision)
        torch.backends.cudnn.allow_tf32 = cudnn


class ReferenceOracle:
    """The Llama target of a local checkpoint, or the built-in tiny model of a ``model_seed``,
    on ``device`` (default: ``oracle_device()``)."""

    def __init__(
        self, checkpoint: Path | None, model_seed: int, *, device: str | None = None
    ) -> None:
        wanted = oracle_device(device)
        fallback = ""
        try:
            target = _load(checkpoint, model_seed, wanted)
        except Exception as exc:  # any load failure is a reason to skip, stated
            if wanted == "cpu":
                raise OracleUnavailable(f"could not load the target: {exc}") from exc
            fallback = f" (on the CPU: CUDA could not load it: {str(exc).splitlines()[0]})"
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            try:
                target = _load(checkpoint, model_seed, "cpu")
            except Exception as cpu_exc:
                raise OracleUnavailable(f"could not load the target: {cpu_exc}") from cpu_exc
        what = (
            f"checkpoint {checkpoint}"
            if checkpoint is not None
            else f"built-in tiny Llama (model_seed {model_seed})"
        )
        self._set_target(target, f"{what}{fallback}")

    @classmethod
    def of_target(cls, target: LlamaTarget, description: str) -> ReferenceOracle:
        """An oracle over a model already built (benchmarks build random models directly)."""
        oracle = cls.__new__(cls)
        oracle._set_target(target, description)
        return oracle

    def _set_target(self, target: LlamaTarget, description: str) -> None:
        self._target = target
        self.device = target.device
        on_cuda = self.device.type == "cuda"
        self.logits_error = CUDA_LOGITS_ERROR if on_cuda else 0.0
        """Bound on this oracle's logits' deviation from the CPU float32 forward, as a
        fraction of the row's largest |logit| (the envelope adds it)."""
        where = "CUDA, float32 without TF32" if on_cuda else "CPU, float32"
        self.description = f"{description} on {where}"
        self.vocab_size = target.config.vocab_size
        self.max_len = target.max_seq_len

    def logits(
        self, sequences: Sequence[tuple[Sequence[int], Sequence[int]]]
    ) -> list[torch.Tensor]:
        out: list[torch.Tensor] = []
        # Chunks of whole sequences per forward: bounded memory, few Python round trips.
        batch = 32
        on_cpu = self.device.type == "cpu"
        previous = torch.get_num_threads()
        if on_cpu:
            torch.set_num_threads(1)  # see the reference engine: tiny ops, busy 2-core machines
        try:
            for start in range(0, len(sequences), batch):
                chunk = sequences[start : start + batch]
                for prompt, emitted in chunk:
                    if len(prompt) + len(emitted) > self.max_len:
                        raise OracleUnavailable(
                            f"a request of {len(prompt) + len(emitted)} tokens exceeds the "
                            f"target's context of {self.max_len}"
                        )
                with true_float32():
                    parts = self._chunk_logits(chunk)
                if on_cpu:
                    out.extend(part.to(torch.float64) for part in parts)
                else:  # one copy to the host per chunk, not one per request
                    host = torch.cat(parts).cpu().to(torch.float64)
                    out.extend(host.split([part.shape[0] for part in parts]))
        finally:
            torch.set_num_threads(previous)
        return out

    def _chunk_logits(
        self, chunk: Sequence[tuple[Sequence[int], Sequence[int]]]
    ) -> list[torch.Tensor]:
        """Each sequence's logits rows at its emitted positions (from the prompt's last token
        on). A prompt's tokens before its last are computed once for the sequences of the
        chunk that share it, and each sequence goes on from a copy of that cache: the same
        bits as one forward of the whole sequence (the forward is chunk-invariant), with
        fewer rows (150 copies of one prompt in a group)."""
        target = self._target
        if any(not prompt for prompt, _ in chunk):
            raise OracleUnavailable("a request with an empty prompt has no distribution to read")
        sharing: dict[tuple[int, ...], list[int]] = {}
        for index, (prompt, _emitted) in enumerate(chunk):
            sharing.setdefault(tuple(prompt[:-1]), []).append(index)
        prefixes = {prefix: target.new_cache() for prefix in sharing if prefix}
        if prefixes:
            target.forward([(cache, list(prefix)) for prefix, cache in prefixes.items()])
        caches: dict[int, KVCache] = {}
        for prefix, members in sharing.items():
            if prefix:
                copies = prefixes[prefix].forks(len(members))
            else:
                copies = [target.new_cache() for _ in members]
            caches.update(zip(members, copies, strict=True))
        for cache in prefixes.values():
            cache.release()
        ordered = [caches[index] for index in range(len(chunk))]
        inputs = [[prompt[-1], *emitted[:-1]] for prompt, emitted in chunk]
        try:
            results = target.forward(list(zip(ordered, inputs, strict=True)))
        finally:
            for cache in ordered:
                cache.release()
        return [
            result.logits[: len(emitted)]
            for (_prompt, emitted), result in zip(chunk, results, strict=True)
        ]


def _load(checkpoint: Path | None, model_seed: int, device: str) -> LlamaTarget:
    from specseed.models.model import LlamaTarget, build_tiny_target

    if checkpoint is not None:
        return LlamaTarget.from_checkpoint(checkpoint, device=device)
    return build_tiny_target(model_seed, device=device)


_CACHE: dict[tuple[str, int], ReferenceOracle] = {}


def _serves_builtin_model(engine: object) -> bool:
    """Whether ``engine`` serves specseed's built-in model without a checkpoint
    (``EngineInfo.builtin_model``); an engine not registered here does not."""
    from specseed.engine_adapters.registry import engines

    info = engines().get(str(engine))
    return info is not None and info.builtin_model


def oracle_for(engine_config: EngineConfigRecord) -> ProbabilityOracle:
    """The oracle of the target a trace's engine served (cached per checkpoint).

    Any engine whose recorded configuration names a checkpoint specseed loads (``checkpoint``:
    a local Llama directory) or the built-in model (``model_seed``, of an engine whose
    ``EngineInfo.builtin_model`` says it serves one) gets one; otherwise ``OracleUnavailable``
    says why.
    """
    checkpoint = engine_config.checkpoint
    if checkpoint is None and not _serves_builtin_model(engine_config.name):
        raise OracleUnavailable(
            f"engine {engine_config.name} names no checkpoint specseed can load"
        )
    # The built-in model's seed is an engine option (1.0/1.1 traces read with it
    # moved there).
    seed = engine_config.options.get("model_seed", 0) if checkpoint is None else 0
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise OracleUnavailable(f"the recorded model_seed {seed!r} is not an integer")
    key = (checkpoint or "", seed)
    if key not in _CACHE:
        _CACHE[key] = ReferenceOracle(Path(checkpoint) if checkpoint else None, seed)
    return _CACHE[key]
