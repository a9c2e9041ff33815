"""Checks: pure functions of recorded runs that yield findings. They never run engines.

Importing this package registers every check (``registry.CHECKS``).
"""

from __future__ import annotations

# Import order is the order of the verdict table's columns: run checks, then comparisons.
from specseed.checks import invariance, rng_state, runs, streams  # noqa: F401
from specseed.checks.registry import CHECKS, CheckSpec, get_check

__all__ = ["CHECKS", "CheckSpec", "get_check"]
