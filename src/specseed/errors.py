"""Typed errors raised by library code.

Only ``specseed.cli`` turns these into a message, a hint and an exit code (STYLE.md rule 5).
"""

from __future__ import annotations


class SpecseedError(Exception):
    """Base class of every error specseed raises on purpose."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class InputError(SpecseedError):
    """Bad input from the user: a value, a file, a flag. Exit code 2."""


class ScenarioError(InputError):
    """A model.yaml or scenario file that does not validate. Exit code 2.

    ``problems`` holds one line per problem, each naming the file, the field path and the fix.
    """

    def __init__(self, message: str, problems: list[str] | None = None, *, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.problems = list(problems or [])


class EngineError(SpecseedError):
    """The engine could not be loaded or could not run at all. Exit code 3."""


class EngineUnavailable(EngineError):
    """An engine adapter whose package is not installed (for example tensorrt-llm)."""
