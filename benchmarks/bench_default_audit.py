"""The default audit (``specseed audit``, built-in library): wall time and time split, side by side.

    python benchmarks/bench_default_audit.py [--repeats 5] [--baseline main]
        [--kernels broadcast,blocked] [--jobs 2,auto]

A variant is a source tree and a kernel (``SPECSEED_LINEAR``, see
models/numerics.py): the worktree's ``src`` under each of ``--kernels``
and, with ``--baseline REF``, the same kernels on ``git archive REF src`` (so one run prints
the change against the code before it). Each measurement is a fresh process (imports and the
model build count, as they do for a user) and the variants are measured alternately, A B A B
..., so a change in the machine's load hits all alike. Prints per variant:

1. wall time of the audit process (median, min and max over ``--repeats``) and its peak
   memory (max RSS); the serial audits run through this script's ``--split-child``, which
   runs ``specseed audit --no-progress`` in-process with timers (their cost is a few
   thousand wrapper calls), so wall time, memory and split come from the same processes;
2. the time split of those audits (median over the repeats), each part exclusive of the
   others: imports of the CLI, torch and the engine's modules, the model build, the
   target's and the draft head's forward passes during the runs, the sampling and
   verification kernels (with RNG assignment and event recording), the rest of the step loop
   (scheduling, trace records and writing), each check, the rest of the checks' runner, and
   everything else (planning, reports, I/O);
3. the tiny target's forward alone on one torch thread (as the engine runs it): CPU seconds
   (``time.thread_time``, which a busy machine disturbs less than wall time) of a prefill of
   8 x 20 tokens and 6 decode steps of 8 x 4;
4. with ``--jobs N,auto``: ``specseed audit --jobs N`` (and ``--jobs auto``, what a plain
   ``specseed audit`` does) of the last kernel of each source tree (with ``--baseline``, the
   baseline's too, and their ratio), in the same alternating rounds, wall time only (the
   audit caps N at the CPUs it may use; run under ``taskset -c 0-3`` to give it 4). The
   variant's sources reach the workers through ``PYTHONPATH``, which their server inherits,
   and each variant runs as its own console script (written as pip writes it, from the
   variant's pyproject.toml): workers import the main script again, so what the script
   imports is part of the figure.

The serial variants run with ``--jobs 1``.

Nothing is asserted. The load average (``os.getloadavg``) is printed with each figure: on a
shared machine read the ratios, not the seconds. benchmarks/compare_bundle_streams.py checks
that two variants recorded the same tokens, logits fingerprints and RNG events.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import dataclasses
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from perf_page import add_write_docs, docs_section

ROOT = Path(__file__).resolve().parents[1]


REFERENCE_ADAPTER = "specseed.engine_adapters.reference.{adapter,engine}"
MODELS = "specseed.{models,engine_adapters.reference}"
"""Where the children find the reference engine and the models: this tree's layout first,
then the one a ``--baseline`` from before ``models/`` and ``adapter.py`` has."""


def _first_module(pattern: str) -> Any:
    """The first of ``pattern``'s spellings (``{a,b}`` alternatives) that imports."""
    import importlib
    import itertools
    import re

    parts = re.split(r"\{([^}]*)\}", pattern)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    for combo in itertools.product(*choices):
        try:
            return importlib.import_module("".join(combo))
        except ModuleNotFoundError:
            continue
    raise ModuleNotFoundError(f"none of {pattern} in this source tree")


@dataclasses.dataclass(frozen=True)
class Variant:
    label: str
    src: Path
    kernel: str
    jobs: str = "1"
    """Other than 1: ``--jobs N`` or ``auto``, timed as a whole (its workers' parts are not
    split)."""


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f} on {os.cpu_count()} CPUs"


