"""``specseed search``: its flags parsed; the work is ``workflows.search.Search``'s."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Annotated

import typer

from specseed.cli.error_boundary import error_boundary
from specseed.cli.inputs import ENGINE_LOG, FLAG, check_model_yaml_argument

SEARCH_HELP = """Search for traffic that breaks an invariant, and shrink it to a bug report.

Draws scenarios nobody wrote (Hypothesis): batches of seeded, unseeded, greedy and sampled
requests, seeds at the edges and pairs that differ only in high bits, prompts from one token
to the context length, slots freed and reused, warmup above max_num_requests, draft lengths,
the sampling knobs (min_p, logit_bias, penalties, stop, logprobs, n) two at a time. Each
comes with the runs that test it: the same traffic twice, a request alone, rows permuted,
after prior traffic, with the overlap scheduler, at K = 0. A failure is confirmed by fresh
runs before it counts; the header states the search's family-wise false-alarm rate. The
first confirmed failure is shrunk (fewest requests, shortest prompts, smallest values) and
reported as audit --bundle reports it.

With no MODEL_YAML, searches the embedded reference engine. Exit codes: 0 no failure within
the budget, 1 a confirmed failure (labelled flaky when the minimal scenario passes as it is
audited again for the report), 2 bad input, 3 the engine could not run, 4 no scenario judged,
5 an output could not be written, 130/143 interrupted.

[bold]Examples[/]

  specseed search --budget 5m
  specseed search model.yaml --budget 10m --bundle bug/ --json search.json
  specseed report bug/ > issue.md
  specseed search model.yaml --seed 7 --database ci-examples/
  specseed search --seed 7 -j 1 --max-scenarios 200 --max-shrink-scenarios 50
"""


def search(
    model_yaml: Annotated[
        Path | None,
        typer.Argument(
            help="model.yaml naming the engine (its scenarios are not run; default: the "
            "reference engine).",
            show_default=False,
            metavar="MODEL_YAML",
        ),
    ] = None,
    budget: Annotated[
        str,
        typer.Option(
            "--budget",
            "-b",
            help="How long to draw new cases: 90s, 5m, 1h (shrinking a failure found in time "
            "takes up to --shrink-budget more).",
            metavar="DURATION",
        ),
    ] = "5m",
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            help="The search's random seed: the same seed draws the same cases in the same "
            "order (default: a random one, printed).",
            metavar="N",
            min=0,
        ),
    ] = None,
    bundle_dir: Annotated[
        Path | None,
        typer.Option(
            "--bundle",
            help="Write the failure's bundle to DIR (as audit --bundle: read it with specseed "
            "report); the example database lives in DIR/.hypothesis.",
            metavar="DIR",
        ),
    ] = None,
    json_path: Annotated[
        Path | None,
        typer.Option(
            "--json",
            help="Write the search's JSON ('-' for stdout): scenarios_run, failures with "
            "their minimal scenario and root causes, coverage.",
            metavar="PATH",
        ),
    ] = None,
    database: Annotated[
        str | None,
        typer.Option(
            "--database",
            help="The example database: a folder (shared by CI machines) or "
            "redis://host:port/db (default: DIR/.hypothesis with --bundle, else none).",
            metavar="DIR|URL",
        ),
    ] = None,
    jobs: Annotated[
        str,
        typer.Option(
            "--jobs",
            "-j",
            help="Search in N worker processes, each with its own engine. auto: one per CPU "
            "for the reference engine's built-in model on the CPU, else 1.",
            metavar="N|auto",
        ),
    ] = "auto",
    shrink_budget: Annotated[
        str,
        typer.Option(
            "--shrink-budget",
            help="Most time spent shrinking a confirmed failure.",
            metavar="DURATION",
        ),
    ] = "2m",
    max_scenarios: Annotated[
        int | None,
        typer.Option(
            "--max-scenarios",
            help="Judge at most N drawn scenarios (with --jobs, N per worker's share): with "
            "--seed and --max-shrink-scenarios, the same search on any machine, however fast.",
            metavar="N",
            min=1,
        ),
    ] = None,
    max_shrink_scenarios: Annotated[
        int | None,
        typer.Option(
            "--max-shrink-scenarios",
            help="Judge at most N scenarios while shrinking a confirmed failure.",
            metavar="N",
            min=1,
        ),
    ] = None,
    kinds: Annotated[
        str,
        typer.Option(
            "--kinds",
            help="The request kinds drawn, comma-separated: seeded (sampled, with a seed), "
            "greedy, unseeded (sampled, no seed). greedy alone searches past a known bug "
            "of an engine's sampled path (and draws no statistical case).",
            metavar="KIND[,KIND]",
        ),
    ] = "seeded,greedy,unseeded",
    engine_log: Annotated[Path | None, ENGINE_LOG] = None,
    no_progress: Annotated[
        bool,
        typer.Option("--no-progress", metavar=FLAG, help="Do not show progress."),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            metavar=FLAG,
            help="Replace an earlier bundle in the --bundle folder (its files only; the "
            "example database stays).",
        ),
    ] = False,
) -> None:
    from specseed.cli.interrupts import InterruptGuard
    from specseed.plan.resolve import resolve_audit
    from specseed.run.parallel import parse_jobs
    from specseed.workflows.outputs import AuditOutputs
    from specseed.workflows.search import Search, parse_duration, parse_kinds

    with error_boundary(runs_engine=True):
        check_model_yaml_argument(model_yaml)
        chosen_kinds = parse_kinds(kinds)
        seconds = parse_duration(budget)
        shrink_seconds = parse_duration(shrink_budget)
        chosen = seed if seed is not None else random.SystemRandom().randrange(1 << 31)
        argv = list(sys.argv[1:]) or ["search"]
        if seed is None:  # the reproduce string names the seed that was drawn
            argv += ["--seed", str(chosen)]
        outputs = AuditOutputs(
            bundle=bundle_dir,
            engine_log=engine_log,
            terminal=True,
            progress=not no_progress,
            jobs=parse_jobs(jobs),
            force=force,
            argv=tuple(argv),
        )
        resolved = resolve_audit(model_yaml, scenarios=False)
        code = (
            Search(
                resolved,
                outputs,
                budget=seconds,
                seed=chosen,
                json=json_path,
                database=database,
                shrink_budget=shrink_seconds,
                kinds=chosen_kinds,
                max_scenarios=max_scenarios,
                shrink_scenarios=max_shrink_scenarios,
            )
            .run(interrupts=InterruptGuard)
            .exit_code
        )
    raise typer.Exit(code)
