"""A stand-in ``flashinfer.sampling`` for CPU tests of the tap: specseed's CPU twins.

The twins have flashinfer 0.7.4's names, arguments, return values and draw order, so the tap
sees on the CPU exactly the argument and result shapes the real module gives it. Each
function is a thin wrapper of its own, so that the tap's search for aliases finds only the
stand-in's function objects (not ``specseed.sampling``'s).
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from specseed import sampling

NAMES = (
    "sampling_from_probs",
    "top_p_sampling_from_probs",
    "top_k_sampling_from_probs",
    "min_p_sampling_from_probs",
    "top_k_top_p_sampling_from_probs",
    "chain_speculative_sampling",
)


def make(version: str, name: str = "standin_flashinfer_pkg") -> ModuleType:
    """A package ``name`` with ``__version__`` and a ``sampling`` submodule, in sys.modules."""
    package = ModuleType(name)
    package.__version__ = version  # type: ignore[attr-defined]
    module = ModuleType(f"{name}.sampling")
    for fn_name in NAMES:
        twin = getattr(sampling, fn_name)

        def function(*args: Any, _twin: Any = twin, **kwargs: Any) -> Any:
            return _twin(*args, **kwargs)

        function.__name__ = fn_name
        function.__wrapped__ = twin  # type: ignore[attr-defined]  # signature of the twin
        setattr(module, fn_name, function)
    package.sampling = module  # type: ignore[attr-defined]
    sys.modules[name] = package
    sys.modules[module.__name__] = module
    return module


def drop(name: str = "standin_flashinfer_pkg") -> None:
    for key in (name, f"{name}.sampling", f"{name}_importer"):
        sys.modules.pop(key, None)
