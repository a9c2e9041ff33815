"""The losslessness check (two-sample, no oracle): its speed and its power per minute.

    python benchmarks/bench_losslessness.py [--samples 150 300 600] [--false-alarms N]

Prints:

1. samples (sequences) per second through the statistic (``distribution.twosample``) on
   simulated sequences of 4 tokens;
2. on the reference engine (built-in tiny model, K = 3 against K = 0), the library's
   ``losslessness`` scenario at each ``--samples`` copies per arm: the wall time of the two
   runs and of the check, the detectable TV (80% power) of the first-token and second-token
   tests, and the TV detectable after one minute of audit (TV scales as 1/sqrt(copies):
   TV * sqrt(seconds / 60));
3. the seconds the scenario adds to the default audit (its wall time at the library's 150
   copies, every check included, ``distribution`` too);
4. with ``--false-alarms N``: N clean simulated scenarios through the statistic, and how many
   raised an alarm (stated rate: alpha = 1e-3 per scenario).

Figures are measured side by side in one process; nothing is asserted.
"""

from __future__ import annotations

import argparse
import math
import platform
import random
import time
from pathlib import Path

from perf_page import add_write_docs, docs_section

from specseed.checks.findings import Finding
from specseed.distribution.twosample import TwoSampleGroup, analyse
from specseed.plan.planning import PlannedScenario, base_settings, plan_run
from specseed.run.execute import run_audit
from specseed.scenarios.loader import LoadedScenario, load_library_scenario
from specseed.scenarios.schema import AuditConfig


def _sequences(rng: random.Random, n: int) -> tuple[tuple[int, ...], ...]:
    weights = [1.0 / (k + 1) for k in range(64)]
    return tuple(tuple(rng.choices(range(64), weights, k=4)) for _ in range(n))


def statistic_speed(copies: int = 2000, repeats: int = 5) -> float:
    rng = random.Random(0)
    groups = [TwoSampleGroup("g (T=1)", _sequences(rng, copies), _sequences(rng, copies))]
    analyse(groups)  # the power helpers' cache, once
    started = time.perf_counter()
    for _ in range(repeats):
        analyse(groups)
    return 2 * copies * repeats / (time.perf_counter() - started)


def false_alarms(runs: int) -> int:
    alarms = 0
    for seed in range(runs):
        rng = random.Random(10_000 + seed)
        alarms += bool(
            analyse([TwoSampleGroup("g", _sequences(rng, 150), _sequences(rng, 150))]).rejected
        )
    return alarms


def audit_scenario(samples: int, skip_distribution: bool) -> tuple[float, float, Finding]:
    """(seconds of the runs, seconds of the whole scenario, the losslessness finding)."""
    loaded = load_library_scenario("losslessness")
    scenario = loaded.scenario
    assert scenario.distribution is not None
    scenario = scenario.model_copy(
        update={"distribution": scenario.distribution.model_copy(update={"samples": samples})}
    )
    skip = ["distribution"] if skip_distribution else []
    config = AuditConfig.model_validate({"scenarios": ["losslessness"], "checks": {"skip": skip}})
    base = base_settings(config.engine, Path.cwd())
    item = PlannedScenario(
        LoadedScenario(scenario, loaded.source),
        tuple(plan_run(scenario, run, base) for run in scenario.runs),
        base,
    )
    result = run_audit(config, [item], Path.cwd())
    [done] = result.scenarios
    served = sum(t.end.seconds for t in done.traces.values())
    [finding] = [f for f in result.findings if f.check == "losslessness"]
    return served, done.seconds, finding


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, nargs="+", default=[150, 300, 600])
    parser.add_argument("--false-alarms", type=int, default=0)
    add_write_docs(parser)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}")
    print(f"statistic: {statistic_speed():,.0f} sequences/s (4 tokens, 2 x 2000 copies)")
    for samples in args.samples:
        served, total, finding = audit_scenario(samples, skip_distribution=True)
        tv = {
            name: float(line.split(f"{name} ")[1].split(",")[0])
            for line in finding.details
            for name in ("position 0", "position 1")
            if f"{name} 0." in line
        }
        per_minute = {k: v * math.sqrt(total / 60.0) for k, v in tv.items()}
        print(
            f"{samples} copies per arm: runs {served:.1f} s, scenario {total:.1f} s "
            f"(check {total - served:.2f} s), {finding.status}; detectable TV "
            + ", ".join(f"{k} {v:.3f}" for k, v in tv.items())
            + "; after 1 min of audit "
            + ", ".join(f"{k} {v:.3f}" for k, v in per_minute.items())
        )
    _, added, _ = audit_scenario(150, skip_distribution=False)
    print(f"default audit: the losslessness scenario adds {added:.1f} s (every check)")
    if args.false_alarms:
        alarms = false_alarms(args.false_alarms)
        print(f"false alarms: {alarms} of {args.false_alarms} clean simulated scenarios")


if __name__ == "__main__":
    with docs_section(__file__):
        main()
