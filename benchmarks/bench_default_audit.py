"""The default audit (``specseed audit``, built-in library), its time split, old kernel vs new.

    python benchmarks/bench_default_audit.py [--repeats 5] [--kernels broadcast,blocked]
        [--jobs 1,2]

Each measurement is a fresh ``python -m specseed audit --no-progress`` process (so imports and
the model build count, as they do for a user), and the kernels (``SPECSEED_LINEAR``, see
engine_adapters/reference/numerics.py) are measured alternately, A B A B ..., so a change in
the machine's load hits both alike. Prints per kernel:

1. wall time of the whole command (median, min and max over ``--repeats``) and peak memory
   (max RSS of the process, median) -- the figures README quotes ("27 runs in N s", "about
   N MiB per worker");
2. the time split of one in-process audit (median over the repeats): imports of the CLI,
   engine build, the engine's forward passes (target and draft head), the rest of the
   engine's runs (sampling, verification, bookkeeping), the checks, and everything else
   (planning, reports and I/O);
3. the tiny target's forward alone, in this process on one torch thread (as the engine runs
   it): CPU seconds (``time.thread_time``, which a busy machine disturbs less than wall time)
   of a prefill of 8 x 20 tokens and 6 decode steps of 8 x 4, kernels alternated;
4. with ``--jobs``: wall time of ``--jobs N`` against serial, alternated the same way (the
   audit caps N at the CPUs it may use; README says why).

Nothing is asserted. The load average (``os.getloadavg``) is printed with each figure: on a
shared machine read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f} on {os.cpu_count()} CPUs"


def _timed(owner: Any, name: str, bucket: dict[str, float], key: str) -> None:
    """Wrap ``owner.name`` so its seconds add to ``bucket[key]`` (outermost call only)."""
    original = getattr(owner, name)
    depth = [0]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if depth[0]:
            return original(*args, **kwargs)
        depth[0] += 1
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            bucket[key] = bucket.get(key, 0.0) + time.perf_counter() - started
            depth[0] -= 1

    setattr(owner, name, wrapper)


def split_child() -> None:
    """One in-process audit with timers around its parts; prints the split as JSON."""
    started = time.perf_counter()
    from specseed.cli.app import app

    imports = time.perf_counter() - started
    from specseed.engine_adapters.reference import draft, target
    from specseed.run import execute

    bucket: dict[str, float] = {}
    _timed(execute, "create_adapter", bucket, "engine build")
    _timed(target.LlamaTarget, "forward", bucket, "forward")
    _timed(draft.Eagle3DraftHead, "forward", bucket, "forward")
    _timed(execute, "run_guarded", bucket, "runs")
    _timed(execute, "evaluate", bucket, "checks")
    audit_started = time.perf_counter()
    with contextlib.suppress(SystemExit):  # exit 1 (a finding) is a normal outcome here
        app(["audit", "--no-progress"], standalone_mode=False)
    audit = time.perf_counter() - audit_started
    split = {
        "imports": imports,
        "engine build": bucket.get("engine build", 0.0),
        "engine forward": bucket.get("forward", 0.0),
        "sampling and the rest of the runs": bucket.get("runs", 0.0) - bucket.get("forward", 0.0),
        "checks": bucket.get("checks", 0.0),
    }
    split["planning, reports, I/O"] = audit - sum(v for k, v in split.items() if k != "imports")
    print("SPLIT " + json.dumps(split))


def _child(args: list[str], kernel: str) -> tuple[float, str]:
    env = {**os.environ, "SPECSEED_LINEAR": kernel, "PYTHONPATH": str(ROOT / "src")}
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    wall = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return wall, proc.stdout


def _rss_child(kernel: str) -> int:
    """Peak RSS (KiB) of one audit process, as the process itself reads it at its end."""
    code = (
        "import resource, runpy, sys; sys.argv = ['specseed', 'audit', '--no-progress'];\n"
        "try:\n    runpy.run_module('specseed', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    _, out = _child(["-c", code], kernel)
    return int(next(line for line in out.splitlines() if line.startswith("RSS")).split()[1])


def alternate(
    kernels: list[str], repeats: int, measure: Callable[[str], Any]
) -> dict[str, list[Any]]:
    results: dict[str, list[Any]] = {k: [] for k in kernels}
    for _ in range(repeats):
        for kernel in kernels:
            results[kernel].append(measure(kernel))
    return results


def forward_ab(kernels: list[str], repeats: int) -> None:
    import random

    import torch

    from specseed.engine_adapters.reference import numerics
    from specseed.engine_adapters.reference.tiny import TINY_MODEL

    torch.set_num_threads(1)
    model = TINY_MODEL.build_target(0)
    rng = random.Random(0)

    def once() -> float:
        caches = [model.new_cache() for _ in range(8)]
        started = time.thread_time()
        model.forward([(c, [rng.randrange(512) for _ in range(20)]) for c in caches])
        for _ in range(6):
            model.forward([(c, [rng.randrange(512) for _ in range(4)]) for c in caches])
        spent = time.thread_time() - started
        for c in caches:
            c.release()
        return spent

    def measure(kernel: str) -> float:
        numerics.LINEAR_KERNEL = kernel
        return once()

    cpu = alternate(kernels, repeats, measure)
    print(f"\ntarget forward, prefill 8x20 + 6 steps of 8x4 (median CPU ms; {_load()})")
    for kernel in kernels:
        print(f"  {kernel:<10} {statistics.median(cpu[kernel]) * 1e3:7.1f} ms")
    if len(kernels) == 2:
        a, b = (statistics.median(cpu[k]) for k in kernels)
        print(f"  {kernels[0]}/{kernels[1]} = {a / b:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kernels", default="broadcast,blocked")
    parser.add_argument("--jobs", default="", help="e.g. 1,2: --jobs N against serial")
    parser.add_argument("--split-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.split_child:
        split_child()
        return
    kernels = args.kernels.split(",")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}")
    print(f"default audit, {args.repeats} alternating runs per kernel ({_load()} at start)")

    walls = alternate(kernels, args.repeats, lambda k: _child(["-m", "specseed", "audit",
                                                               "--no-progress"], k)[0])  # fmt: skip
    rss = alternate(kernels, 1, _rss_child)
    print(f"{'kernel':<10} {'median':>8} {'min':>7} {'max':>7} {'peak RSS':>10}")
    for kernel in kernels:
        w = walls[kernel]
        print(
            f"{kernel:<10} {statistics.median(w):7.2f}s {min(w):6.2f}s {max(w):6.2f}s "
            f"{rss[kernel][0] / 1024:6.0f} MiB"
        )
    if len(kernels) == 2:
        a, b = (statistics.median(walls[k]) for k in kernels)
        print(f"{kernels[0]}/{kernels[1]} = {a / b:.2f} ({_load()})")

    splits = alternate(
        kernels,
        args.repeats,
        lambda k: json.loads(
            next(
                line[6:]
                for line in _child([__file__, "--split-child"], k)[1].splitlines()
                if line.startswith("SPLIT ")
            )
        ),
    )
    print(f"\ntime split of one in-process audit (median s; {_load()})")
    parts = list(splits[kernels[0]][0])
    print(f"{'part':<34}" + "".join(f"{k:>11}" for k in kernels))
    for part in [*parts, "total"]:
        cells = []
        for kernel in kernels:
            values = [sum(s.values()) if part == "total" else s[part] for s in splits[kernel]]
            cells.append(f"{statistics.median(values):10.2f}s")
        print(f"{part:<34}" + "".join(cells))

    forward_ab(kernels, max(5, args.repeats))

    if args.jobs:
        counts = [int(n) for n in args.jobs.split(",")]
        kernel = kernels[-1]
        times: dict[int, list[float]] = {n: [] for n in counts}
        for _ in range(args.repeats):
            for n in counts:
                command = ["-m", "specseed", "audit", "--no-progress", "--jobs", str(n)]
                times[n].append(_child(command, kernel)[0])
        print(f"\n--jobs (kernel {kernel}; {_load()})")
        base = statistics.median(times[counts[0]])
        for n in counts:
            m = statistics.median(times[n])
            print(f"  --jobs {n:<3} {m:7.2f}s   speed-up {base / m:4.2f}x")


if __name__ == "__main__":
    main()
