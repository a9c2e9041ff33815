"""Where an audit's time and memory go, measured side by side in one run.

    python benchmarks/bench_audit.py [--sizes 400,800,1600,3200] [--memory 1000,10000]

Prints, on the built-in tiny model (CPU):

1. the default audit (every built-in scenario): wall time, the engine's share (the runs'
   own seconds) against everything else (planning, checks, trace records), and the wall time
   with ``--trace-dir`` against without, as a ratio;
2. the run checks on one run of N seeded requests (plus N/4 unseeded): seconds per check, and
   how the time grows against N (1.0 = linear);
3. peak memory (max RSS, each size in a fresh process) of audits of 1,000 and 10,000 requests
   (scenarios of 100 requests each, traces streamed to a folder), and their ratio
   (1.0 = flat);
4. validating a scenario with 38,000 unknown keys: YAML parsing against the rest.

Nothing is asserted; the machine may be shared, so read the ratios first.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perf_page import add_write_docs, docs_section

from specseed.checks.context import CheckContext
from specseed.checks.registry import run_checks
from specseed.engine_adapters.contracts import get_contract
from specseed.plan.planning import base_settings, plan_audit, plan_run
from specseed.run.execute import create_adapter, run_audit
from specseed.scenarios.loader import parse_scenario
from specseed.scenarios.schema import AuditConfig, EngineConfig
from specseed.traces.records import RunTrace, TraceRecorder

MAX_TOKENS = 4
PER_SCENARIO = 100


def scenario_text(name: str, seeded: int, unseeded: int, offset: int = 0) -> str:
    lines = [
        f"name: {name}",
        "description: benchmark traffic",
        f"defaults: {{max_tokens: {MAX_TOKENS}, temperature: 1.0}}",
        "requests:",
    ]
    names = []
    for i in range(seeded + unseeded):
        seed = f", seed: {offset + i + 1}" if i < seeded else ""
        lines.append(f"  r{i}: {{prompt: [{(offset + i) % 500 + 1}, 5, 9]{seed}}}")
        names.append(f"r{i}")
    lines += ["runs:", "  - name: all", f"    requests: [{', '.join(names)}]"]
    return "\n".join(lines) + "\n"


def default_audit() -> None:
    config = AuditConfig()
    planned = plan_audit(config, Path.cwd())
    run_audit(config, planned[:1], Path.cwd())  # load and warm the engine once
    started = time.perf_counter()
    result = run_audit(config, planned, Path.cwd())
    off = time.perf_counter() - started
    engine = sum(t.end.seconds for s in result.scenarios for t in s.traces.values())
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        run_audit(config, planned, Path.cwd(), trace_dir=Path(folder))
        on = time.perf_counter() - started
    runs = sum(len(s.traces) for s in result.scenarios)
    print(f"default audit ({len(result.scenarios)} scenarios, {runs} runs)")
    print(f"  wall time, tracing off     {off:8.2f} s")
    print(f"  engine (runs' own time)    {engine:8.2f} s   {engine / off:6.1%} of wall")
    print(f"  everything else            {off - engine:8.2f} s   {(off - engine) / off:6.1%}")
    print(f"  wall time, --trace-dir on  {on:8.2f} s   on/off = {on / off:.2f}")


def record_run(requests: int) -> tuple[RunTrace, float]:
    config = AuditConfig(engine=EngineConfig(max_num_requests=64))
    scenario = parse_scenario(scenario_text("bench", requests, requests // 4), "bench")
    plan = plan_run(scenario, scenario.runs[0], base_settings(config, Path.cwd()))
    engine = create_adapter(plan.settings)
    started = time.perf_counter()
    trace = engine.run(plan, TraceRecorder())
    return trace, time.perf_counter() - started


def check_scaling(sizes: list[int]) -> None:
    print(f"\nrun checks on one run of N seeded + N/4 unseeded requests ({MAX_TOKENS} tokens each)")
    header = f"  {'N':>6} {'engine s':>9}"
    checks = run_checks()
    header += "".join(f" {spec.short:>9}" for spec in checks)
    print(header + "  seeds growth")
    print("  (CPU seconds per check; growth: distinct-seeds time ratio / N ratio, 1.00 = linear)")
    first: tuple[int, float] | None = None
    for n in sizes:
        trace, engine_seconds = record_run(n)
        ctx = CheckContext(
            # The distribution check reads the scenario (its `distribution:` block, none here).
            scenario=parse_scenario(scenario_text("bench", n, n // 4), "bench"),
            traces={"all": trace},
            contract=get_contract("ideal"),
        )
        row = f"  {n:>6} {engine_seconds:>9.2f}"
        seeds = 0.0
        for spec in checks:
            gc.collect()  # start each check from the same heap
            started = time.process_time()  # CPU seconds: steadier than wall on a shared machine
            statuses = [f.status for f in spec.func(ctx, trace)]
            seconds = time.process_time() - started
            assert "fail" not in statuses, (spec.id, statuses)
            row += f" {seconds:>9.3f}"
            if spec.id == "distinct-seeds":
                seeds = seconds
        if first is None:
            first = (n, seeds)
            growth = "1.00 (base)"
        else:
            growth = f"{(seeds / first[1]) / (n / first[0]):.2f}"
        print(row + f"  {growth}")


def memory_child(requests: int) -> None:
    """Run an audit of ``requests`` requests; print its peak RSS as JSON (fresh process)."""
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        names = []
        for k in range(requests // PER_SCENARIO):
            name = f"bench-{k}"
            text = scenario_text(name, PER_SCENARIO, 0, offset=k * PER_SCENARIO)
            (base / f"{name}.yaml").write_text(text)
            names.append(f"{name}.yaml")
        config = AuditConfig(engine=EngineConfig(max_num_requests=64), scenarios=names)
        started = time.perf_counter()
        result = run_audit(config, plan_audit(config, base), base, trace_dir=base / "traces")
        seconds = time.perf_counter() - started
    peak_kib = _peak_rss_kib()
    print(json.dumps({"peak_mib": peak_kib / 1024, "seconds": seconds, "verdict": result.verdict}))


def _peak_rss_kib() -> int:
    """This process's peak resident memory. Linux's ``VmHWM`` starts afresh at exec; the
    ``ru_maxrss`` of a child started from a large parent still holds the parent's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def memory(sizes: list[int]) -> None:
    print(
        f"\npeak memory (max RSS), scenarios of {PER_SCENARIO} requests of {MAX_TOKENS} "
        "tokens, traces to a folder"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    base: float | None = None
    for n in sizes:
        out = subprocess.run(
            [sys.executable, __file__, "--memory-child", str(n), "--tokens", str(MAX_TOKENS)],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout
        data = json.loads(out.strip().splitlines()[-1])
        peak = data["peak_mib"]
        base = base or peak
        print(
            f"  {n:>6} requests: {peak:8.1f} MiB in {data['seconds']:7.1f} s "
            f"({data['verdict']}); vs first size {peak / base:.2f}"
        )


def validation_errors(keys: int) -> None:
    """A scenario with ``keys`` unknown keys: YAML parsing against validating and writing the
    error lines (which walked the YAML tree once per error before the node index)."""
    from specseed.core.errors import ScenarioError
    from specseed.scenarios import loader
    from specseed.scenarios.schema import Scenario

    text = "name: x\ndescription: d\n" + "".join(f"bogus{i}: 1\n" for i in range(keys))
    text += "requests:\n  a: {prompt: [1], seed: 1}\nruns:\n  - name: r\n    requests: [a]\n"
    started = time.perf_counter()
    data, node = loader._parse_yaml(text, "bench.yaml")
    parsing = time.perf_counter() - started
    started = time.perf_counter()
    problems = 0
    try:
        loader._validate(Scenario, data, "bench.yaml", node)
    except ScenarioError as exc:
        problems = len(exc.problems)
    validating = time.perf_counter() - started
    print(f"\nvalidation of {keys} unknown keys ({problems} problems reported)")
    print(f"  YAML parsing (the loader's, twice)  {parsing:7.2f} s")
    print(f"  validation and error lines          {validating:7.2f} s")


def main() -> None:
    global MAX_TOKENS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # N + N/4 requests in one run: at most the 4,096 a run may hold (scenarios.schema).
    parser.add_argument("--sizes", default="400,800,1600,3200")
    parser.add_argument("--memory", default="1000,10000")
    parser.add_argument("--skip-default", action="store_true")
    parser.add_argument("--unknown-keys", type=int, default=38000)
    parser.add_argument("--tokens", type=int, default=MAX_TOKENS, help="max_tokens per request")
    parser.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    add_write_docs(parser)
    args = parser.parse_args()
    MAX_TOKENS = args.tokens
    if args.memory_child:
        memory_child(args.memory_child)
        return
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}, python {platform.python_version()}"
    )
    if not args.skip_default:
        default_audit()
    if args.unknown_keys:
        validation_errors(args.unknown_keys)
    if args.sizes:
        check_scaling([int(n) for n in args.sizes.split(",")])
    if args.memory:
        memory([int(n) for n in args.memory.split(",")])


if __name__ == "__main__":
    with docs_section(__file__):
        main()
