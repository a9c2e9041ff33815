"""Working from a bundle without an engine: re-check its recorded traces, and its recordings
keyed by scenario and run (what ``diff`` and a replay compare). Replaying its scenarios on an
engine is ``workflows.replay``."""

from __future__ import annotations

from collections.abc import Iterable
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


def recheck(
    bundle: Bundle, contract: str | None = None, *, load_checkpoints: bool = False
) -> AuditResult:
    """Apply the checks of this specseed to the bundle's recorded traces, holding the engine
    to ``contract`` (default: the one the audit used). Imports no engine. The findings
    recorded in the bundle play no part: a bundle never vouches for itself.
    ``load_checkpoints``: the user's consent that the distribution check's oracle loads a
    checkpoint the traces name (without it that check is ``skip`` where the bundle stored
    no evidence)."""
    held_to = _known_contract(contract or bundle.contract)
    findings = {}
    for item in bundle.scenarios:
        # A bundle cut short lacks runs: comparisons that need them are skipped, saying so.
        complete = [e for e in item.scenario.expect if all(r in item.traces for r in e.runs)]
        scenario = item.scenario.model_copy(update={"expect": complete})
        # Stored distribution evidence is re-judged (no model, no torch); without it the
        # check asks the oracle, as for bundles older than the evidence file.
        stored = dict(item.distribution_evidence)
        found = evaluate(
            scenario,
            item.traces,
            held_to,
            bundle.config.checks.skip,
            stored,
            load_checkpoints=load_checkpoints,
        )
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


def disagreements(bundle: Bundle, rejudged: AuditResult) -> list[str]:
    """Where the findings a bundle recorded (``findings.json``) disagree with those its
    traces give now, one line per scenario: the statuses of each check's findings compared
    (messages may change between versions; a verdict may not change unsaid)."""
    lines = []
    fresh = {s.scenario.name: s.findings for s in rejudged.scenarios}
    for item in bundle.scenarios:
        if item.findings is None:
            continue
        recorded, now = _statuses(item.findings), _statuses(fresh.get(item.name, ()))
        differ = sorted(c for c in set(recorded) | set(now) if recorded.get(c) != now.get(c))
        if not differ:
            continue
        shown = ", ".join(
            f"{c} {_word(recorded.get(c))} -> {_word(now.get(c))}" for c in differ[:3]
        )
        more = f" and {len(differ) - 3} more" if len(differ) > 3 else ""
        lines.append(
            f"{item.name}: its findings.json disagrees with its traces ({shown}{more}); "
            "the traces' verdict stands"
        )
    return lines


def _statuses(findings: Iterable[Finding]) -> dict[str, tuple[str, ...]]:
    by_check: dict[str, list[str]] = {}
    for finding in findings:
        by_check.setdefault(finding.check, []).append(finding.status)
    return {check: tuple(sorted(statuses)) for check, statuses in by_check.items()}


def _word(statuses: tuple[str, ...] | None) -> str:
    """``pass``, or ``2 pass/1 fail``: a count where a check has several findings, so that
    a finding lost (one pass where two were recorded) reads as a difference."""
    if not statuses:
        return "absent"
    if len(statuses) == 1:
        return statuses[0]
    return "/".join(f"{statuses.count(s)} {s}" for s in dict.fromkeys(statuses))
