"""The one error boundary: typed library errors become a message, a hint and an exit code.

Exit codes: 0 every invariant holds, 1 a violation, 2 bad input, 3 the engine could not run,
4 nothing was checked (every finding is skip).
5 the audit ran but an output could not be written (130/143/129 for signals: cli/interrupts.py).
The numbers live in ``specseed.workflows.exit_codes`` so that library callers share them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

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
