"""Registry of engine adapters: built-in ones, and others installed through entry points.

An engine is described by one :class:`EngineInfo`, everything specseed knows about it without
importing it: its adapter as a lazy ``"module:Class"`` string, its options model as another (a
light module: pydantic only), its RNG contracts as a third, the loggers it writes to, what it
observes, the packages it needs and whose versions a bundle records, the environment variables
that steer it, where it runs and samples (``specseed doctor``), and the shared engine keys that
became its options. Listing engines, validating
model.yaml and generating the schema never import an adapter module, so none of them imports
torch or an engine package.

Each built-in engine's ``EngineInfo`` is the ``ENGINE`` of its own package's ``info`` module,
named once in :data:`BUILTIN_ENGINES`. Other packages add engines with an entry point in the
``specseed.engines`` group whose object is an ``EngineInfo``::

    [project.entry-points."specseed.engines"]
    myengine = "myengine.specseed_plugin:ENGINE"
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from pydantic import BaseModel

from specseed.core.contracts import RngContract
from specseed.core.errors import EngineError, EngineUnavailable, plugin_code
from specseed.traces.records import Observability

ENTRY_POINT_GROUP = "specseed.engines"


@dataclass(frozen=True)
class Package:
    """A Python package whose presence and version are worth knowing (doctor, bundles, issues)."""

    module: str
    """Import name: ``specseed doctor`` finds it without importing it."""
    distributions: tuple[str, ...] = ()
    """Distributions whose metadata gives its version, in order (default: ``module``). A
    bundle's environment.json records each one installed under its own name."""
    label: str = ""
    """How an issue's environment table names it (default: ``module``)."""

    @property
    def dists(self) -> tuple[str, ...]:
        return self.distributions or (self.module,)

    @property
    def shown_as(self) -> str:
        return self.label or self.module


@dataclass(frozen=True)
class Placement:
    """One place an engine runs and samples, as ``specseed doctor`` lists it."""

    device: str
    """``cpu``, ``cuda``, ``server``, ... (free text, one word)."""
    sampler: str
    """What draws its random numbers there (specseed's CPU twins, flashinfer, its own)."""
    needs_cuda: bool = False
    """It runs only where torch sees a CUDA device."""
    needs: tuple[str, ...] = ()
    """Import names it needs besides the engine's ``requires``."""
    install: str = ""
    """How to install ``needs`` (default: the engine's ``install``)."""
    ready: str = ""
    """What doctor says when it can run (default: the versions of ``needs``, or that the
    packages were found)."""


SPECSEED_PACKAGES: tuple[Package, ...] = (
    Package("torch"),
    Package("flashinfer", ("flashinfer-python", "flashinfer")),
)
"""The packages specseed itself samples with, whatever the engine."""
HOST_DISTRIBUTIONS: tuple[str, ...] = ("transformers", "numpy", "pydantic")
"""Further distributions whose versions every bundle records."""
HOST_ENVIRONMENT_VARIABLES: tuple[str, ...] = (
    "CUDA_*",
    "NVIDIA_*",
    "PYTORCH_*",
    "TORCH_*",
    "FLASHINFER_*",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "SPECSEED_DEVICE",
)
"""Environment variables that steer any engine (``*`` ends a prefix)."""


@dataclass(frozen=True)
class EngineInfo:
    """An engine adapter, described without importing it: the one place per engine."""

    name: str
    adapter: str
    """``"module:Class"`` of the ``EngineAdapter`` subclass."""
    summary: str
    """One line: what the engine is and how specseed drives it."""
    observability: Observability
    """What the engine exposes (the adapter may say less per run)."""
    options: str | None = None
    """``"module:Model"`` of its pydantic options model (``engine.options``); None: none."""
    requires: tuple[str, ...] = ()
    """Import names of the packages the adapter needs besides specseed's own."""
    install: str = ""
    """How to install what it needs."""
    packages: tuple[Package, ...] = ()
    """Packages whose versions doctor shows and a bundle records (the version probe)."""
    environment_variables: tuple[str, ...] = ()
    """Environment variables that steer it, recorded in a bundle's environment.json
    (``*`` ends a prefix: ``"VLLM_*"``); secret-looking names are dropped anyway."""
    placements: tuple[Placement, ...] = (Placement("any", "its own"),)
    """Where it runs and samples, one ``specseed doctor`` row each."""
    moved_options: frozenset[str] = frozenset()
    """Shared engine keys of older model.yaml files that are options of this engine now; the
    loader points a stray one at ``engine.options``."""
    builtin_model: bool = False
    """Without ``engine.checkpoint`` it serves specseed's built-in tiny model (its
    ``model_seed`` option), which the distribution oracle can rebuild."""
    contracts: str | None = None
    """``"module:NAME"`` of the tuple of ``RngContract`` layouts the engine ships (a light
    module: ``specseed.core.contracts`` only), imported only when contracts are looked up
    (``specseed.engine_adapters.contracts``); None: none of its own."""
    loggers: tuple[str, ...] = ()
    """Python loggers the engine writes to in-process; their records go to the engine log
    (``engine.log``, ``--engine-log``) during the runs."""
    source: str = "specseed"
    """Where it comes from: ``specseed`` or the distribution that registered it."""

    def options_model(self) -> type[BaseModel] | None:
        """The options model class (imports a light module), or None."""
        if self.options is None:
            return None
        model = _import_object(self.options)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise EngineError(f"engine {self.name}: {self.options} is not a pydantic model")
        return model

    def engine_contracts(self) -> tuple[RngContract, ...]:
        """The contracts the engine ships (imports a light module), or ()."""
        if self.contracts is None:
            return ()
        found = _import_object(self.contracts)
        if not (isinstance(found, tuple) and all(isinstance(c, RngContract) for c in found)):
            raise EngineError(
                f"engine {self.name}: {self.contracts} is not a tuple of RNG contracts"
            )
        return found

    def missing_packages(self) -> list[str]:
        """Required packages that cannot be imported here (checked without importing)."""
        return [name for name in self.requires if not _findable(name)]


