"""The ``specseed`` Typer application: wires the command groups together.

Commands hold no logic; they parse options, call library code, and turn typed errors into a
message and an exit code (see ``specseed.cli.error_boundary``). Importing this module must not import
torch, so that ``specseed --help`` and scenario validation stay fast.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from typing import Annotated, Any

import typer

from specseed.cli import bundle_reading, minimize, replay, rng, scenarios, search
from specseed.cli.audit import AUDIT_HELP, audit
from specseed.cli.checkpoint import make_checkpoint
from specseed.cli.doctor import doctor
from specseed.cli.error_boundary import stdout_lost
from specseed.cli.misc import checks, contracts, engines, formats, init, schema
from specseed.cli.serve import SERVE_HELP, serve
from specseed.cli.sweep import SWEEP_HELP, sweep
from specseed.core.version import __version__
from specseed.workflows.outputs import stdout_failed


def tolerant_streams() -> None:
    """stdout and stderr write what their encoding cannot hold as backslash escapes
    (``PYTHONIOENCODING=ascii``, a latin-1 terminal, a lone surrogate from a server) instead
    of stopping the command with ``UnicodeEncodeError``. A closed stream (None) is left
    alone: whoever writes to it handles that."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None:
            continue
        with contextlib.suppress(ValueError, OSError):  # closed, or cannot change
            reconfigure(errors="backslashreplace")


def _flags_show_no_placeholder() -> None:
    """An on/off flag takes no value, so its help row shows none. Typer writes ``<bool>``
    for every flag, ``--help`` included, unless each one sets a metavar; this does it once
    for all of them (an option with its own metavar keeps it)."""
    from typer.core import TyperOption

    # A private hook of typer's rich help: where a typer release lacks it, the placeholders
    # stay (cosmetic) and the CLI still starts.
    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "_specseed", False):
        return

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        if self.is_flag and self.metavar is None:
            return None
        return shown(self, ctx)

    display_type_rich._specseed = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_show_no_placeholder()


def _help_writes_as_specseed_does() -> None:
    """Typer's help goes out through ``SafeConsole``'s writing, as every other output: to a
    pipe or a file its lines carry no padding at their ends (Rich pads the help's panels out
    to the width). Typer builds its help console in one private function; where a typer
    release lacks it, the padding stays (cosmetic)."""
    from typer import rich_utils

    from specseed.core.secrets import SafeConsole

    built = getattr(rich_utils, "_get_rich_console", None)
    if built is None or getattr(built, "_specseed", False):
        return

    def console(stderr: bool = False) -> Any:
        made = built(stderr=stderr)
        made.__class__ = SafeConsole  # Typer's settings (theme, width), SafeConsole's output
        return made

    console._specseed = True  # type: ignore[attr-defined]
    rich_utils._get_rich_console = console


_help_writes_as_specseed_does()

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
    tolerant_streams()  # again: the app may run without the console script (a test runner)


app.command("audit", help=AUDIT_HELP)(audit)
app.command("check")(bundle_reading.check)
app.command("report")(bundle_reading.report)
app.command("diff")(bundle_reading.diff)
app.command("replay")(replay.replay)
app.command("minimize", help=minimize.MINIMIZE_HELP)(minimize.minimize)
app.command("search", help=search.SEARCH_HELP)(search.search)
app.command("sweep", help=SWEEP_HELP)(sweep)
app.command("init")(init)
app.command("serve", help=SERVE_HELP)(serve)
app.add_typer(scenarios.app, name="scenarios")
app.command("schema")(schema)
app.command("checks")(checks)
app.command("contracts")(contracts)
app.command("engines")(engines)
app.command("formats")(formats)
app.command("doctor")(doctor)
app.command("make-checkpoint")(make_checkpoint)
app.add_typer(rng.app, name="rng", help="Inspect curand Philox streams (seed, subsequence, offset)")


def reflow(text: str) -> str:
    """A help text's paragraphs as single lines, so the terminal wraps them at its width:
    the docstrings are broken at 96 columns for the source, which at 80 columns left a word
    or two alone on every other line. Indented lines (examples) and short lines that end a
    heading stay as written."""
    import inspect

    paragraphs = inspect.cleandoc(text).split("\n\n")
    out = []
    for paragraph in paragraphs:
        lines = paragraph.splitlines()
        if len(lines) > 1 and not any(line.startswith((" ", "\t", "-", "*")) for line in lines):
            paragraph = " ".join(line.strip() for line in lines)
        out.append(paragraph)
    return "\n\n".join(out)


def _reflow_help(group: typer.Typer) -> None:
    for info in group.registered_commands:
        text = info.help or (info.callback.__doc__ if info.callback is not None else None)
        if text:
            info.help = reflow(text)
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            _reflow_help(sub.typer_instance)


_reflow_help(app)


LEAK_CHECKING_PACKAGES = ("triton", "tensorrt_llm", "sglang", "vllm")
"""Packages whose compiled extensions may list, at the interpreter's exit, every object of
theirs still alive (nanobind's leak report: triton, which vLLM's CPU build installs, prints
about thirty lines of ``nanobind: leaked ...`` after the audit's last line when the heap is
frozen)."""


def main() -> None:
    """Entry point of the ``specseed`` console script."""
    tolerant_streams()
    try:
        try:
            app()
        except OSError as exc:  # a command outside the error boundary printed to a full stdout
            if not stdout_failed(exc):
                raise
            try:
                stdout_lost(exc)
            except typer.Exit as done:
                sys.exit(done.exit_code)
    finally:
        # The interpreter's last garbage collections would walk every object torch's import
        # made (about 0.35 s of a 2-core VM's exit, after the last line is printed); frozen,
        # they are still freed by their reference counts, and every exit handler still runs.
        # Not where an engine's package checks for leaks at exit: its objects held in cycles
        # would stay alive, and be listed.
        if not any(name in sys.modules for name in LEAK_CHECKING_PACKAGES):
            gc.freeze()
