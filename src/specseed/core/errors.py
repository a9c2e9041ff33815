"""Typed errors raised by library code.

Only ``specseed.cli`` turns these into a message, a hint and an exit code (``cli/error_boundary.py``,
the one error boundary); library code raises them and never exits.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

_PLACE = re.compile(r"(.+?):(\d+): ")


def by_place(problems: list[str]) -> list[str]:
    """Problems in the order a reader meets them: by file (in the order the files first
    come), then by line; a problem without a line stays after its file's lines."""
    files: dict[str, int] = {}
    keys = []
    for n, problem in enumerate(problems):
        match = _PLACE.match(problem)
        name = match.group(1) if match else problem.split(":", 1)[0]
        order = files.setdefault(name, len(files))
        keys.append((order, int(match.group(2)) if match else float("inf"), n))
    return [problems[k[2]] for k in sorted(keys)]


class SpecseedError(Exception):
    """Base class of every error specseed raises on purpose."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class InputError(SpecseedError):
    """Bad input from the user: a value, a file, a flag. Exit code 2."""


class ArgumentTypeError(InputError, TypeError):
    """A library call's argument of the wrong type (``audit(scenarios="uptime")``, ``on_event=5``):
    a ``TypeError`` naming the argument, checked before anything runs, and an ``InputError``
    as any bad input is."""


class ArgumentValueError(InputError, ValueError):
    """A library call's argument of the right type and a wrong value (an empty path): a
    ``ValueError`` naming the argument, and an ``InputError``."""


class ScenarioError(InputError):
    """A model.yaml or scenario file that does not validate. Exit code 2.

    ``problems`` holds one line per problem, each naming the file, the field path and the fix.
    """

    def __init__(self, message: str, problems: list[str] | None = None, *, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.problems = by_place(problems or [])

    def __str__(self) -> str:
        """The message and every problem, one bullet each, as the CLI renders them: a
        library caller sees what is wrong, not just that something is."""
        return self.message + "".join(f"\n  • {problem}" for problem in self.problems)


class EngineError(SpecseedError):
    """The engine could not be loaded or could not run at all. Exit code 3."""


class EngineUnavailable(EngineError):
    """An engine adapter whose package is not installed (for example tensorrt-llm)."""


class OutputError(SpecseedError):
    """The audit ran, but one of its outputs (a report file, a trace file) could not be
    written. The findings stand; the message names what is missing. Exit code 5 when no
    finding fails."""


class TraceWriteError(OutputError):
    """A run's trace file could not be written (disk full, a file where its folder should be).

    The run goes on in memory, so its findings are complete; only the evidence on disk is
    missing from the step named."""


class TraceDirBusy(InputError):
    """Another audit holds the ``--trace-dir`` (its lock file). Exit code 2, nothing run."""


class PluginError(EngineError):
    """Another package's code (a check, an engine, a format registered by entry point)
    raised what would have ended specseed (``SystemExit(0)`` at import): contained as an
    ordinary error, so it is recorded and reported like any broken plugin."""


@contextmanager
def plugin_code(what: str) -> Iterator[None]:
    """Run another package's code (``what`` names it): any ``BaseException`` but a
    ``KeyboardInterrupt`` that is not an ``Exception`` (``SystemExit``, ``GeneratorExit``, a
    ``BaseExceptionGroup``) becomes a :class:`PluginError`, which every ``except Exception``
    that guards a plugin then records. Left alone, a plugin's ``sys.exit(0)`` would end
    specseed with exit 0, whatever the audit found."""
    try:
        yield
    except (Exception, KeyboardInterrupt):
        raise
    except BaseException as exc:
        raise PluginError(f"{what} raised {type(exc).__name__}({exc})") from None


class AuditInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived while the audit ran.

    A ``KeyboardInterrupt``, not an ``Exception``: no engine adapter or check may catch it as
    a failure of its own. The runner ends the current trace with an ``Interrupted`` failure and
    returns what finished.
    """

    def __init__(self, signal_name: str = "SIGINT") -> None:
        super().__init__(f"interrupted by {signal_name}")
        self.signal_name = signal_name
