"""Every RNG contract specseed knows, looked up by name or alias.

One lookup gathers them: the ideal contract (``specseed.core.contracts``, the mechanism), then
the contracts each registered engine ships (``EngineInfo.contracts``, built-in engines first in
name order, then other packages' engines), then those other packages register on their own:
entry points in the ``specseed.contracts`` group whose object is an ``RngContract`` of the
same name. A name already taken keeps its first contract. The contract modules are light
(``specseed.core.contracts`` only), so looking contracts up never imports torch or an engine.
"""

from __future__ import annotations

from functools import cache

from specseed.core.contracts import IDEAL, RngContract
from specseed.core.errors import plugin_code
from specseed.engine_adapters.registry import BUILTIN_ENGINES, engines, get_builtin_engine

ENTRY_POINT_GROUP = "specseed.contracts"


def _builtin() -> dict[str, RngContract]:
    found = {IDEAL.name: IDEAL}
    infos = sorted((get_builtin_engine(target) for target in BUILTIN_ENGINES), key=lambda i: i.name)
    for info in infos:
        for contract in info.engine_contracts():
            found.setdefault(contract.name, contract)
    return found


CONTRACTS: dict[str, RngContract] = _builtin()
"""The built-in contracts: the ideal one, then each built-in engine's (engines in name order).
``all_contracts()`` adds those other packages register."""
CONTRACT_NAMES: tuple[str, ...] = tuple(CONTRACTS)


@cache
def all_contracts() -> dict[str, RngContract]:
    """Built-in contracts, then those of engines other packages register, then the
    ``specseed.contracts`` entry points (each sorted by name). A broken plugin is left out
    rather than breaking every command."""
    from importlib.metadata import entry_points

    found = dict(CONTRACTS)
    plugins = sorted(
        (info for info in engines().values() if info.source != "specseed"),
        key=lambda i: i.name,
    )
    for info in plugins:
        try:
            contracts = info.engine_contracts()
        except Exception:  # a broken plugin is left out, not fatal
            continue
        for contract in contracts:
            found.setdefault(contract.name, contract)
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        try:
            with plugin_code(f"its entry point {point.value}"):
                contract = point.load()
        except Exception:  # a broken plugin is left out, not fatal
            continue
        if isinstance(contract, RngContract) and contract.name == point.name:
            found.setdefault(contract.name, contract)
    return found


def _aliases() -> dict[str, str]:
    return {alias: c.name for c in all_contracts().values() for alias in c.aliases}


def contract_names() -> tuple[str, ...]:
    """Every name a contract answers to: its own, then the aliases."""
    return (*all_contracts(), *(a for a in _aliases() if a not in all_contracts()))


def get_contract(name: str) -> RngContract:
    """The contract with this name or alias; ``KeyError`` if there is none."""
    found = all_contracts()
    return found[name] if name in found else found[_aliases()[name]]
