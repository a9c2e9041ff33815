"""The reference engine's neural network: one import point for the decode loop.

- :class:`LlamaTarget` (target.py): Llama target with per-request KV caches; ``forward``
  returns logits and the captured hidden states the draft head consumes.
- :class:`Eagle3DraftHead` (draft.py): EAGLE3 head; loads TRT-LLM draft directories or is
  derived from the target.
- :class:`KVCache` (kv_cache.py): a request's attention state; ``truncate`` drops rejected
  draft positions.
- :data:`TINY_MODEL`, :func:`build_tiny_target`, :func:`build_tiny_draft` (tiny.py): the
  built-in models of the default audit.
- :func:`fingerprint`: a stable hash of a logits row (:func:`fingerprints`: of each row).

Numerics are batch-invariant on the CPU (numerics.py explains how and why).
"""

from __future__ import annotations

from specseed.models.config import Eagle3DraftConfig, LlamaConfig, RopeScaling
from specseed.models.draft import DerivedInit, DraftOutput, Eagle3DraftHead
from specseed.models.fingerprint import fingerprint, fingerprints
from specseed.models.kv_cache import KVCache
from specseed.models.target import (
    LlamaTarget,
    RandomInit,
    TargetOutput,
    default_capture_layers,
)
from specseed.models.tiny import (
    TINY_MODEL,
    TinyModelSpec,
    build_tiny_draft,
    build_tiny_target,
)

__all__ = [
    "TINY_MODEL",
    "DerivedInit",
    "DraftOutput",
    "Eagle3DraftConfig",
    "Eagle3DraftHead",
    "KVCache",
    "LlamaConfig",
    "LlamaTarget",
    "RandomInit",
    "RopeScaling",
    "TargetOutput",
    "TinyModelSpec",
    "build_tiny_draft",
    "build_tiny_target",
    "default_capture_layers",
    "fingerprint",
    "fingerprints",
]
