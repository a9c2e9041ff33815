"""specseed: a reproducibility auditor for speculative decoding in LLM inference engines."""

from __future__ import annotations

import warnings

# torch warns "Failed to initialize NumPy" on import when numpy is absent. specseed never
# converts tensors to numpy (numpy is deliberately not a dependency), so the warning is noise
# on every run. Filtered here, before any module imports torch; only this one message.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)

__version__ = "0.1.0"

_API = ("Report", "load_config", "server_config")
"""Names of the public API (``specseed.api``) also reachable here, loaded on first use so that
``import specseed`` stays light. The audit itself is ``specseed.api.audit`` (the ``Audit``
object it runs is ``specseed.workflows.audit.Audit``)."""


def __getattr__(name: str) -> object:
    if name in _API:
        # By name, on first use: the package's top is a facade over its top layer (api/),
        # not a module of the data layer importing upwards (tests/test_architecture.py).
        import importlib

        return getattr(importlib.import_module("specseed.api"), name)
    raise AttributeError(f"module 'specseed' has no attribute {name!r}")
