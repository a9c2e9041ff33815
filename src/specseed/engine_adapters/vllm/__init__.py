"""The ``vllm`` engine: ``vllm.LLM`` driven in-process, its RNG consumption observed by wraps.

Importing this package does not import vLLM; :mod:`.engine` does, when an audit starts it.
"""

from __future__ import annotations

from specseed.engine_adapters.vllm.options import VllmOptions

__all__ = ["VllmOptions"]
