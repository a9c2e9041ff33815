"""Checks: pure functions of recorded runs that yield findings. They never run engines.

Importing this package registers every check (``registry.CHECKS``).
"""

from __future__ import annotations

# Registration order is the order of the report's columns.
# isort: off
from specseed.checks import runs  # noqa: F401
from specseed.checks import rng_state  # noqa: F401
from specseed.checks import request_streams  # noqa: F401
from specseed.checks import seed_collisions  # noqa: F401
from specseed.checks import invariance  # noqa: F401
from specseed.checks import distribution  # noqa: F401
from specseed.checks import baseline  # noqa: F401
from specseed.checks import sampler_params  # noqa: F401
from specseed.checks import knobs  # noqa: F401

# isort: on
from specseed.checks.registry import (
    CHECKS,
    CheckSpec,
    get_check,
    load_plugin_checks,
    registered_comparison_ids,
)

PLUGIN_PROBLEMS: list[str] = load_plugin_checks()
"""Check plugins (``specseed.checks`` entry points) that failed to load, one line each."""

__all__ = ["CHECKS", "PLUGIN_PROBLEMS", "CheckSpec", "get_check", "registered_comparison_ids"]
