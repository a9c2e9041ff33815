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
    DIR/<scenario>/minimal.yaml    optional: the smallest failing scenario (``minimize``)

The manifest is written before anything runs and every whole file is written atomically
(``specseed.core.files``: temporary file, fsync, ``os.replace``), so a crash or Ctrl-C leaves
a bundle that reads: the reader accepts one cut short, and says what is missing.

The manifest and findings files are written and read through pydantic models (``Manifest``,
``FindingsFile``), which give the format its JSON Schema (``bundle_json_schema``,
``specseed schema --kind bundle``).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from specseed import __version__
from specseed.checks.attribution import root_causes
from specseed.checks.findings import (
    Finding,
)
from specseed.core.errors import InputError, ScenarioError
from specseed.core.files import write_atomic
from specseed.run.results import AuditEvent, AuditResult, ScenarioChecked, ScenarioResult
from specseed.scenarios.loader import (
    LoadedScenario,
    engine_options,
    library_text,
    parse_audit_config,
    parse_scenario,
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
_TOP_LEVEL = (MANIFEST, MODEL, ENVIRONMENT)


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
        "<scenario>/<run>.jsonl": trace_json_schema(),
    }


# -- secrets ------------------------------------------------------------------------------

REMOVED = "<removed>"
_SECRET_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "credential", "credentials"}
)
_SECRET_VALUE = re.compile(
    r"(?i:bearer)\s+[A-Za-z0-9._~+/=-]+"  # HTTP bearer tokens
    r"|\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}"  # OpenAI-style keys
    r"|\bhf_[A-Za-z0-9]{16,}"  # Hugging Face tokens
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|\bAKIA[A-Z0-9]{16}"  # AWS access key ids
)
_ASSIGNMENT = re.compile(r"(\b[A-Za-z][\w.-]*)(\s*[=:]\s*)(\S+)")


def is_secret_name(name: str) -> bool:
    """A field, flag or environment variable name that usually holds a secret: its last word
    is key, token, secret, password or credential (``OPENAI_API_KEY``, ``--api-key``,
    ``hf_token``, ``apiKey``; not ``max_tokens``, ``return_token_ids`` or ``api_key_env``,
    which names the variable, not its value)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name.lstrip("-"))
    words = [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]
    return bool(words) and words[-1] in _SECRET_WORDS


def scrub_text(text: str) -> str:
    """Text with bearer strings, API keys and ``NAME_KEY=value`` assignments removed."""
    text = _SECRET_VALUE.sub(REMOVED, text)
    return _ASSIGNMENT.sub(
        lambda m: m.group(1) + m.group(2) + REMOVED if is_secret_name(m.group(1)) else m.group(0),
        text,
    )


def scrub(value: Any) -> Any:
    """A JSON-like value with secrets removed: values under secret-looking keys, and
    secret-looking strings anywhere."""
    if isinstance(value, Mapping):
        return {
            k: (REMOVED if is_secret_name(str(k)) and v not in (None, "") else scrub(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    if isinstance(value, str):
        return scrub_text(value)
    return value


def scrub_command(argv: Sequence[str]) -> list[str]:
    """A command line with the values of secret-looking flags removed
    (``--api-key X``, ``--token=X``) and secret-looking strings anywhere."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REMOVED)
            hide_next = False
            continue
        if arg.startswith("-") and is_secret_name(arg.split("=", 1)[0]):
            if "=" in arg:
                out.append(arg.split("=", 1)[0] + "=" + REMOVED)
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(scrub_text(arg))
    return out


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
    """A trace writer that removes secrets from the header (engine options may hold keys)."""

    def header(self, header: RunHeader) -> None:
        super().header(
            replace(
                header,
                engine_config=EngineConfigRecord(**scrub(asdict(header.engine_config))),
                environment=scrub(header.environment),
            )
        )


def scenario_text(loaded: LoadedScenario, base_dir: Path) -> str:
    """A scenario's full YAML text: the library file, or the user's file as it is."""
    if loaded.source.startswith("builtin:"):
        return library_text(loaded.source.removeprefix("builtin:"))
    path = Path(loaded.source)
    path = path if path.is_absolute() else base_dir / path
    try:
        return path.read_text(encoding="utf-8")
    except OSError:  # moved since it was loaded: its parsed form says the same
        data = loaded.scenario.model_dump(mode="json", exclude_unset=True)
        return yaml.safe_dump(data, sort_keys=False)


