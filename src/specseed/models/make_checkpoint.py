"""``specseed make-checkpoint``: a small random Llama target, its EAGLE3 draft head and a tokenizer.

The directory it writes is what engines load, in the Hugging Face layout:

- ``DIR/target``: ``config.json`` (``LlamaForCausalLM``), ``model.safetensors``,
  ``generation_config.json``, ``tokenizer.json`` and ``tokenizer_config.json``;
- ``DIR/draft``: ``config.json`` (``LlamaForCausalLMEagle3``) and ``model.safetensors`` with
  TensorRT-LLM's EAGLE3 names (``midlayer.*``, ``fc``, ``d2t``/``t2d``; vLLM maps ``midlayer.``
  to ``layers.0.`` in ``vllm/model_executor/models/llama_eagle3.py``), and
  ``eagle_config.eagle_aux_hidden_state_layer_ids`` in vLLM's numbering.

The weights are the reference engine's seeded tiny model (``models.tiny``), at a
size every engine accepts: vLLM's CPU attention backend needs ``head_dim >= 32`` (vLLM 0.32.0),
so the model has 2 query heads and 1 KV head of width 32 over a hidden size of 64; the rest is
the built-in tiny model (vocabulary 512, 4 layers, SwiGLU 128). Everything is a function of
the seed: the same seed writes byte-identical files.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from specseed.core.errors import InputError
from specseed.models.config import LlamaConfig
from specseed.models.tiny import TinyModelSpec

CHECKPOINT_MODEL = TinyModelSpec(
    config=LlamaConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=512,
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
        bos_token_id=1,
        eos_token_id=2,
    ),
    max_seq_len=512,
)
"""The model ``make-checkpoint`` writes: the built-in tiny model with head_dim 32 (2 heads,
1 KV head), so vLLM's CPU attention accepts it. The draft head has a 384-token vocabulary
(``d2t`` in use) and reads target layers (0, 2, 3)."""

TARGET_DIR = "target"
DRAFT_DIR = "draft"


@dataclass(frozen=True)
class CheckpointBundle:
    """Where ``make_checkpoint`` wrote each part."""

    root: Path
    target: Path
    """The target model directory (tokenizer included): ``engine.checkpoint``."""
    draft: Path
    """The EAGLE3 draft head directory: ``engine.draft_checkpoint``."""
    seed: int


def make_checkpoint(directory: Path, seed: int = 0, *, force: bool = False) -> CheckpointBundle:
    """Write the target, its draft head and a tokenizer under ``directory`` (created).

    An existing non-empty ``directory`` is refused unless ``force`` (then its ``target`` and
    ``draft`` folders are replaced; nothing else in it is touched).

    Everything is written into a temporary folder beside ``directory`` and moved into place
    at the end, so a crash midway leaves no half-written checkpoint (that would then demand
    ``--force``).
    """
    from specseed.models.tokenizer import write_tokenizer

    root = Path(directory)
    if seed < 0:
        raise InputError(f"--seed {seed}: the seed must be >= 0")
    if root.exists() and not root.is_dir():
        raise InputError(f"{root} exists and is not a directory")
    if root.is_dir() and any(root.iterdir()) and not force:
        raise InputError(f"{root} is not empty", hint="pass --force to overwrite its checkpoint")
    target = CHECKPOINT_MODEL.build_target(seed)
    draft = CHECKPOINT_MODEL.build_draft(target, seed)
    config = CHECKPOINT_MODEL.config
    staging: Path | None = None
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{root.name}.partial-", dir=root.parent))
        target.save_checkpoint(staging / TARGET_DIR)
        draft.save_checkpoint(staging / DRAFT_DIR)
        write_tokenizer(
            staging / TARGET_DIR, config.vocab_size, max_length=config.max_position_embeddings
        )
        _write_generation_config(staging / TARGET_DIR, config)
        _move_into_place(staging, root)
    except OSError as exc:
        raise InputError(f"cannot write {root}: {exc.strerror or exc}") from None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return CheckpointBundle(root=root, target=root / TARGET_DIR, draft=root / DRAFT_DIR, seed=seed)


def _move_into_place(staging: Path, root: Path) -> None:
    """Rename the finished ``target`` and ``draft`` into ``root`` (same file system: each
    rename is atomic); folders they replace are moved into ``staging`` and removed with it."""
    root.mkdir(exist_ok=True)
    for name in (TARGET_DIR, DRAFT_DIR):
        existing = root / name
        if existing.is_symlink() or existing.is_file():
            existing.unlink()
        elif existing.exists():
            existing.rename(staging / f"old-{name}")
        (staging / name).rename(existing)


def _write_generation_config(target_dir: Path, config: LlamaConfig) -> None:
    # Without a generation_config.json, engines that read one (vLLM's default
    # ``generation_config="auto"``) fall back to library defaults; an explicit empty set of
    # sampling defaults keeps every request's parameters exactly as specseed sends them.
    generation = {"bos_token_id": config.bos_token_id, "eos_token_id": config.eos_token_id}
    (target_dir / "generation_config.json").write_text(
        json.dumps(generation, indent=2) + "\n", encoding="utf-8"
    )
