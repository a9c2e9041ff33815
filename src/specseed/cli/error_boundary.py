"""The one error boundary: typed library errors become a message, a hint and an exit code.

Exit codes: 0 every invariant holds, 1 a violation, 2 bad input, 3 the engine could not run,
4 nothing was checked (every finding is skip).
5 the audit ran but an output could not be written (130/143 for signals: cli/interrupts.py).
The numbers live in ``specseed.workflows.exit_codes`` so that library callers share them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer
from rich.markup import escape

from specseed.core.errors import EngineError, InputError, OutputError, ScenarioError, SpecseedError
from specseed.core.secrets import SafeConsole
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

# soft_wrap: a problem line (file:line: path: message) is never broken inside a path.
stderr = SafeConsole(stderr=True, soft_wrap=True)


def _print_error(exc: SpecseedError) -> None:
    stderr.print(f"[bold red]Error:[/] {escape(exc.message)}")
    if isinstance(exc, ScenarioError):
        for problem in exc.problems:
            stderr.print(f"  • {escape(problem)}")
    if exc.hint:
        stderr.print(f"[dim]hint: {escape(exc.hint)}[/]")


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
