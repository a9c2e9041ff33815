"""The distribution check on the CPU: samples per second and wall time at the default budget.

    python benchmarks/bench_distribution.py [--false-alarms N]

Prints, for the built-in tiny model and the built-in ``distribution`` scenario (its default
budget: 150 copies each of two requests x 16 tokens, rejection sampling, K = 3):

1. the engine's wall time and sampled tokens (samples) per second;
2. the check's wall time with the oracle (model load, teacher-forced target forwards, the
   per-token evidence and the judge), and its samples per second;
3. the stored evidence: its size per 1000 tokens, the time to read it back and to judge it
   alone (what ``specseed check`` spends on a bundle);
4. the whole scenario's wall time (engine plus every check);
5. with ``--false-alarms N``: the correct engine audited N times, request seeds moved by
   10^6 per repeat and model_seed cycling 0-3, and how many runs the check failed (the
   stated rate is alpha = 1e-3 per run);
6. with ``--detections N``: the same N repeats with each planted bias injected, and how
   many the check caught.

Figures are measured side by side in one process; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import replace
from pathlib import Path

import torch
from perf_page import add_write_docs, docs_section

from specseed.checks.context import CheckContext
from specseed.checks.distribution import distribution
from specseed.distribution import oracle as oracle_module
from specseed.distribution.evidence import parse_evidence
from specseed.engine_adapters.contracts import get_contract
from specseed.plan.planning import PlannedScenario, base_settings, plan_audit, plan_run
from specseed.run.execute import run_audit
from specseed.run.results import AuditResult
from specseed.scenarios.loader import LoadedScenario
from specseed.scenarios.schema import AuditConfig, EngineConfig, Scenario


def _audit(config: AuditConfig, scenario: Scenario | None = None) -> AuditResult:
    """Audit model.yaml's scenarios, or ``scenario`` in place of the first one."""
    planned = plan_audit(config, Path.cwd())
    if scenario is not None:
        base = base_settings(config.engine, Path.cwd())
        plans = tuple(plan_run(scenario, run, base) for run in scenario.runs)
        planned = [PlannedScenario(LoadedScenario(scenario, planned[0].loaded.source), plans, base)]
    return run_audit(config, planned, Path.cwd())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--false-alarms", type=int, default=0)
    parser.add_argument("--detections", type=int, default=0)
    add_write_docs(parser)
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__}")

    config = AuditConfig(scenarios=["distribution"])
    started = time.perf_counter()
    result = _audit(config)
    total = time.perf_counter() - started
    scenario = result.scenarios[0]
    trace = next(iter(scenario.traces.values()))
    samples = sum(len(v) for v in trace.end.outputs.values())
    print(
        f"engine: {samples} sampled tokens in {trace.end.seconds:.2f} s = "
        f"{samples / trace.end.seconds:.0f} samples/s"
    )

    def fresh() -> CheckContext:  # no stored evidence: the oracle's phase runs
        return CheckContext(scenario.scenario, scenario.traces, get_contract("ideal"))

    oracle_module._CACHE.clear()
    started = time.perf_counter()
    findings = list(distribution(fresh(), trace))
    cold = time.perf_counter() - started
    ctx = fresh()
    started = time.perf_counter()
    findings = list(distribution(ctx, trace))
    warm = time.perf_counter() - started
    print(
        f"distribution check: {cold:.2f} s with the oracle's model load, {warm:.2f} s warm "
        f"= {samples / warm:.0f} samples/s; verdict {findings[0].status}"
    )
    # The judge alone, as ``specseed check`` runs it on a bundle's stored evidence.
    evidence = ctx.distribution_evidence[trace.name]
    text = evidence.to_json()
    started = time.perf_counter()
    stored = parse_evidence(json.loads(text))
    parsed = time.perf_counter() - started
    started = time.perf_counter()
    judged = list(distribution(replace(ctx, distribution_evidence={trace.name: stored}), trace))
    judge_s = time.perf_counter() - started
    tokens = sum(g.length * len(g.request_ids) for g in evidence.groups)
    print(
        f"evidence: {len(text.encode()) / 1024:.0f} KiB for {tokens} tokens = "
        f"{len(text.encode()) / tokens * 1000 / 1024:.1f} KiB per 1000 tokens; read and "
        f"validated in {parsed:.2f} s; judged (no torch needed) in {judge_s:.2f} s; verdict "
        f"{judged[0].status}"
    )
    print(f"whole scenario (engine, every check, model loads): {total:.2f} s")

    loaded = plan_audit(config, Path.cwd())[0].scenario
    if args.false_alarms:
        fails = sum(_repeat(loaded, repeat, None) for repeat in range(args.false_alarms))
        print(f"false alarms: {fails} of {args.false_alarms} runs (alpha 1e-3 per run)")
    if args.detections:
        for defect in PLANTED:
            caught = sum(_repeat(loaded, repeat, defect) for repeat in range(args.detections))
            print(f"{defect}: detected in {caught} of {args.detections} runs")


PLANTED = ("biased-acceptance", "accept-reuses-draft-draw", "draft-temperature-skipped")


def _repeat(loaded: Scenario, repeat: int, defect: str | None) -> bool:
    """One audit of the scenario with request seeds moved by 10^6 per repeat and model_seed
    cycling 0-3; True when the distribution check failed."""
    engine = EngineConfig(options={"model_seed": repeat % 4, "defects": [defect] if defect else []})
    moved = loaded.model_copy(
        update={
            "requests": {
                name: spec.model_copy(update={"seed": (spec.seed or 0) + 10**6 * (repeat + 1)})
                for name, spec in loaded.requests.items()
            }
        }
    )
    result = _audit(AuditConfig(engine=engine, scenarios=["distribution"]), moved)
    failed = [f for f in result.findings if f.check == "distribution" and f.status == "fail"]
    label = defect or "correct"
    print(
        f"  {label} repeat {repeat} (model_seed {repeat % 4}): "
        + (failed[0].message if failed else "pass"),
        flush=True,
    )
    return bool(failed)


if __name__ == "__main__":
    with docs_section(__file__):
        main()
