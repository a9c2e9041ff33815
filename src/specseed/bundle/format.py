"""Bug-report bundles: one directory holding everything needed to re-check, re-render and
reproduce an audit on another machine.

Layout (``BUNDLE_FORMAT`` 1; ARCHITECTURE.md, "Bundle format"):

    DIR/manifest.json              format version, specseed version, command, how to reproduce,
                                   status ("running" until the audit ends, then "complete")
    DIR/model.yaml                 the resolved model.yaml (scenarios point into the bundle)
    DIR/environment.json           versions and devices, secrets removed
    DIR/<scenario>/scenario.yaml   the scenario's full text (library scenarios included)
    DIR/<scenario>/<run>.jsonl     each run's trace, written line by line as the run goes
    DIR/<scenario>/findings.json   the scenario's findings, written once its checks ran
    DIR/<scenario>/<run>.distribution.json
                                   the distribution check's evidence for that run (per
                                   token numbers; ``check`` re-judges it without a model)
    DIR/<scenario>/minimal.yaml    optional: the smallest failing scenario (``minimize``)
    DIR/report.html                the HTML report, written when the audit ends (the page
                                   ``specseed report DIR -f html`` writes again)

The manifest is written before anything runs and every whole file is written atomically
(``specseed.core.files``: temporary file, fsync, ``os.replace``), so a crash or Ctrl-C leaves
a bundle that reads: the reader accepts one cut short, and says what is missing.

The manifest and findings files are written and read through pydantic models (``Manifest``,
``FindingsFile``), which give the format its JSON Schema (``bundle_json_schema``,
``specseed schema --kind bundle``).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import platform
import stat
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from specseed.bundle.integrity import MAX_LISTED, contradictions
from specseed.checks.attribution import root_causes
from specseed.checks.findings import (
    Finding,
)
from specseed.core.errors import InputError, ScenarioError
from specseed.core.files import NotOwned, open_folder, write_inside
from specseed.core.secrets import (  # noqa: F401 - re-exported
    REMOVED,
    is_secret_name,
    scrub,
    scrub_command,
    scrub_text,
)
from specseed.core.text import printable
from specseed.core.version import __version__
from specseed.core.wording import plural
from specseed.distribution.evidence import DistributionEvidence
from specseed.engine_adapters.base import EngineSettings
from specseed.run.results import AuditEvent, AuditResult, ScenarioChecked, ScenarioResult
from specseed.scenarios.loader import (
    MAX_FILE_BYTES,
    LoadedScenario,
    engine_options,
    library_text,
    parse_audit_config,
    parse_scenario,
    read_source,
)
from specseed.scenarios.schema import AuditConfig, Scenario
from specseed.traces.records import (
    EngineConfigRecord,
    RunHeader,
    RunTrace,
    TraceWriter,
    read_trace,
    trace_json_schema,
)

BUNDLE_FORMAT = "1"
MANIFEST = "manifest.json"
MODEL = "model.yaml"
ENVIRONMENT = "environment.json"
SCENARIO_FILE = "scenario.yaml"
FINDINGS_FILE = "findings.json"
MINIMAL_FILE = "minimal.yaml"
EVIDENCE_SUFFIX = ".distribution.json"
"""``<scenario>/<run>.distribution.json``: the distribution check's evidence of a run."""
REPORT_HTML = "report.html"
"""The HTML report (``reporting.html``), written once the audit ends; never read back."""
ENGINE_LOG = "engine.log"
"""The engine's own log while the runs went (``workflows.engine_log``)."""
_TOP_LEVEL = (MANIFEST, MODEL, ENVIRONMENT, ENGINE_LOG, REPORT_HTML)


class BundleError(InputError):
    """A path that is not a readable bundle (missing, foreign, or damaged). Exit code 2."""


# -- the files' models --------------------------------------------------------------------


class ManifestScenario(BaseModel):
    """A scenario of the bundle as the manifest lists it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    source: str = Field("", description="`builtin:<name>` or the user's path.")
    runs: tuple[str, ...] = Field((), description="The runs that were to be served.")


class Manifest(BaseModel):
    """``manifest.json``: what the bundle is and how to reproduce it. Written first, with
    status "running"; the last four fields are added when the audit ends."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bundle_format: str
    specseed_version: str | None = None
    created: str | None = None
    status: str | None = Field(
        None, description='"running", "complete", or "interrupted by <signal>".'
    )
    command: str | None = Field(None, description="The command as typed, secrets removed.")
    reproduce: str | None = None
    replay: str | None = None
    engine: str | None = None
    contract: str | None = None
    scenarios: tuple[ManifestScenario, ...]
    verdict: str | None = None
    exit_code: int | None = None
    seconds: float | None = None

    def to_json(self) -> str:
        # Unset fields stay out of the file (a running bundle has no verdict yet).
        return _json(self.model_dump(mode="json", exclude_none=True))


class FindingsFile(BaseModel):
    """``<scenario>/findings.json``: a scenario's findings, written once its checks ran."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scenario: str
    seconds: float
    findings: tuple[Finding, ...]
    root_causes: tuple[dict[str, Any], ...] = ()
    """The scenario's root causes with the findings each rests on (``checks.attribution``);
    written for readers of the bundle, recomputed by ``check`` and ``report``. Absent in
    older bundles."""


_FINDING = TypeAdapter(Finding)
_ENVIRONMENT = TypeAdapter(dict[str, str])
"""``environment.json``: names to versions and values."""


def bundle_json_schema() -> dict[str, Any]:
    """JSON Schemas of a bundle's files, by path."""
    environment = _ENVIRONMENT.json_schema()
    environment["title"] = "environment.json"
    return {
        MANIFEST: Manifest.model_json_schema(),
        ENVIRONMENT: environment,
        f"<scenario>/{FINDINGS_FILE}": FindingsFile.model_json_schema(),
        f"<scenario>/<run>{EVIDENCE_SUFFIX}": DistributionEvidence.model_json_schema(),
        "<scenario>/<run>.jsonl": trace_json_schema(),
    }


