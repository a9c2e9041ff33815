"""The built-in tiny model: the target and draft head the default audit runs on.

Small enough that a full built-in audit (on the order of 100 runs x 8 requests x 32 tokens,
K = 3) takes seconds on two CPU cores, yet with peaked, context-dependent next-token
distributions, so that greedy and sampled runs see full, partial and zero acceptance.
Measured figures are in the docstring of :data:`TINY_MODEL`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specseed.models.config import LlamaConfig
from specseed.models.draft import DerivedInit, Eagle3DraftHead
from specseed.models.target import LlamaTarget, RandomInit


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

    def build_target(self, model_seed: int, *, device: str = "cpu") -> LlamaTarget:
        """The seeded target for ``model_seed`` (weights are the same on any device)."""
        return LlamaTarget.random(
            self.config, model_seed, init=self.init, max_seq_len=self.max_seq_len, device=device
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
"""The default tiny model: vocab 512, hidden 64, 4 layers, 4 heads / 2 KV heads (head_dim
16), SwiGLU 128, untied lm_head, KV capacity 256; EAGLE3 head over layers (0, 2, 3) with a
384-token draft vocabulary. 214k target and 90k draft parameters.

Measured on the 2-core development machine (torch 2.13 CPU), model_seed 0-3:

- next-token distribution at temperature 1 along sampled sequences: mean entropy 2.17 nats
  (uniform would be 6.24), perplexity 8.8, mean top-1 probability 0.44;
- acceptance with K = 3 (tests/models/test_draft_acceptance.py, 4 seeds x
  8 requests x 32 tokens; fraction of iterations with 0 / 1-2 / 3 drafts accepted):
  greedy 0.50 / 0.39 / 0.11, temperature 0.8 0.40 / 0.40 / 0.20, temperature 1.0
  0.35 / 0.41 / 0.25;
- forward latency, best of 5 (benchmarks/bench_model_forward.py, 2 threads, idle machine):
  target 0.56 ms for 1 request x 1 token, 0.72 ms for 1 x 4, 1.10 ms for 16 x 1, 2.5 ms for
  16 x 4; draft head 0.21, 0.27, 0.44 and 1.0 ms. A batched greedy loop of 8 requests x 32
  tokens takes about 75 ms, so 100 such runs take under 10 s. On a busy machine two OpenMP
  threads spin against other processes and run several times slower than one thread.
"""


def build_tiny_target(model_seed: int, *, device: str = "cpu") -> LlamaTarget:
    """The built-in target for ``model_seed`` (``TINY_MODEL.build_target``)."""
    return TINY_MODEL.build_target(model_seed, device=device)


def build_tiny_draft(target: LlamaTarget, model_seed: int) -> Eagle3DraftHead:
    """The built-in draft head for a built-in target (``TINY_MODEL.build_draft``)."""
    return TINY_MODEL.build_draft(target, model_seed)
