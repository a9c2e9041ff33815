"""SIGINT, SIGTERM and SIGHUP during an audit: stop the runs, keep the evidence, write the
reports.

While engines run, any of them raises ``AuditInterrupted`` in the main thread; the runner
ends the current run's trace with an ``Interrupted`` failure and returns what finished. While
the bundle is created and the reports are written, a signal is only noted (``defer``), so no
file is cut short, and ``resume`` raises it once the bundle stands; the audit then exits 130
(SIGINT), 143 (SIGTERM) or 129 (SIGHUP: the terminal went away), the shell's codes for those
signals.
"""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any

from specseed.core.errors import AuditInterrupted
from specseed.workflows.exit_codes import EXIT_SIGNAL

__all__ = ["EXIT_SIGNAL", "SIGNALS", "InterruptGuard"]

SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


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
        """From now on, only note signals (the bundle is created, the reports written)."""
        self._deferred = True

    def resume(self) -> None:
        """Signals raise again; one noted while deferred raises ``AuditInterrupted`` now."""
        if self.received is not None:
            raise AuditInterrupted(self.received)
        self._deferred = False

    def __enter__(self) -> InterruptGuard:
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