# -- secrets (one scrubber for every output: specseed.core.secrets) ------------------------

# ``REMOVED``, ``is_secret_name``, ``scrub``, ``scrub_command`` and ``scrub_text`` are
# imported from there above and stay importable from here.


# -- environment --------------------------------------------------------------------------


def host_environment() -> dict[str, str]:
    """Versions of specseed, Python and the packages engines use, CUDA and GPU where torch is
    already loaded, and the environment variables that steer engines (secret-looking names
    dropped). Never imports torch itself: ``specseed check`` runs without it.

    Which packages and variables: specseed's own and every registered engine's, as their
    ``EngineInfo`` lists them (``packages``, ``environment_variables``)."""
    from specseed.engine_adapters.registry import (
        HOST_DISTRIBUTIONS,
        recorded_environment_variables,
        recorded_packages,
    )

    env: dict[str, str] = {
        "specseed": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    distributions = [d for p in recorded_packages() for d in p.dists]
    for dist in (*distributions, *HOST_DISTRIBUTIONS):
        try:
            env[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    torch = sys.modules.get("torch")
    if torch is not None:
        env["cuda"] = str(getattr(torch.version, "cuda", None) or "none")
        try:
            if torch.cuda.is_available():
                env["gpu"] = ", ".join(
                    torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
                )
        except Exception:  # a broken driver must not stop the bundle
            env["gpu"] = "unavailable"
    prefixes, names = recorded_environment_variables()
    for name, value in sorted(os.environ.items()):
        if (name.startswith(prefixes) or name in names) and not is_secret_name(name):
            env[f"env.{name}"] = value
    return {k: str(v) for k, v in scrub(env).items()}


def _json(data: Any) -> str:
    return json.dumps(data, indent=2) + "\n"


# -- findings as JSON ---------------------------------------------------------------------


def finding_to_dict(finding: Finding) -> dict[str, Any]:
    result: dict[str, Any] = _FINDING.dump_python(finding)
    return result


def finding_from_dict(d: Mapping[str, Any]) -> Finding:
    """The inverse of :func:`finding_to_dict` (and of the ``--json`` report's findings)."""
    return _FINDING.validate_python(d)


# -- writing ------------------------------------------------------------------------------


class _ScrubbingTraceWriter(TraceWriter):
    """A trace writer that removes secrets from the header by name too (engine options may
    hold keys); every writer already scrubs each line of held values and URL credentials."""

    def header(self, header: RunHeader) -> None:
        super().header(
            replace(
                header,
                engine_config=EngineConfigRecord(**scrub(asdict(header.engine_config))),
                environment=scrub(header.environment),
            )
        )


@dataclass(frozen=True)
class BundleTraces:
    """``(scenario, run) -> TraceWriter`` for the runs' traces in a bundle at ``root``."""

    root: Path

    def __call__(self, scenario: str, run: str) -> TraceWriter:
        return _ScrubbingTraceWriter(self.root / scenario / f"{run}.jsonl", inside=self.root)


def scenario_text(loaded: LoadedScenario, base_dir: Path) -> str:
    """A scenario's full YAML text: the library file, or the user's file as it is."""
    if loaded.text is not None:  # made in memory
        return loaded.text
    if loaded.source.startswith("builtin:"):
        return library_text(loaded.source.removeprefix("builtin:"))
    path = Path(loaded.source)
    path = path if path.is_absolute() else base_dir / path
    try:  # under the loader's limits: a regular file, 1 MiB, UTF-8
        return read_source(path)
    except ScenarioError:  # moved since it was loaded: its parsed form says the same
        data = loaded.scenario.model_dump(mode="json", exclude_unset=True)
        return yaml.safe_dump(data, sort_keys=False)


def resolved_model_yaml(
    config: AuditConfig,
    scenario_names: Sequence[str],
    base_dir: Path,
    settings: EngineSettings | None = None,
) -> str:
    """model.yaml as the audit resolved it: checkpoint paths absolute, scenarios pointing at
    the bundle's own copies, secrets removed. ``settings``: the audit's resolved engine
    settings, whose options are written (without them the options are validated here)."""
    data = config.model_dump(mode="json")
    options = settings.options if settings is not None else engine_options(config, MODEL)
    # Every option with its value, defaults included: another version may default otherwise.
    data["engine"]["options"] = options.model_dump(mode="json")
    for key in ("checkpoint", "draft_checkpoint"):
        value = data["engine"].get(key)
        if value is not None and not Path(value).is_absolute():
            data["engine"][key] = str((base_dir / value).resolve())
    data["engine"] = scrub(data["engine"])
    data["scenarios"] = [f"{name}/{SCENARIO_FILE}" for name in scenario_names]
    header = "# Resolved by specseed for this bundle: scenarios are the bundle's own copies.\n"
    return header + yaml.safe_dump(data, sort_keys=False)


def folder_entries(root: Path) -> list[str]:
    """What makes ``root`` hold something: every entry but dot-files that are plain files or
    folders (``.specseed.lock``, an editor's files). A dot-file that is a symlink, FIFO or
    device counts: the folder is not empty, and nothing is written through it."""
    entries = []
    for entry in os.scandir(root):
        if entry.name.startswith("."):
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                mode = 0
            if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
                continue
        entries.append(entry.name)
    return sorted(entries)


def _clear_previous(root: Path, *, force: bool = False) -> list[str]:
    """Make ``root`` ready for a new bundle: it must be missing, empty, or (with ``force``)
    hold an earlier bundle, whose files are removed: only the files the bundle format names,
    in folders named by the old manifest that are checked names inside ``root``, opened
    without following a symlink; nothing else is removed, and nothing outside ``root``.
    Returns what was removed."""
    if not os.path.lexists(root):
        return []
    if not root.is_dir():
        raise BundleError(f"{root} is not a directory", hint="give a new or empty directory")
    if not folder_entries(root):
        return []
    if not _is_regular(root / MANIFEST):
        raise BundleError(
            f"{root} is not empty and holds no specseed bundle; refusing to write into it",
            hint="give a new or empty directory",
        )
    if not force:
        raise BundleError(
            f"{root} holds a bundle already; refusing to replace it",
            hint="pass --force to remove its files first, or give a new directory",
        )
    removed: list[str] = []
    try:
        recorded = json.loads(_read_member(root / MANIFEST, "manifest", MAX_JSON_BYTES))
        entries_ = recorded["scenarios"] if isinstance(recorded, dict) else []
        listed = [e for e in entries_ if isinstance(e, dict)]
    except (BundleError, ValueError, KeyError, TypeError, RecursionError):
        listed = []
    top = open_folder(root)
    try:
        seen: set[str] = set()
        for entry in listed[:MAX_SCENARIOS]:
            name = entry.get("name")
            if not isinstance(name, str) or _name_problem(name) or name in seen:
                continue
            seen.add(name)
            runs = [
                r for r in entry.get("runs") or () if isinstance(r, str) and not _name_problem(r)
            ]
            for file in _clear_scenario(root, name, runs):
                removed.append(f"{name}/{file}")
            with contextlib.suppress(OSError):  # kept when it holds anything else
                os.rmdir(name, dir_fd=top)
        for file in _TOP_LEVEL:
            if _unlink_file_at(top, file):  # never follows: the link goes, not its target
                removed.append(file)
    finally:
        os.close(top)
    return removed


def _clear_scenario(root: Path, name: str, runs: Sequence[str]) -> list[str]:
    """Remove an earlier bundle's files from its scenario folder ``name`` (a symlink or a
    file there is left alone); returns what was removed."""
    try:
        folder = open_folder(root, (name,))
    except OSError:
        return []
    try:
        names = {SCENARIO_FILE, FINDINGS_FILE, MINIMAL_FILE, *(f"{r}.jsonl" for r in runs)}
        names |= {f"{r}{EVIDENCE_SUFFIX}" for r in runs}
        names |= {p for p in os.listdir(folder) if p.endswith((".jsonl", EVIDENCE_SUFFIX))}
        return [file for file in sorted(names) if _unlink_file_at(folder, file)]
    finally:
        os.close(folder)


def _unlink_file_at(folder: int, name: str) -> bool:
    """Remove ``name`` from the folder ``folder`` unless it is a folder; True when removed."""
    try:
        st = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(st.st_mode):
        return False
    os.unlink(name, dir_fd=folder)
    return True


class BundleWriter:
    """Writes a bundle as the audit goes. Call :meth:`start` before the engine runs, give
    :meth:`trace_writer` to the runner, feed it the runner's events, then :meth:`finish`."""

    def __init__(self, root: Path, *, force: bool = False) -> None:
        self.root = root
        self.force = force
        """Replace an earlier bundle in ``root`` (its files only); refused without it."""
        self.removed: list[str] = []
        """What :meth:`start` removed of an earlier bundle (``force``)."""
        self.manifest: Manifest | None = None
        self.finished = False
        """The manifest on disk says how the audit ended (:meth:`finish` wrote it)."""
        self._environment: dict[str, str] = {}

    def start(
        self,
        config: AuditConfig,
        scenarios: Sequence[tuple[LoadedScenario, Sequence[str]]],
        base_dir: Path,
        argv: Sequence[str],
        *,
        settings: EngineSettings | None = None,
    ) -> None:
        """Write the manifest, model.yaml, the environment and every scenario's text.

        ``scenarios``: each loaded scenario with the names of the runs that will be served.
        ``settings``: the audit's resolved engine settings (``ResolvedAudit.engine``).
        """
        for loaded, runs in scenarios:
            check_name(loaded.scenario.name, "scenario name")
            for run in runs:
                check_name(run, "run name")
        self.removed = _clear_previous(self.root, force=self.force)
        self.root.mkdir(exist_ok=True)  # its parent must exist (checked before anything ran)
        command = ["specseed", *scrub_command(argv)]
        names = [loaded.scenario.name for loaded, _ in scenarios]
        self.manifest = Manifest(
            bundle_format=BUNDLE_FORMAT,
            specseed_version=__version__,
            created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            status="running",
            command=" ".join(_quote(a) for a in command),
            reproduce=f"specseed audit {_quote(str(self.root / MODEL))}",
            replay=f"specseed replay {_quote(str(self.root))}",
            engine=config.engine.name,
            contract=config.engine.contract,
            scenarios=tuple(
                ManifestScenario(name=loaded.scenario.name, source=loaded.source, runs=tuple(runs))
                for loaded, runs in scenarios
            ),
        )
        # The manifest first: whatever happens next, the directory says what it is.
        write_inside(self.root, MANIFEST, self.manifest.to_json())
        write_inside(self.root, MODEL, resolved_model_yaml(config, names, base_dir, settings))
        for loaded, _ in scenarios:
            text = scenario_text(loaded, base_dir)
            write_inside(self.root, (loaded.scenario.name, SCENARIO_FILE), text)
        self._environment = host_environment()
        write_inside(self.root, ENVIRONMENT, _json(self._environment))

    @property
    def trace_writer(self) -> BundleTraces:
        """Opens each run's trace file in the bundle (picklable: ``--jobs`` workers use it)."""
        return BundleTraces(self.root)

    def _add_environment(self, engine_env: Mapping[str, str]) -> None:
        # Again now that the engine has loaded (torch imported: CUDA and GPU are known).
        engine = {k: str(v) for k, v in scrub(dict(engine_env)).items()}
        merged = {**self._environment, **host_environment(), **engine}
        if merged != self._environment:
            self._environment = merged
            write_inside(self.root, ENVIRONMENT, _json(merged))

    def on_event(self, event: AuditEvent) -> None:
        if not isinstance(event, ScenarioChecked):
            return
        result = event.result
        for trace in result.traces.values():
            self._add_environment(trace.header.environment)
            break
        for run, evidence in result.distribution_evidence.items():
            text = evidence.to_json()
            # Too large to read back: left out, and `check` asks the oracle as for older
            # bundles (never a file the reader would refuse).
            if len(text.encode()) <= MAX_EVIDENCE_BYTES:
                write_inside(self.root, (result.scenario.name, f"{run}{EVIDENCE_SUFFIX}"), text)
        data = FindingsFile(
            scenario=result.scenario.name,
            seconds=round(result.seconds, 3),
            findings=result.findings,
            root_causes=tuple(c.to_json() for c in root_causes(result.findings)),
        )
        write_inside(
            self.root, (result.scenario.name, FINDINGS_FILE), _json(data.model_dump(mode="python"))
        )

    def finish(self, result: AuditResult, exit_code: int) -> None:
        """Mark the manifest with the audit's end. The manifest is written even when the
        environment cannot be (a full disk); that error is raised after it."""
        failed: OSError | None = None
        try:
            self._add_environment(result.environment)
        except OSError as exc:
            failed = exc
        assert self.manifest is not None, "finish() before start()"
        self.manifest = self.manifest.model_copy(
            update={
                # An interrupted audit reports what finished; its bundle must not read as whole.
                "status": f"interrupted by {result.interrupted}"
                if result.interrupted
                else "complete",
                "verdict": result.verdict,
                "exit_code": exit_code,
                "seconds": round(result.seconds, 3),
            }
        )
        text = self.manifest.to_json()
        try:
            write_inside(self.root, MANIFEST, text)
        except OSError as exc:
            if isinstance(exc, NotOwned) or exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            # No room for a temporary copy: rewrite the file in place. The old manifest's
            # space is freed first, and a manifest left "running" would misread the bundle.
            _rewrite_in_place(self.root / MANIFEST, text)
        self.finished = True
        if failed is not None:
            raise failed

    def write_report(self, text: str) -> None:
        """The HTML report (``REPORT_HTML``), rendered by the caller once the audit ended."""
        write_inside(self.root, REPORT_HTML, text)


def _rewrite_in_place(path: Path, text: str) -> None:
    data = scrub_text(text, by_name=False).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:  # never another name's text
            raise NotOwned(path, "not a regular file of its own")
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def write_minimal(root: Path, scenario: str, text: str) -> Path:
    """Store a minimized scenario in a bundle (read back by :func:`read_bundle`): in a
    scenario folder of the bundle that is no symlink, never through a symlink or special
    file at ``minimal.yaml`` (``BundleError``)."""
    check_name(scenario, "scenario name")
    if not _is_dir(root / scenario):
        raise BundleError(f"{root / scenario}: not a scenario folder of the bundle")
    path = root / scenario / MINIMAL_FILE
    try:
        write_inside(root, (scenario, MINIMAL_FILE), text)
    except NotOwned as exc:
        raise BundleError(f"{exc.filename}: {exc.strerror}; refusing to write through it") from None
    return path


# -- reading ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BundleScenario:
    """One scenario of a bundle: its text, recorded runs and recorded findings."""

    name: str
    source: str
    """Where the audit loaded it from (``builtin:<name>`` or the user's path)."""
    text: str
    scenario: Scenario
    traces: dict[str, RunTrace]
    findings: tuple[Finding, ...] | None
    """None when the audit stopped before this scenario's checks ran."""
    planned_runs: tuple[str, ...]
    minimal: str | None = None
    """The minimized scenario's text, when ``specseed minimize`` stored one."""
    distribution_evidence: dict[str, DistributionEvidence] = field(default_factory=dict)
    """The distribution check's evidence by run (older bundles: none)."""


@dataclass(frozen=True)
class Bundle:
    """A bundle read back. ``notes`` say what is missing when it was cut short."""

    root: Path
    manifest: Manifest
    config: AuditConfig
    model_text: str
    environment: dict[str, str]
    scenarios: tuple[BundleScenario, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def complete(self) -> bool:
        return self.manifest.status == "complete" and not self.notes

    @property
    def contract(self) -> str:
        return self.manifest.contract or self.config.engine.contract

    @property
    def interrupted(self) -> str | None:
        """The signal the manifest says stopped the audit (``SIGINT``, ``SIGTERM``), or None."""
        status = self.manifest.status or ""
        prefix = "interrupted by "
        return (status[len(prefix) :] or None) if status.startswith(prefix) else None

    @property
    def unfinished(self) -> tuple[str, ...]:
        """Scenarios the audit did not finish: a planned run without a trace, or no findings
        (its checks never ran). Nothing the bundle holds vouches for them."""
        return tuple(
            item.name
            for item in self.scenarios
            if item.findings is None or any(r not in item.traces for r in item.planned_runs)
        )

    @property
    def unjudged(self) -> str | None:
        """What the bundle cannot vouch for, in one sentence (None: it can vouch for all)."""
        unfinished = self.unfinished
        if self.manifest.status == "complete" and not unfinished:
            return None
        total = len(self.scenarios)
        if self.interrupted:
            how = f"the audit was interrupted by {self.interrupted}"
        elif self.manifest.status == "complete":
            how = "the bundle lacks traces or findings"
        else:
            how = (
                f"the audit stopped (manifest status {self.manifest.status!r}: it crashed, "
                "was killed or is still running)"
            )
        return (
            f"{how} before {len(unfinished)} of {plural(total, 'scenario')} finished; "
            "nothing below vouches for them"
        )

    def as_result(self, findings: Mapping[str, Sequence[Finding]] | None = None) -> AuditResult:
        """The bundle as an audit result (recorded findings unless others are given). An
        unfinished bundle's result says so: ``interrupted`` (the manifest's signal) and
        ``unfinished``, or, stopped without a signal, each unfinished scenario's missing
        evidence."""
        results = []
        unfinished = self.unfinished
        stopped = self.interrupted is None and (
            self.manifest.status != "complete" or bool(unfinished)
        )
        for item in self.scenarios:
            chosen = findings[item.name] if findings is not None else item.findings or ()
            missing: tuple[str, ...] = ()
            if stopped and item.name in unfinished:
                runs = [r for r in item.planned_runs if r not in item.traces]
                missing = (
                    f"{item.name}: "
                    + (f"no trace for {', '.join(runs)}" if runs else "its checks never ran")
                    + " (the audit did not finish)",
                )
            results.append(
                ScenarioResult(
                    item.scenario,
                    item.source,
                    item.traces,
                    tuple(chosen),
                    0.0,
                    missing,
                    dict(item.distribution_evidence),
                )
            )
        return AuditResult(
            config=self.config,
            contract=self.contract,
            scenarios=tuple(results),
            environment=self.environment,
            seconds=self.manifest.seconds or 0.0,
            command=self.manifest.command or "",
            interrupted=self.interrupted,
            unfinished=unfinished if self.interrupted else (),
        )


# -- a bundle is untrusted input -------------------------------------------------------------
#
# A bundle comes from someone else. Every name it gives (scenario and run names in the
# manifest) is checked before it becomes a path; every file is opened without following a
# symlink, must be a regular file (a FIFO would block, /dev/zero never ends), and is read
# under a size cap; JSON nesting is bounded by the parser's recursion limit, caught; traces
# are streamed line by line under a line, size and step cap.

MAX_JSON_BYTES = 16 << 20
"""Largest manifest, environment or findings file read (16 MiB)."""
MAX_TRACE_BYTES = 64 << 20
"""Largest trace file read (64 MiB: every step is held for the checks, so memory follows)."""
MAX_TRACE_LINE_BYTES = 4 << 20
"""Largest trace line (one engine step: 4 MiB)."""
MAX_TRACE_STEPS = 200_000
"""Most step records in one trace."""
MAX_EVIDENCE_BYTES = 64 << 20
"""Largest distribution evidence file read (64 MiB, as a trace: about 90 bytes a token)."""
MAX_BUNDLE_TRACE_BYTES = 256 << 20
"""Most trace bytes one bundle may hold in all (every trace is held in memory for the
checks; the built-in audit's bundle holds about 5 MiB)."""
MAX_SCENARIOS = 1024
"""Most scenarios one manifest may list (each once: the built-in library holds 17)."""
_NAME_MAX = 128


def _name_problem(name: str) -> str | None:
    if not name:
        return "is empty"
    if len(name) > _NAME_MAX:
        return f"is longer than {_NAME_MAX} characters"
    if "\0" in name:
        return "holds a NUL character"
    if "/" in name or "\\" in name or os.sep in name or (os.altsep and os.altsep in name):
        return "holds a path separator"
    if name in (".", "..") or name.startswith("."):
        return "starts with a dot"
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in name):
        return "holds a control character"
    return None


def check_name(name: str, what: str) -> str:
    """``name`` if it can be one path component inside a bundle; ``BundleError`` (exit 2)
    for separators, ``..``, an absolute path, NUL or control characters."""
    problem = _name_problem(name)
    if problem is not None:
        raise BundleError(
            f"{what} {printable(repr(name))} {problem}: a bundle name must be one plain "
            "path component",
            hint="the bundle is damaged or was crafted; nothing was read or written for it",
        )
    return name


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _member_kind(path: Path) -> str:
    """``missing``, ``file`` or ``dir``; ``BundleError`` for a symlink or a special file."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        raise BundleError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISLNK(mode):
        raise BundleError(
            f"{path} is a symlink; a bundle holds plain files only",
            hint="the bundle is damaged or was crafted; copy the files it should hold into it",
        )
    if stat.S_ISDIR(mode):
        return "dir"
    if not stat.S_ISREG(mode):
        raise BundleError(
            f"{path} is not a regular file (a device, pipe or socket); a bundle holds plain "
            "files only"
        )
    return "file"


def _open_member(path: Path) -> int:
    """A bundle file opened for reading: never through a symlink, never a FIFO or device."""
    if _member_kind(path) != "file":
        raise BundleError(f"{path}: missing from the bundle or not a file")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise BundleError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the lstat
        os.close(fd)
        raise BundleError(f"{path} is not a regular file")
    return fd


def _read_member(path: Path, what: str, limit: int) -> str:
    """A bundle file's text: a regular file of at most ``limit`` bytes, UTF-8."""
    with os.fdopen(_open_member(path), "rb") as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise BundleError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise BundleError(f"{path}: the {what} is larger than {limit >> 20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise BundleError(
            f"{path}:{line}: the {what} is not UTF-8 (byte 0x{data[exc.start]:02x})"
        ) from None


def _read_member_yaml(path: Path, what: str) -> str:
    """A YAML file of the bundle, under model.yaml's limits (1 MiB, UTF-8)."""
    return _read_member(path, what, MAX_FILE_BYTES)


def _trace_lines(path: Path, last: list[str]) -> Iterator[str]:
    """A trace file's lines, one at a time, under the line, size and step caps. ``last``
    receives the last non-blank line (to tell a line cut short by a crash)."""
    total = 0
    with os.fdopen(_open_member(path), "rb") as handle:
        if os.fstat(handle.fileno()).st_size > MAX_TRACE_BYTES:  # refused before any parsing
            raise BundleError(
                f"{path}: the trace is larger than {MAX_TRACE_BYTES >> 20} MiB",
                hint="split the scenario into smaller runs",
            )
        for number, raw in enumerate(
            iter(lambda: handle.readline(MAX_TRACE_LINE_BYTES + 1), b""), 1
        ):
            total += len(raw)
            if len(raw) > MAX_TRACE_LINE_BYTES:
                raise BundleError(
                    f"{path}:{number}: a trace line longer than {MAX_TRACE_LINE_BYTES >> 20} MiB"
                )
            if total > MAX_TRACE_BYTES:
                raise BundleError(
                    f"{path}: the trace is larger than {MAX_TRACE_BYTES >> 20} MiB",
                    hint="split the scenario into smaller runs",
                )
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise BundleError(f"{path}:{number}: the trace line is not UTF-8") from None
            # One header, one end, the rest steps: a line count bounds the steps.
            if number > MAX_TRACE_STEPS + 2:
                raise BundleError(f"{path}: more than {MAX_TRACE_STEPS} steps in one trace")
            if line.strip():
                last[:] = [line]
            yield line


def _read_json(path: Path, what: str) -> Any:
    if _member_kind(path) == "missing":
        raise BundleError(f"{path}: the bundle has no {what}")
    text = _read_member(path, what, MAX_JSON_BYTES)
    try:
        return json.loads(text)
    except RecursionError:
        raise BundleError(f"{path}: the {what} is nested too deeply to be a bundle file") from None
    except ValueError as exc:
        raise BundleError(f"{path}: the {what} is not readable JSON ({exc})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a bundle may hold")


def _read_evidence(path: Path) -> DistributionEvidence:
    """A run's distribution evidence: under its size cap, strict JSON (no NaN or Infinity),
    every number finite and in range and every length consistent (``DistributionEvidence``);
    anything else is a ``BundleError`` (exit 2). Whether it describes the trace is the
    check's to say (``skip`` naming the mismatch)."""
    text = _read_member(path, "distribution evidence", MAX_EVIDENCE_BYTES)
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise BundleError(f"{path}: the distribution evidence is nested too deeply") from None
    except ValueError as exc:
        raise BundleError(
            f"{path}: the distribution evidence is not readable JSON ({exc})"
        ) from None
    try:
        return DistributionEvidence.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise BundleError(
            f"{path}: malformed distribution evidence at {printable(where)[:200]}: "
            f"{printable(first['msg'])[:200]}",
            hint="the bundle is damaged or was crafted; remove the file to re-judge the "
            "distribution with the model (`specseed check` loads it then)",
        ) from None


def _read_manifest(root: Path) -> Manifest:
    if not root.exists():
        raise BundleError(f"{root}: no such bundle directory")
    if not root.is_dir():
        raise BundleError(
            f"{root} is not a bundle directory",
            hint="a bundle is the directory written by `specseed audit --bundle DIR`",
        )
    if _member_kind(root / MANIFEST) != "file":
        raise BundleError(
            f"{root} is not a specseed bundle (no {MANIFEST})",
            hint="a bundle is the directory written by `specseed audit --bundle DIR`",
        )
    manifest = _read_json(root / MANIFEST, "manifest")
    if not isinstance(manifest, dict) or "bundle_format" not in manifest:
        raise BundleError(f"{root / MANIFEST} is not a specseed bundle manifest")
    major = str(manifest["bundle_format"]).split(".")[0]
    if major != BUNDLE_FORMAT.split(".")[0]:
        raise BundleError(
            f"{root}: bundle format {manifest['bundle_format']!r} is not readable by "
            f"specseed {__version__} (reads format {BUNDLE_FORMAT})",
            hint="read it with the specseed version that wrote it: "
            f"{manifest.get('specseed_version', 'unknown')}",
        )
    if not isinstance(manifest.get("scenarios"), list):
        raise BundleError(f"{root / MANIFEST}: 'scenarios' is missing or not a list")
    try:
        parsed = Manifest.model_validate(manifest)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["loc"][:1] == ("scenarios",):
            raise BundleError(f"{root / MANIFEST}: a scenario entry is malformed") from None
        where = ".".join(str(part) for part in first["loc"])
        raise BundleError(f"{root / MANIFEST}: {where}: {first['msg']}") from None
    if len(parsed.scenarios) > MAX_SCENARIOS:
        raise BundleError(
            f"{root / MANIFEST} lists {len(parsed.scenarios)} scenarios; a bundle holds at "
            f"most {MAX_SCENARIOS}",
            hint="the bundle is damaged or was crafted; nothing was judged",
        )
    seen: set[str] = set()
    for entry in parsed.scenarios:
        check_name(entry.name, f"{root / MANIFEST}: scenario name")
        _once(entry.name, seen, f"{root / MANIFEST} lists scenario", len(parsed.scenarios))
        runs: set[str] = set()
        for run in entry.runs:
            check_name(run, f"{root / MANIFEST}: run name")
            _once(run, runs, f"{root / MANIFEST}: scenario {entry.name} lists run", 0)
    return parsed


def _once(name: str, seen: set[str], what: str, total: int) -> None:
    """``BundleError`` for a name listed twice: a bundle's work is each scenario and run
    once, and a name repeated would be judged (and cost) once per listing."""
    if name in seen:
        times = f" more than once (of {total} entries)" if total else " twice"
        raise BundleError(
            f"{what} {printable(name)}{times}; each scenario and run is recorded once",
            hint="the bundle is damaged or was crafted; nothing was judged",
        )
    seen.add(name)


def _read_trace_file(path: Path, notes: list[str]) -> RunTrace:
    """A trace, streamed, tolerating a last line cut in half by a crash (it is dropped, and
    said)."""
    last: list[str] = []
    try:
        trace = read_trace(_trace_lines(path, last))
    except BundleError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        why = printable(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise BundleError(f"{path}: not a readable specseed trace ({why})") from None
    if last:
        try:
            json.loads(last[0])
        except (ValueError, RecursionError):
            notes.append(f"{path.parent.name}/{path.name}: last line cut short (dropped)")
    if trace.end.failure is not None and trace.end.failure.exception == "TraceTruncated":
        notes.append(f"{path.parent.name}/{path.name}: the run ends early (no end record)")
    return trace


def read_run_trace(root: Path, scenario: str, run: str) -> RunTrace | None:
    """One run's trace file of the bundle in ``root``, with its steps, read as
    :func:`read_bundle` reads it (names checked, no symlink followed, sizes bounded); None
    when the bundle has no such file."""
    path = root / check_name(scenario, "scenario name") / f"{check_name(run, 'run name')}.jsonl"
    if _member_kind(path) != "file":
        return None
    return _read_trace_file(path, [])


def _spend(budget: list[int], path: Path) -> None:
    """Count a trace file's bytes against the bundle's budget (``MAX_BUNDLE_TRACE_BYTES``)."""
    budget[0] -= os.lstat(path).st_size
    if budget[0] < 0:
        raise BundleError(
            f"{path}: the bundle's traces exceed {MAX_BUNDLE_TRACE_BYTES >> 20} MiB in all",
            hint="split the audit into smaller bundles (--scenario, --shard)",
        )


def _links(path: Path) -> int:
    """How many names a bundle file has (1 for a file of the bundle's own)."""
    fd = _open_member(path)
    try:
        return os.fstat(fd).st_nlink
    finally:
        os.close(fd)


def _read_minimal(path: Path, comparisons: Sequence[str], notes: list[str]) -> str | None:
    """``minimal.yaml``'s text when it is a scenario of this bundle's own: a regular file
    with no other hard link (one linked from outside would paste that file into an issue)
    that validates as a scenario; otherwise None, and a note says why."""
    if _member_kind(path) != "file":
        return None
    links = _links(path)
    if links != 1:
        notes.append(
            f"{path.parent.name}/{MINIMAL_FILE}: has {links} hard links (a file from elsewhere); "
            "not used"
        )
        return None
    text = _read_member_yaml(path, MINIMAL_FILE)
    try:
        parse_scenario(text, str(path), comparisons)
    except ScenarioError:
        notes.append(f"{path.parent.name}/{MINIMAL_FILE}: not a valid scenario; not used")
        return None
    return text


def read_bundle(path: Path) -> Bundle:
    """Read a bundle; raises :class:`BundleError` (exit 2) for a missing, foreign or damaged
    one, and accepts one cut short (``Bundle.notes`` say what is missing)."""
    root = Path(path)
    manifest = _read_manifest(root)
    notes: list[str] = []
    if manifest.status != "complete":
        notes.append(
            f"the audit did not finish (manifest status {manifest.status!r}): "
            "the bundle holds what was recorded until it stopped"
        )
    if _member_kind(root / MODEL) != "file":
        raise BundleError(f"{root}: the bundle has no {MODEL}")
    model_text = _read_member_yaml(root / MODEL, MODEL)
    try:
        config = parse_audit_config(model_text, str(root / MODEL))
    except ScenarioError as exc:
        raise BundleError(
            f"{root / MODEL} does not validate: {'; '.join(exc.problems or [exc.message])}"
        ) from None
    environment: dict[str, str] = {}
    if _member_kind(root / ENVIRONMENT) == "file":
        recorded = _read_json(root / ENVIRONMENT, "environment")
        if not isinstance(recorded, dict):
            raise BundleError(f"{root / ENVIRONMENT}: the environment is not a JSON object")
        # Values as text, whatever an older writer stored.
        environment = _ENVIRONMENT.validate_python({str(k): str(v) for k, v in recorded.items()})
    from specseed.checks import registered_comparison_ids

    comparisons = registered_comparison_ids()  # plugins' comparisons are valid in expect
    scenarios = []
    budget = [MAX_BUNDLE_TRACE_BYTES]
    contradicted: list[str] = []
    for entry in manifest.scenarios:
        name, source = entry.name, entry.source
        folder = root / name
        if _member_kind(folder) != "dir" or _member_kind(folder / SCENARIO_FILE) != "file":
            raise BundleError(f"{folder / SCENARIO_FILE}: missing from the bundle")
        text = _read_member_yaml(folder / SCENARIO_FILE, SCENARIO_FILE)
        try:
            scenario = parse_scenario(text, str(folder / SCENARIO_FILE), comparisons)
        except ScenarioError as exc:
            raise BundleError(
                f"{folder / SCENARIO_FILE} does not validate: "
                f"{'; '.join(exc.problems or [exc.message])}"
            ) from None
        if _links(folder / SCENARIO_FILE) != 1:
            # Linked from elsewhere: its comments are not the bundle's to paste anywhere.
            text = yaml.safe_dump(scenario.model_dump(mode="json", exclude_unset=True))
            notes.append(f"{name}/{SCENARIO_FILE}: has other hard links; only its scenario is used")
        traces: dict[str, RunTrace] = {}
        evidence: dict[str, DistributionEvidence] = {}
        # Every run the scenario defines is due (the manifest's list must agree): a run whose
        # trace is gone is missing, whatever the manifest says.
        planned_runs = tuple(r.name for r in scenario.runs)
        for run in planned_runs:
            trace_path = folder / f"{check_name(run, 'run name')}.jsonl"
            if _member_kind(trace_path) == "file":
                _spend(budget, trace_path)
                traces[run] = _read_trace_file(trace_path, notes)
                evidence_path = folder / f"{run}{EVIDENCE_SUFFIX}"
                if _member_kind(evidence_path) == "file":
                    evidence[run] = _read_evidence(evidence_path)
        missing = [r for r in planned_runs if r not in traces]
        if missing:
            notes.append(f"{name}: no trace for {', '.join(missing)}")
        findings: tuple[Finding, ...] | None = None
        if _member_kind(folder / FINDINGS_FILE) == "file":
            data = _read_json(folder / FINDINGS_FILE, "findings file")
            try:
                findings = FindingsFile.model_validate(data).findings
            except ValidationError as exc:
                raise BundleError(f"{folder / FINDINGS_FILE}: malformed findings ({exc})") from None
        elif traces:
            notes.append(f"{name}: no findings recorded (re-run them with `specseed check`)")
        contradicted += contradictions(config, scenario, name, entry.runs, traces)
        minimal = _read_minimal(folder / MINIMAL_FILE, comparisons, notes)
        scenarios.append(
            BundleScenario(
                name, source, text, scenario, traces, findings, planned_runs, minimal, evidence
            )
        )
    if contradicted:
        more = len(contradicted) - MAX_LISTED
        raise BundleError(
            f"{root}: the bundle contradicts itself: "
            + "; ".join(printable(c) for c in contradicted[:MAX_LISTED])
            + (f"; and {plural(more, 'more contradiction')}" if more > 0 else ""),
            hint="the bundle is damaged or was crafted: its files disagree, so nothing in it "
            "is judged; record it again with `specseed audit --bundle`",
        )
    return Bundle(
        root=root,
        manifest=manifest,
        config=config,
        model_text=model_text,
        environment=environment,
        scenarios=tuple(scenarios),
        notes=tuple(notes),
    )


@dataclass(frozen=True)
class BundleSummary:
    """What a bundle concluded, read without its model.yaml and scenario texts: a bundle
    whose engine is not installed here (``specseed sweep`` reads each release's so)."""

    root: Path
    manifest: Manifest
    environment: dict[str, str]
    findings: dict[str, tuple[Finding, ...] | None]
    """Each scenario's recorded findings (None: its checks never ran)."""
    headers: dict[tuple[str, str], RunHeader]
    """(scenario, run) -> the run's trace header, for the runs that have a trace."""

    @property
    def unfinished(self) -> tuple[str, ...]:
        """Scenarios without findings or with a planned run that has no trace."""
        return tuple(
            entry.name
            for entry in self.manifest.scenarios
            if self.findings.get(entry.name) is None
            or any((entry.name, run) not in self.headers for run in entry.runs)
        )


def read_summary(path: Path) -> BundleSummary:
    """A bundle's manifest, environment, findings and run headers, under the limits of
    :func:`read_bundle` (its model.yaml and scenario texts are not parsed); ``BundleError``
    for a missing, foreign or damaged one."""
    root = Path(path)
    manifest = _read_manifest(root)
    environment: dict[str, str] = {}
    if _member_kind(root / ENVIRONMENT) == "file":
        recorded = _read_json(root / ENVIRONMENT, "environment")
        if not isinstance(recorded, dict):
            raise BundleError(f"{root / ENVIRONMENT}: the environment is not a JSON object")
        environment = {str(k): str(v) for k, v in recorded.items()}
    findings: dict[str, tuple[Finding, ...] | None] = {}
    headers: dict[tuple[str, str], RunHeader] = {}
    for entry in manifest.scenarios:
        folder = root / entry.name
        for run in entry.runs:
            trace_path = folder / f"{run}.jsonl"
            if _member_kind(trace_path) == "file":
                try:
                    first = read_trace(itertools.islice(_trace_lines(trace_path, []), 1))
                except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
                    why = printable(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
                    raise BundleError(f"{trace_path}: not a readable trace ({why})") from None
                headers[(entry.name, run)] = first.header
        findings[entry.name] = None
        if _member_kind(folder / FINDINGS_FILE) == "file":
            data = _read_json(folder / FINDINGS_FILE, "findings file")
            try:
                findings[entry.name] = FindingsFile.model_validate(data).findings
            except ValidationError as exc:
                raise BundleError(f"{folder / FINDINGS_FILE}: malformed findings ({exc})") from None
    return BundleSummary(root, manifest, environment, findings, headers)


def recorded_scenarios(bundle: Bundle) -> Iterable[LoadedScenario]:
    """The bundle's scenarios as loaded scenarios (their sources are the bundle's copies)."""
    for item in bundle.scenarios:
        yield LoadedScenario(item.scenario, str(bundle.root / item.name / SCENARIO_FILE))
