"""The distribution check on the CPU: samples per second and wall time at the default budget.

    python benchmarks/bench_distribution.py [--false-alarms N]

Prints, for the built-in tiny model and the built-in ``distribution`` scenario (its default
budget: 150 copies each of two requests x 16 tokens, rejection sampling, K = 3):

1. the engine's wall time and sampled tokens (samples) per second;
2. the check's wall time split into the oracle (teacher-forced target forwards) and the
   statistics, and its samples per second;
3. the whole scenario's wall time (engine plus every check);
4. with ``--false-alarms N``: the correct engine audited N times, request seeds moved by
   10^6 per repeat and model_seed cycling 0-3, and how many runs the check failed (the
   stated rate is alpha = 1e-3 per run).

Figures are measured side by side in one process; nothing is asserted.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import torch

from specseed.checks.context import CheckContext
from specseed.checks.distribution import distribution
from specseed.contracts import get_contract
from specseed.distribution import oracle as oracle_module
from specseed.runner import (
    AuditResult,
    PlannedScenario,
    base_settings,
    plan_audit,
    plan_run,
    run_audit,
)
from specseed.scenarios.loader import LoadedScenario
from specseed.scenarios.schema import AuditConfig, EngineConfig, Scenario


def _audit(config: AuditConfig, scenario: Scenario | None = None) -> AuditResult:
    """Audit model.yaml's scenarios, or ``scenario`` in place of the first one."""
    planned = plan_audit(config, Path.cwd())
    if scenario is not None:
        base = base_settings(config.engine, Path.cwd())
        plans = tuple(plan_run(scenario, run, base) for run in scenario.runs)
        planned = [PlannedScenario(LoadedScenario(scenario, planned[0].loaded.source), plans)]
    return run_audit(config, planned, Path.cwd())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--false-alarms", type=int, default=0)
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

    ctx = CheckContext(scenario.scenario, scenario.traces, get_contract("ideal"))
    oracle_module._CACHE.clear()
    started = time.perf_counter()
    findings = list(distribution(ctx, trace))
    cold = time.perf_counter() - started
    started = time.perf_counter()
    findings = list(distribution(ctx, trace))
    warm = time.perf_counter() - started
    print(
        f"distribution check: {cold:.2f} s with the oracle's model load, {warm:.2f} s warm "
        f"= {samples / warm:.0f} samples/s; verdict {findings[0].status}"
    )
    print(f"whole scenario (engine, every check, model loads): {total:.2f} s")

    if args.false_alarms:
        fails = 0
        for repeat in range(args.false_alarms):
            engine = EngineConfig(model_seed=repeat % 4)
            loaded = plan_audit(AuditConfig(scenarios=["distribution"]), Path.cwd())[0].scenario
            moved = loaded.model_copy(
                update={
                    "requests": {
                        name: spec.model_copy(
                            update={"seed": (spec.seed or 0) + 10**6 * (repeat + 1)}
                        )
                        for name, spec in loaded.requests.items()
                    }
                }
            )
            result = _audit(AuditConfig(engine=engine, scenarios=["distribution"]), moved)
            failed = [
                f for f in result.findings if f.check == "distribution" and f.status == "fail"
            ]
            fails += bool(failed)
            print(
                f"  repeat {repeat}: model_seed {repeat % 4}: "
                f"{'FAIL ' + failed[0].message if failed else 'pass'}",
                flush=True,
            )
        print(f"false alarms: {fails} of {args.false_alarms} runs (alpha 1e-3 per run)")


if __name__ == "__main__":
    main()
