"""``specseed make-checkpoint``: write a small random target, EAGLE3 draft head and tokenizer."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from specseed.cli.error_boundary import error_boundary
from specseed.core.secrets import SafeConsole

out = SafeConsole()


def make_checkpoint(
    directory: Annotated[Path, typer.Argument(help="Directory to write (created).")],
    seed: Annotated[int, typer.Option("--seed", help="Weights seed; same seed, same bytes.")] = 0,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite a checkpoint in a non-empty directory.")
    ] = False,
) -> None:
    """Write a tiny random Llama target, its EAGLE3 draft head and a local tokenizer.

    The Hugging Face layout vLLM, TensorRT-LLM, transformers and the reference engine load:
    DIR/target (model and tokenizer) and DIR/draft (EAGLE3 head). Nothing is downloaded.

    [bold]Example[/]

      specseed make-checkpoint ckpt --seed 0
      # then in model.yaml, under engine:
      #   checkpoint: ckpt/target
      #   draft_checkpoint: ckpt/draft
    """
    from specseed.models.make_checkpoint import make_checkpoint as make

    with error_boundary():
        bundle = make(directory, seed, force=force)
    out.print(f"wrote {bundle.target} (target model and tokenizer)")
    out.print(f"wrote {bundle.draft} (EAGLE3 draft head)")
