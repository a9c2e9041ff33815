"""The exit codes of an audit, shared by the CLI and any library caller.

0 every invariant holds, 1 a violation, 2 bad input, 3 the engine could not run, 4 nothing was
checked (every finding is skip), 5 the audit ran but an output (report or trace file) could
not be written, 130/143/129 interrupted by SIGINT/SIGTERM/SIGHUP (the shell's codes for those
signals).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_VIOLATION = 1
EXIT_BAD_INPUT = 2
EXIT_ENGINE = 3
EXIT_NOTHING_CHECKED = 4
"""Every finding is ``skip``: the engine exposed no evidence any check could use."""
EXIT_OUTPUT = 5
"""The audit ran, but a report or trace file could not be written."""
EXIT_SIGNAL = {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}
"""An interrupted audit exits with the shell's code for the signal that stopped it."""


def decide(
    *,
    interrupted: str | None = None,
    violation: bool = False,
    incomplete: bool = False,
    checked_nothing: bool = False,
) -> int:
    """The one order every command that judges follows (docs/exit-codes.md): the signal that
    stopped it (130/143), then a violation (1), then an output or evidence that is missing
    (5), then nothing checked (4); else 0. ``audit``, ``check``, ``replay`` and the Python
    API all decide here, so one set of facts gives one code whichever command states it."""
    if interrupted:
        return EXIT_SIGNAL.get(interrupted, EXIT_SIGNAL["SIGINT"])
    if violation:
        return EXIT_VIOLATION
    if incomplete:
        return EXIT_OUTPUT
    if checked_nothing:
        return EXIT_NOTHING_CHECKED
    return EXIT_OK
