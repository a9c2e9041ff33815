"""The probability oracle: the target model's exact next-token distributions.

Given a prompt and the tokens emitted so far, the oracle returns the distribution a correct
engine samples the next token from: softmax of the target logits at the request's
temperature, then flashinfer's joint top-k/top-p filter (``filter_probs``, the exact
distribution the joint kernel samples from), renormalised. It loads the checkpoint the
engine served (a local Hugging Face Llama directory, or the built-in tiny model from
``model_seed``) on its own, runs each request's whole sequence teacher-forced, and computes
everything after the logits in float64.

It is independent of the engine under test: it never runs the engine's decode loop,
scheduler or samplers, only the checkpoint's forward. For the reference engine, the logits it
computes are the float32 logits the engine computed (the forward is batch- and
chunk-invariant), so the only difference left is the float32 probability arithmetic of the
engine's kernels; ``analysis`` accounts for that (and for engines whose logits are in a lower
precision) with an explicit envelope.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from specseed.traces.records import EngineConfigRecord


class OracleUnavailable(Exception):
    """The oracle cannot load the model an engine served (the check is then ``skip``)."""


@dataclass(frozen=True)
class SamplingSetup:
    """How a request samples: what turns logits into its next-token distribution."""

    temperature: float
    top_k: int
    top_p: float


class ProbabilityOracle(Protocol):
    """Exact next-token distributions of the target an engine served."""

    description: str
    vocab_size: int

    def logits(
        self, sequences: Sequence[tuple[Sequence[int], Sequence[int]]]
    ) -> list[torch.Tensor]:
        """Per (prompt, emitted tokens): ``[len(emitted), vocab]`` float64 logits; row ``t``
        is the next-token logits after the prompt and ``emitted[:t]``."""
        ...


def distributions(logits: torch.Tensor, setup: SamplingSetup) -> torch.Tensor:
    """Rows of float64 probabilities after temperature and the joint top-k/top-p filter."""
    from specseed.engine_adapters.reference.sampler import filter_probs

    probs = torch.softmax(logits.to(torch.float64) / setup.temperature, dim=-1)
    return filter_probs(probs, setup.top_k, setup.top_p)


class ReferenceOracle:
    """The Llama target of a local checkpoint, or the built-in tiny model of a ``model_seed``."""

    def __init__(self, checkpoint: Path | None, model_seed: int) -> None:
        from specseed.engine_adapters.reference.model import LlamaTarget, build_tiny_target

        try:
            if checkpoint is not None:
                self._target = LlamaTarget.from_checkpoint(checkpoint)
                self.description = f"checkpoint {checkpoint}"
            else:
                self._target = build_tiny_target(model_seed)
                self.description = f"built-in tiny Llama (model_seed {model_seed})"
        except Exception as exc:  # any load failure is a reason to skip, stated
            raise OracleUnavailable(f"could not load the target: {exc}") from exc
        self.vocab_size = self._target.config.vocab_size
        self.max_len = self._target.max_seq_len

    def logits(
        self, sequences: Sequence[tuple[Sequence[int], Sequence[int]]]
    ) -> list[torch.Tensor]:
        out: list[torch.Tensor] = []
        # Chunks of whole sequences per forward: bounded memory, few Python round trips.
        batch = 32
        previous = torch.get_num_threads()
        torch.set_num_threads(1)  # see the reference engine: tiny ops, busy 2-core machines
        try:
            for start in range(0, len(sequences), batch):
                chunk = sequences[start : start + batch]
                caches = [self._target.new_cache() for _ in chunk]
                inputs = []
                for prompt, emitted in chunk:
                    tokens = [*prompt, *emitted[:-1]] if emitted else list(prompt)
                    if len(tokens) + 1 > self.max_len:
                        raise OracleUnavailable(
                            f"a request of {len(tokens) + 1} tokens exceeds the target's "
                            f"context of {self.max_len}"
                        )
                    inputs.append(tokens)
                results = self._target.forward(list(zip(caches, inputs, strict=True)))
                for (prompt, emitted), result, cache in zip(chunk, results, caches, strict=True):
                    first = len(prompt) - 1
                    out.append(result.logits[first : first + len(emitted)].to(torch.float64))
                    cache.release()
        finally:
            torch.set_num_threads(previous)
        return out


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
