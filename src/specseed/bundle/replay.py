"""Working from a bundle: re-check its recorded traces (no engine), and replay its scenarios on
the current engine to compare against the recording."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from specseed.bundle.compare import RecordingDiff, compare_recordings
from specseed.bundle.format import Bundle, recorded_scenarios
from specseed.checks.findings import Finding
from specseed.core.contracts import contract_names
from specseed.core.errors import InputError
from specseed.engine_adapters.base import EngineAdapter
from specseed.plan.planning import base_settings, plan_scenario
from specseed.run.execute import evaluate, run_audit
from specseed.run.results import AuditResult, EventHandler
from specseed.scenarios.loader import load_audit_config
from specseed.traces.records import RunTrace, TraceWriter


def _known_contract(name: str) -> str:
    if name not in contract_names():
        raise InputError(
            f"--contract {name}: unknown contract",
            hint=f"known: {', '.join(contract_names())}",
        )
    return name


def recheck(bundle: Bundle, contract: str | None = None) -> AuditResult:
    """Apply the checks of this specseed to the bundle's recorded traces, holding the engine
    to ``contract`` (default: the one the audit used). Imports no engine."""
    held_to = _known_contract(contract or bundle.contract)
    findings = {}
    for item in bundle.scenarios:
        # A bundle cut short lacks runs: comparisons that need them are skipped, saying so.
        complete = [e for e in item.scenario.expect if all(r in item.traces for r in e.runs)]
        scenario = item.scenario.model_copy(update={"expect": complete})
        # Stored distribution evidence is re-judged (no model, no torch); without it the
        # check asks the oracle, as for bundles older than the evidence file.
        stored = dict(item.distribution_evidence)
        found = evaluate(scenario, item.traces, held_to, bundle.config.checks.skip, stored)
        for expectation in item.scenario.expect:
            if expectation not in complete:
                missing = [r for r in expectation.runs if r not in item.traces]
                found.append(
                    Finding(
                        status="skip",
                        message=f"{expectation.check}: run {', '.join(missing)} was not "
                        "recorded (the bundle was cut short)",
                        runs=tuple(expectation.runs),
                        check=expectation.check,
                        scenario=item.name,
                    )
                )
        findings[item.name] = found
    return replace(bundle.as_result(findings), contract=held_to)


def recordings(bundle: Bundle) -> dict[tuple[str, str], RunTrace]:
    return {(s.name, run): trace for s in bundle.scenarios for run, trace in s.traces.items()}


@dataclass(frozen=True)
class ReplayResult:
    audit: AuditResult
    """The fresh audit of the bundle's scenarios."""
    diff: RecordingDiff
    """The recording (left) against the replay (right)."""


def replay(
    bundle: Bundle,
    model: Path | None = None,
    *,
    on_event: EventHandler | None = None,
    trace_writer: Callable[[str, str], TraceWriter] | None = None,
    command: str = "",
    adapter: EngineAdapter | None = None,
) -> ReplayResult:
    """Run the bundle's scenarios on the engine of its model.yaml (or of ``model``: its engine
    section, not its scenarios) and compare every request with the recording."""
    if model is not None:
        config = load_audit_config(model)
        base_dir = model.parent
    else:
        config, base_dir = bundle.config, bundle.root
    base = base_settings(config, base_dir)
    planned = [plan_scenario(loaded, base) for loaded in recorded_scenarios(bundle)]
    audit = run_audit(
        config,
        planned,
        base_dir,
        on_event=on_event,
        trace_writer=trace_writer,
        keep_steps=True,  # the diff against the recording reads every step
        command=command,
        adapter=adapter,
    )
    fresh = {(s.scenario.name, run): t for s in audit.scenarios for run, t in s.traces.items()}
    diff = compare_recordings(
        recordings(bundle), fresh, left_label=str(bundle.root), right_label="replay"
    )
    return ReplayResult(audit, diff)
