"""Lazy registry of engine adapters: names map to ``"module:Class"`` strings.

Listing engines and validating model.yaml never import an adapter module, so neither imports
torch or an engine package. ``load_adapter_class`` imports on demand and turns a missing
package into an ``EngineUnavailable`` error that says what to install.
"""

from __future__ import annotations

import importlib

from specseed.errors import EngineError, EngineUnavailable

ADAPTERS: dict[str, str] = {
    "reference": "specseed.engine_adapters.reference.engine:ReferenceEngine",
    "trtllm": "specseed.engine_adapters.trtllm:TrtllmEngine",
    "vllm": "specseed.engine_adapters.vllm.engine:VllmEngine",
}
ENGINE_NAMES: tuple[str, ...] = tuple(ADAPTERS)


def load_adapter_class(name: str) -> type:
    """Import and return the adapter class registered under ``name``."""
    try:
        target = ADAPTERS[name]
    except KeyError:
        known = ", ".join(ENGINE_NAMES)
        raise EngineError(f"unknown engine {name!r}", hint=f"known engines: {known}") from None
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise EngineUnavailable(
            f"engine {name!r} needs the Python package {exc.name!r}, which is not installed",
            hint=f"install it with: pip install 'specseed[{name}]'",
        ) from exc
    adapter_class: type = getattr(module, class_name)
    return adapter_class
