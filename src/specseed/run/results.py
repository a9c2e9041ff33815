"""What an audit produces, and the events emitted while producing it.

The runner emits the progress events (:class:`AuditStarted` to :class:`ScenarioChecked`) and
returns an :class:`AuditResult`; the audit object (``specseed.workflows.audit``) adds the events of its
end (:class:`AuditSkipped`, :class:`AuditInterruptedEvent`, :class:`OutputFailed`,
:class:`AuditFinished`) to the same stream. Reporters (``specseed.reporting``) consume both
and never decide a verdict themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specseed.checks.findings import FAILING, Finding
from specseed.scenarios.schema import AuditConfig, Scenario
from specseed.traces.records import RunTrace


@dataclass(frozen=True)
class ScenarioResult:
    """A scenario's recorded runs and the findings of every check on them."""

    scenario: Scenario
    source: str
    """``builtin:<name>`` or the scenario file's path as model.yaml gives it."""
    traces: dict[str, RunTrace]
    """Recorded runs by run name."""
    findings: tuple[Finding, ...]
    seconds: float
    """Wall time of the scenario's runs and checks."""
    missing_evidence: tuple[str, ...] = ()
    """Trace files that could not be written, each with why and up to which step they hold
    evidence (the findings were judged on the full runs in memory)."""
    distribution_evidence: Mapping[str, Any] = field(default_factory=dict)
    """The ``distribution`` check's evidence by run name (``distribution.evidence``), for
    the bundle (``<scenario>/<run>.distribution.json``)."""


@dataclass(frozen=True)
class AuditResult:
    """Everything an audit produced; reporters render it, the CLI maps it to an exit code."""

    config: AuditConfig
    contract: str
    """The contract the engine was held to."""
    scenarios: tuple[ScenarioResult, ...]
    environment: dict[str, str]
    """Versions and devices, as the engine adapter reports them."""
    seconds: float
    command: str = ""
    """The command line that reproduces the audit."""
    interrupted: str | None = None
    """The signal that stopped the audit early (``SIGINT``, ``SIGTERM``); None: it ran to the
    end. ``scenarios`` then holds the scenarios that finished, ``unfinished`` the others."""
    unfinished: tuple[str, ...] = ()
    """Scenarios not run to the end or not run at all (interrupted audits)."""
    workers: int = 1
    """Worker processes that served the scenarios (``--jobs``); 1: this process."""

    @property
    def missing_evidence(self) -> list[str]:
        return [m for s in self.scenarios for m in s.missing_evidence]

    @property
    def findings(self) -> list[Finding]:
        return [f for s in self.scenarios for f in s.findings]

    @property
    def verdict(self) -> str:
        """``fail`` when any finding fails or errors, else ``pass``."""
        return "fail" if any(f.status in FAILING for f in self.findings) else "pass"


# -- progress events ----------------------------------------------------------------------


@dataclass(frozen=True)
class AuditStarted:
    """The engine is about to load; ``runs`` runs of ``scenarios`` scenarios will follow."""

    scenarios: int
    runs: int
    engine: str


@dataclass(frozen=True)
class RunStarted:
    scenario: str
    run: str


@dataclass(frozen=True)
class RunFinished:
    scenario: str
    run: str
    seconds: float
    failed: bool
    """True when the run recorded an engine failure."""


@dataclass(frozen=True)
class ScenarioChecked:
    """A scenario's runs are recorded and its checks applied."""

    result: ScenarioResult


@dataclass(frozen=True)
class AuditSkipped:
    """Nothing was run, and that is no error (a ``--shard`` that no scenario falls in)."""

    reason: str


@dataclass(frozen=True)
class AuditInterruptedEvent:
    """A signal stopped the audit (``AuditInterrupted`` is the exception that carries it)."""

    signal: str
    """``SIGINT`` or ``SIGTERM``."""
    finished: int
    """Scenarios that finished and are reported."""
    unfinished: tuple[str, ...]
    reported: bool
    """False when it came before any scenario ran: no report follows."""


@dataclass(frozen=True)
class OutputFailed:
    """A report document or the bundle could not be written; the other outputs still are."""

    message: str
    hint: str | None = None


@dataclass(frozen=True)
class AuditFinished:
    """The last event of every audit: its result and the exit code it decided."""

    result: AuditResult | None
    """None when nothing ran (``AuditSkipped``, or interrupted before any scenario ran)."""
    exit_code: int
    bundle: Path | None = None
    """Where the audit wrote its bundle (its traces), if it did."""
    engine_log: Path | None = None
    """The temporary file holding the engine's own log, when no other place was given for
    it (``--engine-log``, the bundle) and the engine wrote to it."""


AuditEvent = (
    AuditStarted
    | RunStarted
    | RunFinished
    | ScenarioChecked
    | AuditSkipped
    | AuditInterruptedEvent
    | OutputFailed
    | AuditFinished
)
EventHandler = Callable[[AuditEvent], None]
