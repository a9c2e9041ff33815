"""specseed: a reproducibility auditor for speculative decoding in LLM inference engines."""

from __future__ import annotations

import warnings

# torch warns "Failed to initialize NumPy" on import when numpy is absent. specseed never
# converts tensors to numpy (numpy is deliberately not a dependency), so the warning is noise
# on every run. Filtered here, before any module imports torch; only this one message.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)

__version__ = "0.1.0"
