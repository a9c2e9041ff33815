"""What the HTML report costs a bundle, and that the audit without one pays nothing.

    python benchmarks/bench_html_report.py [--repeats 5] [--write-docs]

Records three bundles of the reference engine (``specseed audit --bundle``, one process
each, ``--jobs 1``): the default audit (every built-in default scenario; it passes, so its
page draws no figure), and two failing ones, as in tests/reporting/test_html_report.py
(``row0-seed`` with ``draw-overlap``: a divergence and RNG findings; ``biased-acceptance``
in a small distribution scenario with a K = 0 baseline). Prints, measured side by side in
one run:

1. per bundle: the audit's wall time (the process, as a user runs it), the time to render
   its ``report.html`` as the bundle writer does (the result read back, the trace files read
   for the draw-range figures, figures drawn; median and min over ``--repeats``, matplotlib
   already imported), that time as a share of the audit, the page's size and its figures;
2. the one-off import of the figures' module (matplotlib included) in a fresh process, the
   cost a failing audit's bundle pays once, beside a fresh process's import of the page's
   own module (no matplotlib);
3. whether ``specseed audit`` (no bundle, no HTML report) imports matplotlib: it must not.

Nothing is asserted. The load average is printed: on a shared machine read the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from perf_page import add_write_docs, docs_section

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

COMBO = """\
name: mine
description: A seeded probe must not change with its neighbour's seed.
requests:
  probe: {prompt: [17, 29, 111, 5], seed: 2024, max_tokens: 8}
  other: {prompt: [8, 1, 64], seed: 5, max_tokens: 8}
runs:
  - {name: alone, requests: [probe]}
  - {name: neighbour, requests: [other, probe]}
expect:
  - {check: batch-invariance, runs: [alone, neighbour], requests: [probe]}
"""

DIST = """\
name: dist
description: Seeded copies of one sampled request, with speculation and without.
defaults: {max_tokens: 5}
requests:
  hot: {prompt: [31, 7, 88, 14], seed: 1, temperature: 1.0}
runs:
  - name: speculative
    requests: [hot]
    engine: {max_num_requests: 128, verification: rejection, max_draft_len: 3}
  - name: baseline
    requests: [hot]
    baseline_of: speculative
    engine: {max_num_requests: 128}
expect:
  - {check: losslessness, runs: [speculative, baseline]}
distribution: {samples: 80}
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "80"}


def record(folder: Path, name: str, scenario: str | None, defects: list[str]) -> tuple[Path, float]:
    """A bundle of one audit process, and the process's wall time."""
    root = folder / name
    root.mkdir()
    args = []
    if scenario is not None:
        (root / "scenario.yaml").write_text(scenario)
        (root / "model.yaml").write_text(
            f"engine:\n  options: {{defects: {json.dumps(defects)}}}\nscenarios: [scenario.yaml]\n"
        )
        args.append(str(root / "model.yaml"))
    bundle = root / "bundle"
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "specseed",
            "audit",
            *args,
            "--bundle",
            str(bundle),
            "--jobs",
            "1",
            "--no-progress",
            "--summary",
        ],
        env=_env(),
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"the {name} audit failed ({done.returncode}):\n{done.stderr}")
    return bundle, seconds


def render_times(bundle: Path, repeats: int) -> tuple[list[float], int, int]:
    """Seconds to render the bundle's page as the bundle writer does, per repeat (after one
    warm-up that imports matplotlib where figures are drawn), the page's bytes and figures."""
    from specseed.bundle.format import read_bundle, read_run_trace
    from specseed.reporting.html import render_html

    loaded = read_bundle(bundle)
    # As the audit hands it over: the runs without their steps (the writer reads the files).
    result = loaded.as_result()
    scenarios = tuple(
        replace(s, traces={run: replace(t, steps=()) for run, t in s.traces.items()})
        for s in result.scenarios
    )
    result = replace(result, scenarios=scenarios)
    code = loaded.manifest.exit_code or 0

    def once() -> str:
        return render_html(result, code, steps=lambda s, r: read_run_trace(bundle, s, r))

    page = once()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        once()
        times.append(time.perf_counter() - started)
    return times, len(page.encode()), page.count("<svg")


def import_seconds(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    done = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr)
    return float(done.stdout)


def audit_imports_matplotlib(folder: Path) -> bool:
    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom specseed.cli.app import app\n"
        "CliRunner().invoke(app, ['audit', '-s', 'distinct-seeds', '--no-progress', '--summary',"
        f" '--json', {str(folder / 'r.json')!r}])\n"
        "print('matplotlib' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True)
    return done.stdout.strip().endswith("True")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    add_write_docs(parser)
    args = parser.parse_args()
    sys.path.insert(0, str(SRC))
    load = os.getloadavg()[0]
    print(f"load average at start {load:.1f}; {args.repeats} renders per bundle (median, min)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cases = [
            ("default audit (passes)", None, []),
            ("row0-seed + draw-overlap", COMBO, ["row0-seed", "draw-overlap"]),
            ("biased-acceptance", DIST, ["biased-acceptance"]),
        ]
        print(
            f"{'bundle':26} {'audit s':>8} {'render s':>15} {'share':>7} {'page KB':>8} {'figures':>8}"
        )
        for n, (name, scenario, defects) in enumerate(cases):
            bundle, audit = record(folder, f"case{n}", scenario, defects)
            times, size, figures = render_times(bundle, args.repeats)
            median = statistics.median(times)
            print(
                f"{name:26} {audit:8.2f} {median:8.3f} ({min(times):.3f}) "
                f"{median / audit:6.1%} {size / 1024:8.0f} {figures:8d}"
            )
        own = statistics.median(import_seconds("specseed.reporting.html") for _ in range(3))
        plots = statistics.median(import_seconds("specseed.reporting.html_plots") for _ in range(3))
        print(
            f"fresh-process import: the page's module {own:.2f} s, with the figures' module "
            f"(matplotlib) {plots:.2f} s: {plots - own:.2f} s once per failing audit's bundle"
        )
        imported = audit_imports_matplotlib(folder)
        print(
            f"`specseed audit` without --bundle or --report html imports matplotlib: {'yes' if imported else 'no'}"
        )
    print(f"load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    with docs_section(__file__):
        main()
