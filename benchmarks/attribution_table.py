"""Root causes per injected defect: the table behind ``specseed audit --matrix``'s precision.

    PYTHONPATH=src python benchmarks/attribution_table.py [--contract ideal] [--scenario NAME ...]

For every defect id of the catalogue, audits the reference engine with ``defects: [id]`` on
the built-in library (model loaded once) and prints the root causes the report would print,
then the precision: how many defects yield exactly one root cause, the injected one. Also
prints each audit's wall time (the machine may be shared: read them as rough).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from specseed.scenarios.schema import AuditConfig, EngineConfig
from specseed.workflows.matrix import run_matrix


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contract", default="ideal")
    parser.add_argument("--scenario", action="append", default=None)
    args = parser.parse_args()
    config = AuditConfig(engine=EngineConfig(contract=args.contract))
    times: dict[str | None, float] = {}
    started = [time.perf_counter()]
    last: list[str | None] = [None]

    def on_defect(defect: str | None) -> None:
        now = time.perf_counter()
        if times or last[0] is not None:
            times[last[0]] = now - started[0]
        started[0], last[0] = now, defect

    matrix = run_matrix(config, Path.cwd(), scenario_filter=args.scenario, on_defect=on_defect)
    times[last[0]] = time.perf_counter() - started[0]
    print(f"| injected | root causes printed | exact | s |  (contract {matrix.contract})")
    print("|---|---|---|---:|")
    for row in matrix.rows:
        causes = "; ".join(row.causes) or "(none)"
        mark = "yes" if row.exact else ("stated" if row.defect in matrix.stated() else "NO")
        print(f"| {row.defect or '(none)'} | {causes} | {mark} | {times.get(row.defect, 0):.1f} |")
    print(
        f"precision: {matrix.precision:.0%}; imprecise: {', '.join(matrix.imprecise()) or 'none'}"
    )


if __name__ == "__main__":
    main()
