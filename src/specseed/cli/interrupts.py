"""SIGINT and SIGTERM during an audit: stop the runs, keep the evidence, write the reports.

While engines run, either signal raises ``AuditInterrupted`` in the main thread; the runner
ends the current run's trace with an ``Interrupted`` failure and returns what finished. While
the reports are written, a signal is only noted, so no report is cut short; the audit then
exits 130 (SIGINT) or 143 (SIGTERM), the shell's codes for those signals.
"""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any

from specseed.core.errors import AuditInterrupted
from specseed.workflows.exit_codes import EXIT_SIGNAL

__all__ = ["EXIT_SIGNAL", "SIGNALS", "InterruptGuard"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class InterruptGuard:
    """Installs the handlers for the duration of a ``with`` block; restores them after."""

    def __init__(self) -> None:
        self.received: str | None = None
        """The first signal received while deferred (None: none)."""
        self._deferred = False
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self._deferred:
            self.received = self.received or name
            return
        self._deferred = True  # a second signal must not cut the cleanup short
        self.received = name
        raise AuditInterrupted(name)

    def defer(self) -> None:
        """From now on, only note signals (the reports are being written)."""
        self._deferred = True

    def __enter__(self) -> InterruptGuard:
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