def _findable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _import_object(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    with plugin_code(f"importing {target}"):  # a module that calls sys.exit() on import
        return getattr(importlib.import_module(module_name), attr)


BUILTIN_ENGINES: tuple[str, ...] = (
    "specseed.engine_adapters.reference.info:ENGINE",
    "specseed.engine_adapters.vllm.info:ENGINE",
    "specseed.engine_adapters.trtllm.info:ENGINE",
    "specseed.engine_adapters.openai.info:ENGINE",
)
"""The built-in engines, one entry each: the ``EngineInfo`` of each engine's package."""


def get_builtin_engine(target: str) -> EngineInfo:
    """The ``EngineInfo`` a :data:`BUILTIN_ENGINES` entry names."""
    info: EngineInfo = _import_object(target)
    return info


@cache
def engines() -> dict[str, EngineInfo]:
    """Every known engine by name: built-in first, then entry points (sorted by name)."""
    known: dict[str, EngineInfo] = {}
    for target in BUILTIN_ENGINES:
        info = get_builtin_engine(target)
        known[info.name] = info
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        if point.name in known:
            continue  # a built-in name cannot be taken over by a plugin
        try:
            with plugin_code(f"its entry point {point.value}"):
                info = point.load()
        except Exception as exc:  # a broken plugin must not break specseed
            info = EngineInfo(
                name=point.name,
                adapter=point.value,
                summary=f"(cannot load its entry point: {type(exc).__name__}: {exc})",
                observability=Observability(False, None, False, False),
                source=_distribution(point),
            )
        if not isinstance(info, EngineInfo) or info.name != point.name:
            continue
        known[info.name] = EngineInfo(**{**info.__dict__, "source": _distribution(point)})
    return known


def _distribution(point: Any) -> str:
    dist = getattr(point, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else "entry point"


def engine_names() -> tuple[str, ...]:
    return tuple(engines())


def get_engine(name: str) -> EngineInfo:
    """The engine registered under ``name``; ``EngineError`` naming the known ones if none."""
    try:
        return engines()[name]
    except KeyError:
        known = ", ".join(engine_names())
        raise EngineError(f"unknown engine {name!r}", hint=f"known engines: {known}") from None


def load_adapter_class(name: str) -> type:
    """Import and return the adapter class registered under ``name``."""
    info = get_engine(name)
    missing = info.missing_packages()
    if missing:
        raise EngineUnavailable(
            f"engine {name!r} needs the Python package {missing[0]!r}, which is not installed",
            hint=info.install or f"install it with: pip install 'specseed[{name}]'",
        )
    try:
        adapter_class: type = _import_object(info.adapter)
    except ModuleNotFoundError as exc:
        raise EngineUnavailable(
            f"engine {name!r} needs the Python package {exc.name!r}, which is not installed",
            hint=info.install or f"install it with: pip install 'specseed[{name}]'",
        ) from exc
    return adapter_class


def recorded_packages() -> tuple[Package, ...]:
    """specseed's own packages, then every engine's (sorted by import name, each once)."""
    own = {p.module for p in SPECSEED_PACKAGES}
    extra = {p.module: p for info in engines().values() for p in info.packages}
    return (*SPECSEED_PACKAGES, *(extra[m] for m in sorted(extra) if m not in own))


def engine_loggers() -> tuple[str, ...]:
    """The loggers every engine writes to (each once, in engine order)."""
    names: list[str] = []
    for info in engines().values():
        names.extend(name for name in info.loggers if name not in names)
    return tuple(names)


def recorded_environment_variables() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(prefixes, names) of the environment variables a bundle records: the host's and every
    engine's."""
    patterns = [*HOST_ENVIRONMENT_VARIABLES]
    for info in engines().values():
        patterns.extend(p for p in info.environment_variables if p not in patterns)
    prefixes = tuple(p[:-1] for p in patterns if p.endswith("*"))
    return prefixes, tuple(p for p in patterns if not p.endswith("*"))
