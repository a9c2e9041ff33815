"""``specseed search`` (issue 37): how fast it searches, how soon it finds each planted defect,
how small it shrinks it, and how often a correct engine would be reported.

    python benchmarks/bench_search.py [--seconds 120] [--seeds 5] [--jobs 2]
        [--find-budget 180] [--shrink-budget 60] [--simulations 20000] [--write-docs]

Prints, all measured in this one run on the reference engine (CPU, built-in model):

1. throughput: a search of the correct engine for ``--seconds`` with ``--jobs`` workers:
   scenarios and runs judged per minute, the candidates and confirmed failures it met (a
   confirmed failure here would be a false alarm: the engine is correct);
2. for each defect planted for the search (``core.defects.SEARCH_ONLY_DEFECTS``), over
   ``--seeds`` search seeds (0, 1, ...), each search with ``--jobs`` workers and at most
   ``--find-budget`` seconds to find it: the seconds to the first confirmed failure and the
   scenarios judged before it (median, min, max), found in how many of the searches, the
   shrinking steps kept and the scenarios judged while shrinking, and the size it shrank
   to (requests, runs, prompt tokens, max_tokens; the largest over the seeds);
3. the search-wide false-alarm rate: measured (confirmed failures of the correct engine in
   every clean search above, with the statistical tests they ran), and simulated: the
   search's statistical procedure (at most M tests at alpha 1e-3, a candidate confirmed by
   r fresh reruns at the same alpha) under a correct engine, where each test and each rerun
   rejects independently with probability alpha; the share of searches that report
   anything, against the bound M * alpha^(1 + r), and without confirmation (1 - (1 -
   alpha)^M). The simulation runs at a larger alpha (``--sim-alpha``, default 0.02) so that
   events are seen at all; the bound is checked at that alpha.

Nothing is asserted. The load average is printed with each figure: on a shared machine the
seconds are noisy (read the scenario counts, which do not depend on the machine's speed).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf_page import add_write_docs, docs_section

from specseed.core.defects import SEARCH_ONLY_DEFECT_IDS
from specseed.plan.resolve import resolve_audit
from specseed.search.runner import size_text
from specseed.search.statistics import alarm_budget
from specseed.workflows.outputs import AuditOutputs
from specseed.workflows.search import Search, SearchOutcome


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def search(
    defects: list[str], seconds: float, seed: int, jobs: int, shrink: float
) -> SearchOutcome:
    resolved = resolve_audit({"engine": {"options": {"defects": defects}}}, scenarios=False)
    outputs = AuditOutputs(jobs=jobs)
    return Search(resolved, outputs, budget=seconds, seed=seed, shrink_budget=shrink).run()


def spread(values: list[float], fmt: str = "%.0f") -> str:
    if not values:
        return "-"
    middle = fmt % statistics.median(values)
    return f"{middle} ({fmt % min(values)} to {fmt % max(values)})"


def throughput(args: argparse.Namespace, clean: list[SearchOutcome]) -> None:
    started = time.time()
    outcome = search([], args.seconds, 0, args.jobs, args.shrink_budget)
    clean.append(outcome)
    result = outcome.result
    minutes = result.seconds / 60
    print(
        f"1. throughput: a search of the correct engine, {args.seconds:.0f} s, --jobs {args.jobs}"
    )
    print(
        f"   {result.scenarios_run} scenarios, {result.runs_served} runs in "
        f"{time.time() - started:.0f} s: {result.scenarios_run / minutes:.0f} scenarios/min, "
        f"{result.runs_served / minutes:.0f} runs/min; statistical tests "
        f"{result.statistical_tests}; candidates {len(result.candidates)}, confirmed "
        f"{len(result.failures)}; exit {outcome.exit_code}; {load()}"
    )


def planted(args: argparse.Namespace) -> None:
    print(
        f"2. each planted defect, {args.seeds} search seeds, --jobs {args.jobs}, at most "
        f"{args.find_budget:.0f} s to find it, {args.shrink_budget:.0f} s to shrink it"
    )
    for defect in SEARCH_ONLY_DEFECT_IDS:
        found, cases, steps, shrunk, sizes = [], [], [], [], []
        for seed in range(args.seeds):
            outcome = search([defect], args.find_budget, seed, args.jobs, args.shrink_budget)
            for failure in outcome.result.failures[:1]:
                it = failure.found
                found.append(it.found_after)
                cases.append(float(it.cases_before))
                steps.append(float(it.shrink_steps))
                shrunk.append(float(it.shrink_cases))
                sizes.append(
                    (len(it.scenario["requests"]), len(it.scenario["runs"]), size_text(it.scenario))
                )
        largest = max(sizes, default=None)
        requests = [float(size[0]) for size in sizes]
        small = sum(1 for size in sizes if size[0] <= 3)
        print(f"   {defect}: found in {len(found)} of {args.seeds}; {load()}")
        print(f"     seconds to find: {spread(found, '%.1f')}; scenarios before: {spread(cases)}")
        print(f"     shrink steps: {spread(steps)}; scenarios while shrinking: {spread(shrunk)}")
        print(
            f"     final requests: {spread(requests)}; <= 3 requests in {small} of {len(sizes)}; "
            f"largest: {largest[2] if largest else '-'}"
        )


def false_alarms(args: argparse.Namespace, clean: list[SearchOutcome]) -> None:
    tests = sum(o.result.statistical_tests for o in clean)
    scenarios = sum(o.result.scenarios_run for o in clean)
    reported = sum(bool(o.result.failures) for o in clean)
    candidates = sum(len(o.result.candidates) for o in clean)
    print("3. false alarms")
    print(
        f"   measured: {len(clean)} searches of the correct engine, {scenarios} scenarios, "
        f"{tests} statistical tests: {candidates} candidates, {reported} reported"
    )
    budget = alarm_budget(args.seconds, args.jobs)
    print(
        f"   the search's budget for {args.seconds:.0f} s on {args.jobs} workers: {budget.text()}"
    )
    rng = random.Random(37)
    alpha = args.sim_alpha
    sim = alarm_budget(args.seconds, args.jobs, alpha=alpha, target=0.5)
    reported = unconfirmed = 0
    for _ in range(args.simulations):
        alarm = False
        for _ in range(sim.max_tests):
            if rng.random() < alpha:
                alarm = True
                if all(rng.random() < alpha for _ in range(sim.confirmations)):
                    reported += 1
                    break
        unconfirmed += alarm
    print(
        f"   simulated at alpha {alpha:g}, M = {sim.max_tests}, r = {sim.confirmations}, "
        f"{args.simulations} searches: reported {reported / args.simulations:.4f} (bound "
        f"{sim.bound:.4f}); without confirmation {unconfirmed / args.simulations:.4f} "
        f"(1 - (1 - alpha)^M = {1 - (1 - alpha) ** sim.max_tests:.4f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--find-budget", type=float, default=180.0)
    parser.add_argument("--shrink-budget", type=float, default=60.0)
    parser.add_argument("--simulations", type=int, default=20000)
    parser.add_argument("--sim-alpha", type=float, default=0.02)
    add_write_docs(parser)
    args = parser.parse_args()
    clean: list[SearchOutcome] = []
    throughput(args, clean)
    planted(args)
    false_alarms(args, clean)


if __name__ == "__main__":
    with docs_section(__file__):
        main()
