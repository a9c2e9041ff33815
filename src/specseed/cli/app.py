"""The ``specseed`` Typer application: wires the command groups together.

Commands hold no logic; they parse options, call library code, and turn typed errors into a
message and an exit code (see ``specseed.cli.errors``). Importing this module must not import
torch, so that ``specseed --help`` and scenario validation stay fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

from specseed import __version__
from specseed.cli import bundle, rng, scenarios
from specseed.cli.audit import AUDIT_HELP, audit
from specseed.cli.checkpoint import make_checkpoint
from specseed.cli.doctor import doctor
from specseed.cli.misc import checks, contracts, engines, init, schema
from specseed.cli.serve import SERVE_HELP, serve

app = typer.Typer(
    name="specseed",
    help="Reproducibility auditor for speculative decoding in LLM inference engines.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"specseed {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version_callback,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """Reproducibility auditor for speculative decoding in LLM inference engines."""


app.command("audit", help=AUDIT_HELP)(audit)
app.command("check")(bundle.check)
app.command("report")(bundle.report)
app.command("diff")(bundle.diff)
app.command("replay")(bundle.replay)
app.command("minimize", help=bundle.MINIMIZE_HELP)(bundle.minimize)
app.command("init")(init)
app.command("serve", help=SERVE_HELP)(serve)
app.add_typer(scenarios.app, name="scenarios")
app.command("schema")(schema)
app.command("checks")(checks)
app.command("contracts")(contracts)
app.command("engines")(engines)
app.command("doctor")(doctor)
app.command("make-checkpoint")(make_checkpoint)
app.add_typer(rng.app, name="rng", help="Inspect curand Philox streams (seed, subsequence, offset)")


def main() -> None:
    """Entry point of the ``specseed`` console script."""
    app()