class _Split:
    """Exclusive timers: a part's seconds exclude the timed parts it calls."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._stack: list[list[Any]] = []

    def active(self, label: str) -> bool:
        return any(frame[0] == label for frame in self._stack)

    @contextlib.contextmanager
    def part(self, label: str) -> Iterator[None]:
        frame = [label, time.perf_counter(), 0.0]
        self._stack.append(frame)
        try:
            yield
        finally:
            self._stack.pop()
            elapsed = time.perf_counter() - frame[1]
            self.seconds[label] = self.seconds.get(label, 0.0) + elapsed - frame[2]
            if self._stack:
                self._stack[-1][2] += elapsed

    def wrap(self, owner: Any, name: str, label: str, *, within: str | None = None) -> None:
        """Time ``owner.name`` as ``label`` (only while ``within`` is active, if given)."""
        original = getattr(owner, name, None)
        if original is None:  # not in this source tree (an older baseline)
            return

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if within is not None and not self.active(within):
                return original(*args, **kwargs)
            with self.part(label):
                return original(*args, **kwargs)

        setattr(owner, name, wrapper)


def split_child() -> None:
    """One in-process audit with timers around its parts; prints the split as JSON."""
    split = _Split()
    started = time.perf_counter()
    from specseed.cli.app import app

    split.seconds["imports: CLI"] = time.perf_counter() - started
    from specseed.checks import registry
    from specseed.run import execute

    with split.part("imports: torch, engine modules"):
        engine = _first_module(REFERENCE_ADAPTER)
        draft = _first_module(MODELS + ".draft")
        target = _first_module(MODELS + ".target")
    split.wrap(execute, "create_adapter", "imports: torch, engine modules")
    split.wrap(engine.ReferenceEngine, "__init__", "model build")
    split.wrap(target.LlamaTarget, "forward", "target forward", within="step loop")
    split.wrap(draft.Eagle3DraftHead, "forward", "draft forward", within="step loop")
    run_class = engine._EngineRun
    for name in ("_sample_call", "_kernel_verify"):
        split.wrap(run_class, name, "sampling, verification", within="step loop")
    split.wrap(execute, "run_guarded", "step loop")
    split.wrap(execute, "run_all_guarded", "step loop")  # a scenario's runs side by side
    split.wrap(execute, "evaluate", "checks: runner")

    def timed_check(label: str, func: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> list[Any]:
            with split.part(label):
                return list(func(*args))  # a check is a generator: time its whole run

        return run

    for check_id, spec in list(registry.CHECKS.items()):
        registry.CHECKS[check_id] = dataclasses.replace(
            spec, func=timed_check(f"check: {check_id}", spec.func)
        )
    with contextlib.suppress(SystemExit):  # exit 1 (a finding) is a normal outcome here
        app(["audit", "--no-progress", "--jobs", "1"], standalone_mode=False)
    total = time.perf_counter() - started
    split.seconds["planning, reports, I/O"] = total - sum(split.seconds.values())
    print("SPLIT " + json.dumps(split.seconds))
    print("RSS", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def forward_child() -> None:
    """CPU seconds of the tiny target's forward (prefill 8 x 20, 6 steps of 8 x 4)."""
    import random

    import torch

    TINY_MODEL = _first_module(MODELS + ".tiny").TINY_MODEL

    torch.set_num_threads(1)
    model = TINY_MODEL.build_target(0)
    rng = random.Random(0)
    spent = []
    for _ in range(6):
        caches = [model.new_cache() for _ in range(8)]
        started = time.thread_time()
        model.forward([(c, [rng.randrange(512) for _ in range(20)]) for c in caches])
        for _ in range(6):
            model.forward([(c, [rng.randrange(512) for _ in range(4)]) for c in caches])
        spent.append(time.thread_time() - started)
        for c in caches:
            c.release()
    print(f"FORWARD {statistics.median(spent[1:])}")


