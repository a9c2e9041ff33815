"""Running the engine a bundle names only when the user said so.

A bundle comes from elsewhere: its model.yaml may name a stranger's server, a checkpoint or
tokenizer path or an API key variable. ``replay``, ``minimize`` and ``report``'s shrinking run
it only when it is the built-in reference engine on its built-in model (it reads no file, no
variable, no network address) or the user passed ``--engine-from-bundle``; then they say what
runs. A reference engine with a checkpoint is no exception: the checkpoint is a path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.markup import escape

from specseed.core.errors import InputError
from specseed.core.text import printable

if TYPE_CHECKING:
    from specseed.bundle.format import Bundle
    from specseed.scenarios.schema import EngineConfig


def self_contained(engine: EngineConfig) -> bool:
    """An engine that reads no file, no variable and no network address: the built-in
    reference engine on its built-in model (no ``checkpoint`` or ``draft_checkpoint``, which
    hold its tokenizer too). Only such an engine runs because a bundle names it."""
    from specseed.core.errors import SpecseedError
    from specseed.engine_adapters.registry import get_engine

    try:
        info = get_engine(engine.name)
    except SpecseedError:
        return False
    return (
        info.builtin_model
        and info.source == "specseed"
        and engine.checkpoint is None
        and engine.draft_checkpoint is None
    )


def named_outside(engine: EngineConfig) -> list[str]:
    """What an engine section names outside the bundle: a server, a key variable, any
    other option naming a path, a URL or a variable, the checkpoints (each ``key value``)."""
    options = engine.options if isinstance(engine.options, dict) else {}
    named = [
        f"{key} {value}"
        for key, value in options.items()
        if isinstance(value, str)
        and value
        and (key in ("base_url", "api_key_env") or key.endswith(_NAMING))
    ]
    named += [
        f"{key} {getattr(engine, key)}"
        for key in ("checkpoint", "draft_checkpoint")
        if getattr(engine, key, None)
    ]
    return named


_NAMING = ("_url", "_env", "_path", "_dir", "_file", "checkpoint", "tokenizer", "model")
"""Option names that name something outside the bundle (a plugin engine's ``tokenizer``,
``model_path``, ``token_env``)."""


def engine_consent(bundle: Bundle, allowed: bool, command: str, say: Callable[[str], None]) -> None:
    """Refuse to run an engine only the bundle names (a stranger's server, a checkpoint or
    tokenizer path, an environment variable) unless the user said so (``allowed``); ``say``
    (Rich markup) what will run when they did."""
    engine = bundle.config.engine
    if self_contained(engine):
        return
    where = named_outside(engine)
    described = f"engine {engine.name}" + (f" ({', '.join(where)})" if where else "")
    if not allowed:
        raise InputError(
            f"{command}: the bundle names {printable(described)}; refusing to run an engine, "
            "read a file, contact a server or read a variable because a bundle says so",
            hint="give --model YOUR_MODEL_YAML, or pass --engine-from-bundle to run it",
        )
    say(f"{command}: running the bundle's {escape(printable(described))}")


__all__ = ["engine_consent", "named_outside", "self_contained"]
