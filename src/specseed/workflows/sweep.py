"""One audit across engine releases: ``specseed sweep``.

``Sweep`` runs the same scenarios (model.yaml's, or a bundle's recorded ones) on several
releases of the engine's package, each in its own environment (``releases.envs``: made with
uv, cached between sweeps), and records every release's result in one sweep folder:

- ``DIR/<package>-<version>/``: the release's own bundle, written by the same workflow objects
  as ``specseed audit`` and ``replay`` (``specseed check``, ``report`` and ``diff`` read it);
- ``DIR/logs/``: uv's output per installation and the child's output per release;
- ``DIR/sweep.json``: every release's outcome (its cells, timings, what the engine exposed),
  rewritten after each release, so a sweep cut short keeps what it found;
- ``DIR/sweep.md``: the table of releases by scenario by check, the changes between
  neighbouring releases, and where the verdict changed, with the evidence.

In-process (the default), specseed runs as a child process inside the release's environment
(``releases.envs.child_command``): ``specseed audit MODEL --bundle DIR/<release>`` or
``specseed replay BUNDLE --bundle DIR/<release>``. Over HTTP (``via="http"``, vLLM only), the
sweep starts the release's OpenAI server on loopback and audits it from this process with the
``openai`` engine (``Audit``): the black-box checks, on any release.

A range of releases is bisected (``releases.bisect``): the newest and oldest first, then the
middle of the releases still in question, until the change sits between two neighbours. A
release that cannot be installed, or cannot run the audit's settings, is reported as such and
never counted as a verdict.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.utils import canonicalize_name

from specseed.core.errors import InputError
from specseed.core.files import write_inside
from specseed.core.text import printable
from specseed.releases.bisect import next_release
from specseed.releases.envs import (
    EnvironmentCache,
    InstallFailed,
    InstallOptions,
    ReleaseEnv,
    child_command,
    child_environment,
    default_cache,
    specseed_path,
)
from specseed.releases.reading import read_release
from specseed.releases.result import SweepResult, Via
from specseed.releases.spec import Release, ReleaseSelection, versions_on_indexes
from specseed.releases.table import ReleaseOutcome, Timings, ordered
from specseed.workflows.base import Interrupts, Workflow
from specseed.workflows.exit_codes import (
    EXIT_ENGINE,
    EXIT_OK,
    EXIT_SIGNAL,
    EXIT_VIOLATION,
)
from specseed.workflows.outputs import AuditOutputs

SWEEP_FILE = "sweep.json"
SWEEP_TABLE = "sweep.md"
LOGS = "logs"
RELEASE_TIMEOUT_S = 3600.0
"""Longest one release's audit may take before the sweep stops it (``timed-out``)."""


@dataclass(frozen=True)
class SweepInput:
    """What to sweep: the audit's input, the releases, and how each one is run."""

    source: Path
    """A model.yaml (or scenario file), or a bundle folder (its recorded scenarios)."""
    selection: ReleaseSelection
    bisect: bool | None = None
    """None: a range is bisected and a list is run whole; True/False force it."""
    via: Via = "in-process"
    model: Path | None = None
    """With a bundle: this model.yaml's engine instead of the bundle's."""
    engine_from_bundle: bool = False
    """With a bundle: run the engine it names (as ``replay --engine-from-bundle``)."""
    cache: Path = field(default_factory=default_cache)
    install: InstallOptions = field(default_factory=InstallOptions)
    timeout_s: float = RELEASE_TIMEOUT_S


@dataclass(frozen=True)
class SweepOutcome:
    result: SweepResult
    exit_code: int


def sweep_exit_code(result: SweepResult) -> int:
    """Interrupted (130/143) beats a failing release (1) beats no release judged (3);
    otherwise 0. A release that could not be installed or run is no violation."""
    if result.interrupted:
        return EXIT_SIGNAL.get(result.interrupted, EXIT_SIGNAL["SIGINT"])
    if any(o.verdict == "fail" for o in result.judged):
        return EXIT_VIOLATION
    if not result.judged:
        return EXIT_ENGINE
    return EXIT_OK


