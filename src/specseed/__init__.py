"""specseed: a reproducibility auditor for speculative decoding in LLM inference engines."""

from __future__ import annotations

__version__ = "0.1.0"
