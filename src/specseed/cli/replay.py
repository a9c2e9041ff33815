"""``specseed replay``: its flags parsed; the work is ``workflows.replay.Replay``'s."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from specseed.cli.bundle_reading import BUNDLE_ARG, engine_from_bundle_option
from specseed.cli.error_boundary import error_boundary
from specseed.cli.inputs import ENGINE_LOG


def replay(
    bundle: Annotated[Path, BUNDLE_ARG],
    model: Annotated[
        Path | None,
        typer.Option(
            "--model",
            help="Use this model.yaml's engine (its scenarios are ignored); default: the bundle's.",
            metavar="MODEL_YAML",
        ),
    ] = None,
    bundle_out: Annotated[
        Path | None,
        typer.Option("--bundle", help="Write the replay as a bundle too.", metavar="DIR"),
    ] = None,
    show_all: Annotated[bool, typer.Option("--all", help="List equal requests too.")] = False,
    engine_from_bundle: Annotated[
        bool, engine_from_bundle_option("; give --model for your own")
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace an earlier bundle in --bundle DIR (says which)."),
    ] = False,
    engine_log: Annotated[Path | None, ENGINE_LOG] = None,
) -> None:
    """Run a bundle's scenarios on this engine; diff against the recording.

    A = the recording, B = the replay.

    Exit codes: 0 the replay's audit passes and the replay reproduces the
    recording, 1 the replay's audit fails or the replay differs from the
    recording (the last line says which), 2 bad input, 3 the engine could
    not run, 130/143/129 interrupted.
    """
    from specseed.cli.interrupts import InterruptGuard
    from specseed.workflows.outputs import AuditOutputs
    from specseed.workflows.replay import Replay

    with error_boundary(runs_engine=True):
        outputs = AuditOutputs(
            bundle=bundle_out,
            engine_log=engine_log,
            terminal=True,
            force=force,
            argv=tuple(sys.argv[1:]) or ("replay",),
        )
        workflow = Replay(
            bundle, outputs, model=model, engine_from_bundle=engine_from_bundle, show_all=show_all
        )
        exit_code = workflow.run(interrupts=InterruptGuard).exit_code
    raise typer.Exit(exit_code)
