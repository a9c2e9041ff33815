"""Running the engine a bundle names only when the user said so.

A bundle comes from elsewhere: its model.yaml may name a stranger's server, a checkpoint path
or an API key variable. ``replay``, ``minimize`` and ``report --minimize`` run it only when it
is the built-in reference engine (it reads no file, no variable, no network address) or the
user passed ``--engine-from-bundle``; then they say what runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.markup import escape

from specseed.core.errors import InputError

if TYPE_CHECKING:
    from specseed.bundle.format import Bundle


def self_contained(engine: str) -> bool:
    """An engine that reads no file, no variable and no network address from its options:
    the built-in reference engine. Only such an engine runs because a bundle names it."""
    from specseed.core.errors import SpecseedError
    from specseed.engine_adapters.registry import get_engine

    try:
        info = get_engine(engine)
    except SpecseedError:
        return False
    return info.builtin_model and info.source == "specseed"


def engine_consent(bundle: Bundle, allowed: bool, command: str, say: Callable[[str], None]) -> None:
    """Refuse to run an engine only the bundle names (a stranger's server, a path, an
    environment variable) unless the user said so (``allowed``); ``say`` (Rich markup) what
    will run when they did."""
    engine = bundle.config.engine
    if self_contained(engine.name):
        return
    options = bundle.config.engine.options
    where = [
        f"{key} {options[key]}"
        for key in ("base_url", "api_key_env")
        if isinstance(options, dict) and options.get(key)
    ]
    where += [
        f"{key} {getattr(engine, key)}"
        for key in ("checkpoint", "draft_checkpoint")
        if getattr(engine, key, None)
    ]
    described = f"engine {engine.name}" + (f" ({', '.join(where)})" if where else "")
    if not allowed:
        raise InputError(
            f"{command}: the bundle names {described}; refusing to run an engine, contact a "
            "server or read a variable because a bundle says so",
            hint="give --model YOUR_MODEL_YAML, or pass --engine-from-bundle to run it",
        )
    say(f"{command}: running the bundle's {escape(described)}")


__all__ = ["engine_consent", "self_contained"]
