"""Checkpoint directories specseed writes for engines to load (``specseed make-checkpoint``)."""

from __future__ import annotations

from specseed.engine_adapters.checkpoints.make import CheckpointBundle, make_checkpoint

__all__ = ["CheckpointBundle", "make_checkpoint"]
