"""Working from a bundle without an engine: re-check its recorded traces, and its recordings
keyed by scenario and run (what ``diff`` and a replay compare). Replaying its scenarios on an
engine is ``workflows.replay``."""

from __future__ import annotations

from dataclasses import replace

from specseed.bundle.format import Bundle
from specseed.checks.findings import Finding
from specseed.core.errors import InputError
from specseed.engine_adapters.contracts import contract_names
from specseed.run.execute import evaluate
from specseed.run.results import AuditResult
from specseed.traces.records import RunTrace


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
