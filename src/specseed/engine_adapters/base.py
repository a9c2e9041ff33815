"""The adapter contract: what an engine adapter receives and what it must produce.

The runner resolves model.yaml and a scenario's run into a :class:`RunPlan`; an adapter
serves it on a fresh engine state and records every step into a ``TraceRecorder``. Failures
inside a run (an exception in a step) are recorded in the trace, not raised: one scenario's
crash must not stop the audit. Only an engine that cannot start at all raises ``EngineError``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

from specseed.trace import Phase, RunTrace, TraceRecorder


@dataclass(frozen=True)
class EngineSettings:
    """Engine configuration of one run (model.yaml's ``engine`` plus the run's overrides)."""

    name: str = "reference"
    device: Literal["cpu", "cuda"] = "cpu"
    max_num_requests: int = 8
    max_draft_len: int = 3
    verification: Literal["rejection", "strict"] = "rejection"
    overlap_scheduler: bool = False
    checkpoint: Path | None = None
    draft_checkpoint: Path | None = None
    model_seed: int = 0
    rng_profile: str = "ideal"
    """The contract the engine follows (reference engine only)."""
    defects: tuple[str, ...] = ()
    """Defect ids to inject (reference engine only)."""
    sampling_backend: Literal["cpu", "flashinfer"] = "cpu"
    """Where the reference engine samples: specseed's CPU twins or flashinfer's kernels."""

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "device": self.device,
            "max_num_requests": self.max_num_requests,
            "max_draft_len": self.max_draft_len,
            "verification": self.verification,
            "overlap_scheduler": self.overlap_scheduler,
            "checkpoint": str(self.checkpoint) if self.checkpoint else None,
            "draft_checkpoint": str(self.draft_checkpoint) if self.draft_checkpoint else None,
            "model_seed": self.model_seed,
            "rng_profile": self.rng_profile,
            "defects": list(self.defects),
            "sampling_backend": self.sampling_backend,
        }


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

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class RunPlan:
    """A run: warmup, prior traffic, then the scenario's requests, on a fresh engine."""

    scenario: str
    run: str
    settings: EngineSettings
    requests: tuple[RequestPlan, ...]
    warmup_batches: tuple[int, ...] = ()
    """Warmup batch sizes run before serving (may exceed ``max_num_requests``)."""
    prior_traffic: tuple[RequestPlan, ...] = field(default=())
    """Requests served to completion before the scenario's requests arrive."""


class EngineAdapter(ABC):
    """An engine that can serve run plans. Constructed once per audit (loads the model)."""

    name: ClassVar[str]

    @abstractmethod
    def run(self, plan: RunPlan, recorder: TraceRecorder) -> RunTrace:
        """Serve ``plan`` from a fresh engine state; record every step; return the trace."""

    @abstractmethod
    def environment(self) -> dict[str, str]:
        """Versions and devices worth recording in every trace and report."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release engine resources."""