def resolved_model_yaml(config: AuditConfig, scenario_names: Sequence[str], base_dir: Path) -> str:
    """model.yaml as the audit resolved it: checkpoint paths absolute, scenarios pointing at
    the bundle's own copies, secrets removed."""
    data = config.model_dump(mode="json")
    # Every option with its value, defaults included: another version may default otherwise.
    data["engine"]["options"] = engine_options(config, MODEL).model_dump(mode="json")
    for key in ("checkpoint", "draft_checkpoint"):
        value = data["engine"].get(key)
        if value is not None and not Path(value).is_absolute():
            data["engine"][key] = str((base_dir / value).resolve())
    data["engine"] = scrub(data["engine"])
    data["scenarios"] = [f"{name}/{SCENARIO_FILE}" for name in scenario_names]
    header = "# Resolved by specseed for this bundle: scenarios are the bundle's own copies.\n"
    return header + yaml.safe_dump(data, sort_keys=False)


def _clear_previous(root: Path) -> None:
    """Make ``root`` ready for a new bundle: it must be empty, or hold an earlier bundle,
    whose files are removed (never anything else)."""
    if not root.exists():
        return
    entries = [p for p in root.iterdir() if not p.name.startswith(".")]
    if not entries:
        return
    manifest = root / MANIFEST
    if not manifest.is_file():
        raise BundleError(
            f"{root} is not empty and holds no specseed bundle; refusing to write into it",
            hint="give a new or empty directory",
        )
    try:
        names = [s["name"] for s in json.loads(manifest.read_text())["scenarios"]]
    except (ValueError, KeyError, TypeError):
        names = []
    for name in names:
        folder = root / name
        if folder.is_dir():
            shutil.rmtree(folder)
    for name in _TOP_LEVEL:
        (root / name).unlink(missing_ok=True)