class Sweep(Workflow):
    """``specseed sweep``: the same audit on several releases of an engine. ``outputs.bundle``
    is the sweep folder; ``outputs.terminal`` prints the table at the end, and progress
    lines on stderr as releases finish. Call :meth:`run` once."""

    def __init__(
        self,
        request: SweepInput,
        outputs: AuditOutputs | None = None,
        *,
        on_release: Callable[[ReleaseOutcome], None] | None = None,
    ) -> None:
        super().__init__(outputs)
        if self.outputs.bundle is None:
            raise InputError("a sweep needs a folder to write into", hint="give --bundle DIR")
        self.folder: Path = self.outputs.bundle
        self.request = request
        self.on_release = on_release
        self.cache = EnvironmentCache(request.cache, request.install)
        self._child: subprocess.Popen[bytes] | None = None

    def inputs(self) -> tuple[Path, ...]:
        return (self.request.source,) + ((self.request.model,) if self.request.model else ())

    # -- before anything runs ------------------------------------------------------------

    def _check_input(self) -> str:
        """The engine the sweep runs (its name), after the input is read and validated
        once here: a bad model.yaml or bundle stops the sweep before any install. An engine
        that only the releases bring (not installed here) is validated in each release's
        environment."""
        from specseed.engine_adapters.registry import engine_names
        from specseed.plan.resolve import resolve_audit

        request = self.request
        source = request.source
        if source.is_dir():
            from specseed.bundle.format import read_summary

            # The manifest, findings and headers only: the bundle's engine may be one that
            # only the releases bring (each release's replay reads the rest).
            bundle = read_summary(source)
            if request.model is not None:
                return resolve_audit(request.model, scenarios=False).engine.name
            name = bundle.manifest.engine or "reference"
            if not request.engine_from_bundle and name != "reference":
                raise InputError(
                    f"the bundle names engine {name!r}; a sweep runs it only when asked",
                    hint="add --engine-from-bundle, or give --model MODEL_YAML for your own",
                )
            return name
        from specseed.scenarios.loader import read_yaml

        data, _node = read_yaml(source)
        engine = data.get("engine") if isinstance(data, dict) else None
        name = str(engine.get("name", "reference")) if isinstance(engine, dict) else "reference"
        if name not in engine_names():
            return name
        from specseed.workflows.audit import selected_scenarios

        resolved = resolve_audit(source)
        selected_scenarios(resolved, self.outputs)  # an unknown --scenario stops the sweep here
        return resolved.engine.name

    def _check_folder(self) -> None:
        folder = self.folder
        if folder.exists() and not folder.is_dir():
            raise InputError(f"--bundle {folder}: not a folder")
        if folder.is_dir():
            held = {p.name for p in folder.iterdir()} - {".specseed.lock"}
            if held and SWEEP_FILE not in held:
                raise InputError(
                    f"--bundle {folder}: the folder holds files and no sweep",
                    hint="give a new or empty folder",
                )
            if held and not self.outputs.force:
                raise InputError(
                    f"--bundle {folder}: holds an earlier sweep",
                    hint="give --force to replace it, or another folder",
                )

    def releases(self) -> tuple[Release, ...]:
        """The releases the sweep covers, oldest first (a range: listed from the indexes)."""
        selection = self.request.selection
        available: Sequence[str] = ()
        if selection.is_range:
            install = self.request.install
            available = versions_on_indexes(
                selection.package, install.indexes, install.find_links, offline=install.offline
            )
        releases = selection.releases(available)
        if not releases:
            raise InputError(
                f"--engine-versions {selection}: no release of {selection.package} in that range",
                hint="check the range, --index and --find-links",
            )
        return releases

    # -- the sweep ----------------------------------------------------------------------

    def run(self, *, interrupts: Interrupts | None = None) -> SweepOutcome:
        from specseed.traces.folder import TraceDir

        started = time.perf_counter()
        self._check_folder()
        engine = self._check_input()
        if self.request.via == "http" and engine != "vllm":
            raise InputError(
                f"--via http starts a vLLM server per release; this audit's engine is {engine!r}",
                hint="use --via in-process",
            )
        releases = self.releases()
        bisect = self.request.bisect
        if bisect is None:
            bisect = self.request.selection.is_range
        self.folder.mkdir(parents=True, exist_ok=True)
        lock = TraceDir(self.folder, "--bundle")
        lock.lock()
        try:
            if self.outputs.force:
                _clear_sweep(self.folder)
            (self.folder / LOGS).mkdir(exist_ok=True)
            result = self._sweep(releases, bisect, started, interrupts)
            code = self._finish(result, sweep_exit_code(result))
        finally:
            lock.release()
        return SweepOutcome(result, code)

    def _sweep(
        self,
        releases: tuple[Release, ...],
        bisect: bool,
        started: float,
        interrupts: Interrupts | None,
    ) -> SweepResult:
        outcomes: dict[str, ReleaseOutcome] = {}
        request = self.request

        def result(interrupted: str | None = None) -> SweepResult:
            return SweepResult(
                package=request.selection.package,
                selection=str(request.selection),
                source=str(request.source),
                via=request.via,
                releases=releases,
                outcomes=tuple(ordered(outcomes.values())),
                bisected=bisect,
                seconds=time.perf_counter() - started,
                interrupted=interrupted,
            )

        guard = self.guard(interrupts)
        with guard:
            try:
                while True:
                    if bisect:
                        chosen = next_release(releases, outcomes)
                    else:
                        chosen = next((r for r in releases if r.version not in outcomes), None)
                    if chosen is None:
                        break
                    self._progress(f"{chosen}: ...")
                    outcome = self._run_release(chosen)
                    outcomes[chosen.version] = outcome
                    self._progress(_progress_line(outcome))
                    write_inside(self.folder, SWEEP_FILE, result().to_json())
                    if self.on_release is not None:
                        self.on_release(outcome)
                    if outcome.status == "interrupted":
                        return result(guard.received or "SIGINT")
            except KeyboardInterrupt:
                guard.defer()
                self._stop_child()
                return result(guard.received or "SIGINT")
            guard.defer()
            return result(guard.received)

    def _progress(self, line: str) -> None:
        consoles = self.consoles()
        if consoles is not None and self.outputs.progress:
            consoles[1].print(printable(line), highlight=False, markup=False)

    def _finish(self, result: SweepResult, code: int) -> int:
        from specseed.reporting.sweep import render_markdown, render_terminal

        write_inside(self.folder, SWEEP_FILE, result.to_json())
        write_inside(self.folder, SWEEP_TABLE, render_markdown(result))
        consoles = self.consoles()
        if consoles is not None:
            out = consoles[0]
            code = self.flush_terminal(lambda: render_terminal(result, out, self.folder), code)
        return code

    # -- one release ----------------------------------------------------------------------

    def _run_release(self, release: Release) -> ReleaseOutcome:
        name = f"{canonicalize_name(release.package)}-{release.version}"
        install_log = self.folder / LOGS / f"{name}.install.log"
        try:
            env = self.cache.ensure(release, log=install_log)
        except InstallFailed as failed:
            return ReleaseOutcome(
                release.package,
                release.version,
                "not-installable",
                reason=failed.reason,
                via=self.request.via,
                timings=Timings(install=failed.seconds),
            )
        timings = Timings(install=env.seconds, cached=env.cached)
        target = self.folder / name
        if self.request.via == "http":
            outcome = self._run_http(release, env, target, self.folder / LOGS / f"{name}.log")
        else:
            outcome = self._run_child(
                release, env.python, target, self.folder / LOGS / f"{name}.log"
            )
        return replace(
            outcome,
            timings=replace(outcome.timings, install=timings.install, cached=timings.cached),
            bundle=name if (target / "manifest.json").is_file() else None,
        )

    def _child_args(self, target: Path) -> list[str]:
        request = self.request
        source = str(request.source.resolve())
        if request.source.is_dir():
            args = ["replay", source, "--bundle", str(target)]
            if request.model is not None:
                args += ["--model", str(request.model.resolve())]
            elif request.engine_from_bundle:
                args.append("--engine-from-bundle")
            return args
        args = [
            "audit",
            source,
            "--bundle",
            str(target),
            "--no-progress",
            "--summary",
            "--jobs",
            "1",
        ]
        for scenario in self.outputs.scenarios:
            args += ["--scenario", scenario]
        return args

    def _run_child(self, release: Release, python: Path, target: Path, log: Path) -> ReleaseOutcome:
        command = child_command(python, specseed_path(self.request.cache), self._child_args(target))
        launched = time.perf_counter()
        first_file: float | None = None
        deadline = launched + self.request.timeout_s
        with log.open("wb") as out:
            self._child = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=child_environment(),
                start_new_session=True,  # its own group: stopped whole on timeout or signal
            )
            try:
                while True:
                    try:
                        code = self._child.wait(timeout=0.2)
                        break
                    except subprocess.TimeoutExpired:
                        if first_file is None and (target / "manifest.json").exists():
                            first_file = time.perf_counter()
                        if time.perf_counter() > deadline:
                            self._stop_child()
                            return ReleaseOutcome(
                                release.package, release.version, "timed-out",
                                reason=f"the audit took longer than {self.request.timeout_s:.0f} s",
                            )  # fmt: skip
            finally:
                if self._child.poll() is None:
                    self._stop_child()
                self._child = None
        wall = time.perf_counter() - launched
        start = (first_file - launched) if first_file is not None else None
        return read_release(release, target, code, log, wall, start)

    def _run_http(
        self, release: Release, env: ReleaseEnv, target: Path, log: Path
    ) -> ReleaseOutcome:
        """The release's servers on loopback, audited from here with the same workflow as
        ``specseed audit`` (the ``openai`` engine)."""
        from specseed.core.errors import EngineError, SpecseedError
        from specseed.plan.resolve import resolve_audit
        from specseed.releases.http import ServersFailed, http_config, release_servers
        from specseed.workflows.audit import Audit

        base = ReleaseOutcome(release.package, release.version, "cannot-run", via="http")
        resolved = resolve_audit(self.request.source)
        try:
            with release_servers(env, resolved.engine, release.version, log) as servers:
                http = resolve_audit(
                    http_config(resolved.config, servers), base_dir=resolved.base_dir
                )
                outputs = AuditOutputs(bundle=target, scenarios=self.outputs.scenarios)
                code = Audit(http, outputs).run().exit_code
        except ServersFailed as failed:
            return replace(base, reason=failed.reason, timings=Timings(start=failed.seconds))
        except (EngineError, SpecseedError) as exc:
            return replace(base, reason=exc.message)
        # The bundle's environment is this process's; what ran is what the server says.
        served = {"vllm (server)": servers.version} if servers.version else {}
        if servers.version is not None and servers.version != release.version:
            return replace(
                base,
                engine=served,
                reason=f"the server says it is vLLM {servers.version}, not {release.version}",
            )
        outcome = read_release(release, target, code, log, via="http")
        return replace(
            outcome, engine=served, timings=replace(outcome.timings, start=servers.seconds)
        )

    def _stop_child(self) -> None:
        child = self._child
        if child is None or child.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGTERM)
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=30)


