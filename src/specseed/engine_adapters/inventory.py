"""What is installed here, and which engines and sampling backends can run (``specseed doctor``).

Engine packages are looked up with ``importlib.util.find_spec`` and their versions read from
package metadata, never imported: importing tensorrt_llm or vllm takes tens of seconds and can
fail for reasons that say nothing about whether it is installed. torch is imported (specseed
needs it anyway) to ask for CUDA and the GPU.

What to look for comes from the engines' ``EngineInfo``: the packages (``packages``, besides
specseed's own torch and flashinfer) and one row per ``Placement``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
from dataclasses import dataclass

from specseed.core.version import __version__
from specseed.engine_adapters.registry import EngineInfo, Placement, engines, recorded_packages

__all__ = ["Inventory", "PackageStatus", "Runnable", "take_inventory"]


@dataclass(frozen=True)
class PackageStatus:
    """One Python package as found here."""

    name: str
    """Import name."""
    found: bool
    """``importlib.util.find_spec`` found it (it was not imported)."""
    version: str | None
    """From the installed distribution's metadata, where there is one."""
    location: str | None
    """Where it would be imported from."""


@dataclass(frozen=True)
class Runnable:
    """One engine on one device with one sampling backend: can it run here?"""

    engine: str
    device: str
    sampling_backend: str
    ok: bool
    reason: str
    """Why not, or what it will use."""


@dataclass(frozen=True)
class Inventory:
    """The answer of ``specseed doctor``."""

    specseed: str
    python: str
    packages: tuple[PackageStatus, ...]
    cuda_available: bool
    cuda_version: str | None
    """The CUDA version torch was built with."""
    gpus: tuple[str, ...]
    flashinfer_reads_element0: bool | None
    """Whether the installed flashinfer reads only element 0 of seed/offset tensors (the
    ``row0-seed`` behaviour of 0.6.4 .. 0.7.1); None where flashinfer is not found."""
    runnable: tuple[Runnable, ...]

    def package(self, name: str) -> PackageStatus:
        return next(p for p in self.packages if p.name == name)


def _package(name: str) -> PackageStatus:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return PackageStatus(name, False, None, None)
    version = None
    known = {p.module: p.dists for p in recorded_packages()}
    for dist in known.get(name, (name,)):
        try:
            version = importlib.metadata.version(dist)
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    location = None
    if spec.submodule_search_locations:
        location = next(iter(spec.submodule_search_locations), None)
    elif spec.origin not in (None, "namespace"):
        location = spec.origin
    return PackageStatus(name, True, version, location)


def _torch_cuda() -> tuple[bool, str | None, tuple[str, ...]]:
    try:
        import torch
    except ImportError:
        return False, None, ()
    available = bool(torch.cuda.is_available())
    gpus = (
        tuple(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        if available
        else ()
    )
    return available, torch.version.cuda, gpus


def _runnable(
    info: EngineInfo,
    place: Placement,
    found: dict[str, PackageStatus],
    cuda: bool,
    element0: bool | None,
) -> Runnable:
    """Can ``info`` run at ``place`` here, and why (not)."""

    def status(name: str) -> PackageStatus:
        if name not in found:
            found[name] = _package(name)
        return found[name]

    def not_installed(names: list[str], install: str) -> str:
        return f"{', '.join(names)} is not installed" + (f" ({install})" if install else "")

    missing = [n for n in info.requires if not status(n).found]
    needed = [n for n in place.needs if not status(n).found]
    if missing:
        reason = not_installed(missing, info.install)
    elif place.needs_cuda and not cuda:
        reason = "torch sees no CUDA device"
    elif needed:
        reason = not_installed(needed, place.install or info.install)
    elif place.ready:
        reason = place.ready
    elif place.needs:
        reason = "; ".join(f"{n} {status(n).version or '(version unknown)'}" for n in place.needs)
        if "flashinfer" in place.needs and element0:
            reason += "; its kernels read element 0 of seed/offset only"
    else:
        reason = "packages found (not imported)"
    ok = not missing and not needed and (cuda or not place.needs_cuda)
    return Runnable(info.name, place.device, place.sampler, ok, reason)


def take_inventory() -> Inventory:
    """Look around: packages, CUDA, GPUs, and what can run."""
    from specseed.taps.flashinfer_tap import reads_element0_only

    packages = tuple(_package(p.module) for p in recorded_packages())
    found = {p.name: p for p in packages}
    cuda, cuda_version, gpus = _torch_cuda()
    flashinfer = found["flashinfer"]
    element0 = reads_element0_only(flashinfer.version) if flashinfer.found else None
    runnable = [
        _runnable(info, place, found, cuda, element0)
        for info in engines().values()
        for place in info.placements
    ]
    return Inventory(
        specseed=__version__,
        python=platform.python_version(),
        packages=packages,
        cuda_available=cuda,
        cuda_version=cuda_version,
        gpus=gpus,
        flashinfer_reads_element0=element0,
        runnable=tuple(runnable),
    )
