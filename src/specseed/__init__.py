"""specseed: a reproducibility auditor for speculative decoding in LLM inference engines."""

from __future__ import annotations

import warnings

from specseed.core.version import __version__ as __version__

# torch warns "Failed to initialize NumPy" on import when numpy is absent. specseed never
# converts tensors to numpy (numpy is deliberately not a dependency), so the warning is noise
# on every run. Filtered here, before any module imports torch; only this one message.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)


_API = ("Report", "load_config", "server_config")
"""Names of the public API (``specseed.api``) also reachable here, loaded on first use so that
``import specseed`` stays light. The audit itself is ``specseed.api.audit`` (the ``Audit``
object it runs is ``specseed.workflows.audit.Audit``)."""


def __getattr__(name: str) -> object:
    if name in _API:
        # On first use, so that ``import specseed`` stays light. The package's top is the
        # top of the house (no module of specseed imports it): this import runs down.
        import importlib

        return getattr(importlib.import_module("specseed.api"), name)
    raise AttributeError(f"module 'specseed' has no attribute {name!r}")
