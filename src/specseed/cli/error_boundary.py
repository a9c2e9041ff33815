"""The one error boundary: typed library errors become a message, a hint and an exit code.

Exit codes: 0 every invariant holds, 1 a violation, 2 bad input, 3 the engine could not run,
4 nothing was checked (every finding is skip).
5 the audit ran but an output could not be written (130/143/129 for signals: cli/interrupts.py).
The numbers live in ``specseed.workflows.exit_codes`` so that library callers share them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer
from rich.text import Text

from specseed.core.errors import EngineError, InputError, OutputError, ScenarioError, SpecseedError
from specseed.core.secrets import SafeConsole
from specseed.reporting.layout import print_message
from specseed.workflows.exit_codes import (
    EXIT_BAD_INPUT,
    EXIT_ENGINE,
    EXIT_NOTHING_CHECKED,
    EXIT_OK,
    EXIT_OUTPUT,
    EXIT_VIOLATION,
)
from specseed.workflows.outputs import silence_stdout, stdout_failed

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_ENGINE",
    "EXIT_NOTHING_CHECKED",
    "EXIT_OK",
    "EXIT_OUTPUT",
    "EXIT_VIOLATION",
    "error_boundary",
    "stderr",
]

stderr = SafeConsole(stderr=True)


def _print_error(exc: SpecseedError) -> None:
    # On a terminal, broken at spaces to its width, continuation lines indented under their
    # item (a problem's file:line or a path longer than a line stays whole); to a pipe or a
    # file, one line per item.
    print_message(stderr, Text.assemble(("Error:", "bold red"), f" {exc.message}"), indent=2)
    if isinstance(exc, ScenarioError):
        for problem in exc.problems:
            print_message(stderr, f"  • {problem}", indent=4)
    if exc.hint:
        first, *more = exc.hint.split("\n")
        print_message(stderr, f"hint: {first}", indent=2, style="dim")
        for line in more:  # an indented line is a command to copy: never broken
            if line.startswith(" "):
                stderr.print(Text(line, style="dim"), soft_wrap=True)
            else:
                print_message(stderr, line, indent=2, style="dim")


def stdout_lost(exc: OSError) -> NoReturn:
    """stdout could not take what a command printed (``> /dev/full``): say so on stderr and
    exit 5, as for any output that could not be written."""
    silence_stdout()
    _print_error(OutputError(f"cannot write to stdout: {exc.strerror or exc}"))
    raise typer.Exit(EXIT_OUTPUT)


@contextmanager
def error_boundary(*, runs_engine: bool = False) -> Iterator[None]:
    """Map library errors to exit codes; anything else is a bug and propagates.

    ``runs_engine``: the command would have run an engine, so say that nothing ran.
    """
    try:
        yield
    except InputError as exc:
        _print_error(exc)
        if runs_engine:
            stderr.print("[dim]Nothing was run.[/]")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except EngineError as exc:
        _print_error(exc)
        raise typer.Exit(EXIT_ENGINE) from None
    except OutputError as exc:
        _print_error(exc)
        raise typer.Exit(EXIT_OUTPUT) from None
    except OSError as exc:
        # The terminal report itself could not be written (``> /dev/full``, a closed
        # stdout): an output that could not be written, not a bug. Any other OSError is one.
        if not stdout_failed(exc):
            raise
        stdout_lost(exc)