def _clear_sweep(folder: Path) -> None:
    """An earlier sweep's files (--force): its sweep.json, table, logs and the release
    bundles it lists; nothing else."""
    import shutil

    try:
        data = json.loads((folder / SWEEP_FILE).read_text(encoding="utf-8"))
        bundles = [o.get("bundle") for o in data.get("outcomes", []) if isinstance(o, dict)]
    except (OSError, ValueError, AttributeError):
        bundles = []
    for name in bundles:
        if isinstance(name, str) and name and "/" not in name and name not in ("..", "."):
            shutil.rmtree(folder / name, ignore_errors=True)
    shutil.rmtree(folder / LOGS, ignore_errors=True)
    for file in (SWEEP_FILE, SWEEP_TABLE):
        with contextlib.suppress(FileNotFoundError):
            (folder / file).unlink()


def _progress_line(outcome: ReleaseOutcome) -> str:
    t = outcome.timings
    parts = [f"{outcome.package} {outcome.version}: {outcome.status}"]
    if outcome.verdict:
        parts.append(f"{outcome.verdict.upper()} (exit {outcome.exit_code})")
    if t.install is not None:
        parts.append(f"install {t.install:.1f}s" + (" (cached)" if t.cached else ""))
    if t.audit is not None:
        parts.append(f"audit {t.audit:.1f}s")
    line = ", ".join(parts)
    if outcome.status != "ran" and outcome.reason:
        line += ": " + outcome.reason.splitlines()[0][:200]
    return line


__all__ = [
    "SWEEP_FILE",
    "SWEEP_TABLE",
    "Sweep",
    "SweepInput",
    "SweepOutcome",
    "SweepResult",
    "sweep_exit_code",
]