def _child(args: list[str], variant: Variant) -> tuple[float, str]:
    # The variant's sources first; the rest of PYTHONPATH (where a machine keeps packages it
    # could not install) after them.
    path = os.pathsep.join(p for p in (str(variant.src), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "SPECSEED_LINEAR": variant.kernel, "PYTHONPATH": path}
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    wall = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return wall, proc.stdout


def _tagged(out: str, tag: str) -> str:
    return next(line[len(tag) + 1 :] for line in out.splitlines() if line.startswith(tag + " "))


def alternate(
    variants: list[Variant], repeats: int, measure: Callable[[Variant], Any]
) -> dict[str, list[Any]]:
    results: dict[str, list[Any]] = {v.label: [] for v in variants}
    for _ in range(repeats):
        for variant in variants:
            results[variant.label].append(measure(variant))
    return results


def _ratio_header(labels: list[str]) -> str:
    return f"{labels[0]}/{labels[-1]}" if len(labels) >= 2 else ""


def _export(ref: str, into: Path) -> Path:
    """``git archive REF src pyproject.toml`` unpacked under ``into``; returns its ``src``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", ref, "src", "pyproject.toml"],
        capture_output=True,
        check=True,
    ).stdout
    tar_path = into / "src.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kernels", default="broadcast,blocked")
    parser.add_argument("--baseline", default="", help="a git ref to measure against, e.g. main")
    parser.add_argument(
        "--jobs", default="", help="e.g. 2,auto: --jobs N (and auto) of the last variant too"
    )
    parser.add_argument("--split-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--forward-child", action="store_true", help=argparse.SUPPRESS)
    add_write_docs(parser)
    args = parser.parse_args()
    if args.split_child:
        split_child()
        return
    if args.forward_child:
        forward_child()
        return
    with tempfile.TemporaryDirectory(prefix="bench-default-audit-") as tmp:
        variants = []
        kernels = args.kernels.split(",")
        if args.baseline:
            base_src = _export(args.baseline, Path(tmp))
            variants += [Variant(f"{args.baseline}:{k}", base_src, k) for k in kernels]
        variants += [Variant(f"tree:{k}" if args.baseline else k, ROOT / "src", k) for k in kernels]
        # The last kernel of each source tree (the baseline's too), so that a parallel audit
        # compares with the code before the change in the same rounds.
        lasts = [v for v in variants if v.kernel == kernels[-1]]
        for n in (j.strip() for j in args.jobs.split(",") if j.strip() not in ("", "1")):
            for last in lasts:
                variants.append(dataclasses.replace(last, label=f"{last.label} -j{n}", jobs=n))
        report(variants, args)


def _measure(variant: Variant) -> dict[str, Any]:
    """One fresh audit process: its wall time, and for a serial audit its split and RSS."""
    if variant.jobs != "1":
        script = str(_console_script(variant.src))
        audit = [script, "audit", "--no-progress", "--jobs", variant.jobs]
        return {"wall": _child(audit, variant)[0]}
    wall, out = _child([__file__, "--split-child"], variant)
    return {
        "wall": wall,
        "split": json.loads(_tagged(out, "SPLIT")),
        "rss": int(_tagged(out, "RSS")),
    }


_SCRIPTS: dict[Path, Path] = {}


def _console_script(src: Path) -> Path:
    """The ``specseed`` console script of the tree holding ``src``, as pip writes it from
    ``[project.scripts]`` (written once per tree, into a folder removed at exit)."""
    script = _SCRIPTS.get(src)
    if script is None:
        folder = Path(tempfile.mkdtemp(prefix="specseed-bench-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        script = _SCRIPTS[src] = folder / "specseed"
        text = (src.parent / "pyproject.toml").read_text()
        found = re.search(r'^specseed\s*=\s*"([\w.]+):(\w+)"', text, re.MULTILINE)
        if found is None:
            raise SystemExit(f"no specseed console script in {src.parent / 'pyproject.toml'}")
        module, function = found.groups()
        script.write_text(
            f"import re\nimport sys\nfrom {module} import {function}\n"
            "if __name__ == '__main__':\n"
            "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
            f"    sys.exit({function}())\n"
        )
    return script


def report(variants: list[Variant], args: argparse.Namespace) -> None:
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}")
    print(f"default audit, {args.repeats} alternating runs per variant ({_load()} at start)")
    runs = alternate(variants, args.repeats, _measure)
    serial = [v for v in variants if v.jobs == "1"]
    labels = [v.label for v in variants]
    width = max(11, *(len(label) + 1 for label in labels))
    print(f"{'variant':<{width}} {'median':>8} {'min':>7} {'max':>7} {'peak RSS':>10}  ({_load()})")
    for label in labels:
        w = [r["wall"] for r in runs[label]]
        rss = [r["rss"] for r in runs[label] if "rss" in r]
        memory = f"{statistics.median(rss) / 1024:6.0f} MiB" if rss else f"{'':>10}"
        print(
            f"{label:<{width}} {statistics.median(w):7.2f}s {min(w):6.2f}s {max(w):6.2f}s {memory}"
        )
    base = statistics.median(r["wall"] for r in runs[labels[0]])
    for label in labels[1:]:
        print(
            f"{labels[0]} / {label} = {base / statistics.median(r['wall'] for r in runs[label]):.2f}"
        )
    parallel: dict[str, list[str]] = {}
    for v in variants:
        if v.jobs != "1":
            parallel.setdefault(v.jobs, []).append(v.label)
    for pair in (p for p in parallel.values() if len(p) == 2):
        a, b = (statistics.median(r["wall"] for r in runs[label]) for label in pair)
        print(f"{pair[0]} / {pair[1]} = {a / b:.2f}")

    names = [v.label for v in serial]
    ratio = _ratio_header(names)
    print("\ntime split of one in-process audit (median s over the same runs)")
    parts = list(dict.fromkeys(p for n in names for r in runs[n] for p in r["split"]))
    # the ratio's heading names both variants: its column is as wide as that, plus a space
    ratio_width = max(width, len(ratio) + 1)
    print(f"{'part':<34}" + "".join(f"{k:>{width}}" for k in names) + f"{ratio:>{ratio_width}}")
    for part in [*parts, "total"]:
        medians = []
        for name in names:
            splits = [r["split"] for r in runs[name]]
            values = [sum(s.values()) if part == "total" else s.get(part, 0.0) for s in splits]
            medians.append(statistics.median(values))
        cells = "".join(f"{m:{width - 1}.2f}s" for m in medians)
        rate = (
            f"{medians[0] / medians[-1]:{ratio_width}.2f}" if ratio and medians[-1] > 0.005 else ""
        )
        print(f"{part:<34}" + cells + rate)

    forward = alternate(
        serial,
        max(3, args.repeats),
        lambda v: float(_tagged(_child([__file__, "--forward-child"], v)[1], "FORWARD")),
    )
    print(f"\ntarget forward, prefill 8x20 + 6 steps of 8x4 (median CPU ms; {_load()})")
    for name in names:
        print(f"  {name:<{width}} {statistics.median(forward[name]) * 1e3:7.1f} ms")
    if ratio:
        a, b = (statistics.median(forward[k]) for k in (names[0], names[-1]))
        print(f"  {ratio} = {a / b:.2f}")


if __name__ == "__main__":
    with docs_section(__file__):
        main()