class BundleWriter:
    """Writes a bundle as the audit goes. Call :meth:`start` before the engine runs, give
    :meth:`trace_writer` to the runner, feed it the runner's events, then :meth:`finish`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.manifest: Manifest | None = None
        self._environment: dict[str, str] = {}

    def start(
        self,
        config: AuditConfig,
        scenarios: Sequence[tuple[LoadedScenario, Sequence[str]]],
        base_dir: Path,
        argv: Sequence[str],
    ) -> None:
        """Write the manifest, model.yaml, the environment and every scenario's text.

        ``scenarios``: each loaded scenario with the names of the runs that will be served.
        """
        _clear_previous(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
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
        write_atomic(self.root / MANIFEST, self.manifest.to_json())
        write_atomic(self.root / MODEL, resolved_model_yaml(config, names, base_dir))
        for loaded, _ in scenarios:
            text = scenario_text(loaded, base_dir)
            write_atomic(self.root / loaded.scenario.name / SCENARIO_FILE, text)
        self._environment = host_environment()
        write_atomic(self.root / ENVIRONMENT, _json(self._environment))

    def trace_writer(self, scenario: str, run: str) -> TraceWriter:
        return _ScrubbingTraceWriter(self.root / scenario / f"{run}.jsonl")

    def _add_environment(self, engine_env: Mapping[str, str]) -> None:
        # Again now that the engine has loaded (torch imported: CUDA and GPU are known).
        engine = {k: str(v) for k, v in scrub(dict(engine_env)).items()}
        merged = {**self._environment, **host_environment(), **engine}
        if merged != self._environment:
            self._environment = merged
            write_atomic(self.root / ENVIRONMENT, _json(merged))

    def on_event(self, event: AuditEvent) -> None:
        if not isinstance(event, ScenarioChecked):
            return
        result = event.result
        for trace in result.traces.values():
            self._add_environment(trace.header.environment)
            break
        data = FindingsFile(
            scenario=result.scenario.name,
            seconds=round(result.seconds, 3),
            findings=result.findings,
            root_causes=tuple(c.to_json() for c in root_causes(result.findings)),
        )
        write_atomic(
            self.root / result.scenario.name / FINDINGS_FILE, _json(data.model_dump(mode="python"))
        )

    def finish(self, result: AuditResult, exit_code: int) -> None:
        self._add_environment(result.environment)
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
        write_atomic(self.root / MANIFEST, self.manifest.to_json())


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def write_minimal(root: Path, scenario: str, text: str) -> Path:
    """Store a minimized scenario in a bundle (read back by :func:`read_bundle`)."""
    path = root / scenario / MINIMAL_FILE
    write_atomic(path, text)
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

    def as_result(self, findings: Mapping[str, Sequence[Finding]] | None = None) -> AuditResult:
        """The bundle as an audit result (recorded findings unless others are given)."""
        results = []
        for item in self.scenarios:
            chosen = findings[item.name] if findings is not None else item.findings or ()
            results.append(
                ScenarioResult(item.scenario, item.source, item.traces, tuple(chosen), 0.0)
            )
        return AuditResult(
            config=self.config,
            contract=self.contract,
            scenarios=tuple(results),
            environment=self.environment,
            seconds=self.manifest.seconds or 0.0,
            command=self.manifest.command or "",
        )


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError(f"{path}: the bundle has no {what}") from None
    except (OSError, ValueError) as exc:
        raise BundleError(f"{path}: the {what} is not readable JSON ({exc})") from None


def _read_manifest(root: Path) -> Manifest:
    if not root.exists():
        raise BundleError(f"{root}: no such bundle directory")
    if not root.is_dir():
        raise BundleError(
            f"{root} is not a bundle directory",
            hint="a bundle is the directory written by `specseed audit --bundle DIR`",
        )
    if not (root / MANIFEST).is_file():
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
        return Manifest.model_validate(manifest)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["loc"][:1] == ("scenarios",):
            raise BundleError(f"{root / MANIFEST}: a scenario entry is malformed") from None
        where = ".".join(str(part) for part in first["loc"])
        raise BundleError(f"{root / MANIFEST}: {where}: {first['msg']}") from None


def _read_trace_file(path: Path, notes: list[str]) -> RunTrace:
    """A trace, tolerating a last line cut in half by a crash (it is dropped, and said)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BundleError(f"{path}: cannot read the trace ({exc})") from None
    if lines:
        try:
            json.loads(lines[-1])
        except ValueError:
            notes.append(f"{path.parent.name}/{path.name}: last line cut short (dropped)")
            lines = lines[:-1]
    try:
        trace = read_trace(lines)
    except (ValueError, TypeError, KeyError) as exc:
        raise BundleError(f"{path}: not a readable specseed trace ({exc})") from None
    if trace.end.failure is not None and trace.end.failure.exception == "TraceTruncated":
        notes.append(f"{path.parent.name}/{path.name}: the run ends early (no end record)")
    return trace


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
    try:
        model_text = (root / MODEL).read_text(encoding="utf-8")
    except OSError:
        raise BundleError(f"{root}: the bundle has no {MODEL}") from None
    try:
        config = parse_audit_config(model_text, str(root / MODEL))
    except ScenarioError as exc:
        raise BundleError(
            f"{root / MODEL} does not validate: {'; '.join(exc.problems or [exc.message])}"
        ) from None
    environment: dict[str, str] = {}
    if (root / ENVIRONMENT).is_file():
        recorded = _read_json(root / ENVIRONMENT, "environment")
        if not isinstance(recorded, dict):
            raise BundleError(f"{root / ENVIRONMENT}: the environment is not a JSON object")
        # Values as text, whatever an older writer stored.
        environment = _ENVIRONMENT.validate_python({str(k): str(v) for k, v in recorded.items()})
    scenarios = []
    for entry in manifest.scenarios:
        name, source, planned_runs = entry.name, entry.source, entry.runs
        folder = root / name
        try:
            text = (folder / SCENARIO_FILE).read_text(encoding="utf-8")
        except OSError:
            raise BundleError(f"{folder / SCENARIO_FILE}: missing from the bundle") from None
        try:
            scenario = parse_scenario(text, str(folder / SCENARIO_FILE))
        except ScenarioError as exc:
            raise BundleError(
                f"{folder / SCENARIO_FILE} does not validate: "
                f"{'; '.join(exc.problems or [exc.message])}"
            ) from None
        traces: dict[str, RunTrace] = {}
        for run in planned_runs or tuple(r.name for r in scenario.runs):
            trace_path = folder / f"{run}.jsonl"
            if trace_path.is_file():
                traces[run] = _read_trace_file(trace_path, notes)
        missing = [r for r in planned_runs if r not in traces]
        if missing:
            notes.append(f"{name}: no trace for {', '.join(missing)}")
        findings: tuple[Finding, ...] | None = None
        if (folder / FINDINGS_FILE).is_file():
            data = _read_json(folder / FINDINGS_FILE, "findings file")
            try:
                findings = FindingsFile.model_validate(data).findings
            except ValidationError as exc:
                raise BundleError(f"{folder / FINDINGS_FILE}: malformed findings ({exc})") from None
        elif traces:
            notes.append(f"{name}: no findings recorded (re-run them with `specseed check`)")
        minimal = None
        if (folder / MINIMAL_FILE).is_file():
            minimal = (folder / MINIMAL_FILE).read_text(encoding="utf-8")
        scenarios.append(
            BundleScenario(name, source, text, scenario, traces, findings, planned_runs, minimal)
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


def recorded_scenarios(bundle: Bundle) -> Iterable[LoadedScenario]:
    """The bundle's scenarios as loaded scenarios (their sources are the bundle's copies)."""
    for item in bundle.scenarios:
        yield LoadedScenario(item.scenario, str(bundle.root / item.name / SCENARIO_FILE))
