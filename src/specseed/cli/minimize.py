"""``specseed minimize``: its flags parsed; the work is ``workflows.minimize.Minimize``'s."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from specseed.cli.bundle_reading import engine_from_bundle_option
from specseed.cli.error_boundary import error_boundary
from specseed.cli.inputs import engine_log_option

MINIMIZE_HELP = """Shrink a failing scenario to a minimal reproduction.

Tries smaller scenarios (shorter max_tokens, fewer runs and requests, less
prior traffic and warmup, no arrivals) and keeps each one on which the same
finding still fails: the same check, naming the same suspect defect. Writes
the smallest.

[bold]Cost[/]: one audit of one scenario per candidate, at most --max-audits
(default 60), on one engine loaded once, plus one audit to confirm the
failure. Measured on the built-in scenarios with the reference engine (CPU):
5 to 20 audits, 0.4 to 15 seconds. On a real engine each audit costs what
the candidate's runs cost; the candidates shrink as it goes.

[bold]Examples[/]

  specseed minimize bug/     # stores bug/<scenario>/minimal.yaml
  specseed minimize model.yaml -s uptime -o uptime.min.yaml
"""


def minimize(
    target: Annotated[
        Path,
        typer.Argument(
            help="A bundle directory, or a model.yaml.",
            metavar="BUNDLE|MODEL_YAML",
            show_default=False,
        ),
    ],
    scenario: Annotated[
        str | None,
        typer.Option(
            "--scenario",
            "-s",
            help="The scenario to shrink (default: the first failing).",
            metavar="NAME",
        ),
    ] = None,
    check_id: Annotated[
        str | None,
        typer.Option(
            "--check",
            help="Keep this check failing (default: the clearest failing finding).",
            metavar="ID",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            # No word longer than the help column at 80 columns: Rich cuts such a word
            # with an ellipsis (it printed "BUNDLE/<scenario>/minimal…").
            help="Write the minimal scenario here (default: BUNDLE/NAME/minimal.yaml for "
            "scenario NAME, or NAME.min.yaml beside a model.yaml).",
        ),
    ] = None,
    max_audits: Annotated[
        int, typer.Option("--max-audits", min=1, help="Stop after this many audits.")
    ] = 60,
    engine_from_bundle: Annotated[
        bool, engine_from_bundle_option("; give your own model.yaml for your engine")
    ] = False,
    engine_log: Annotated[Path | None, engine_log_option(bundle=False)] = None,
) -> None:
    from specseed.workflows.minimize import Minimize

    with error_boundary(runs_engine=True):
        Minimize(
            target,
            scenario=scenario,
            check=check_id,
            output=output,
            max_audits=max_audits,
            engine_from_bundle=engine_from_bundle,
            terminal=True,
            engine_log=engine_log,
        ).run()
