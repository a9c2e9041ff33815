"""Plain progress lines on stderr, for logs that are not a terminal (CI).

One line when the audit starts and one per finished scenario, with its finding counts and
seconds; no colour, no cursor movement, flushed at once so that a CI log shows where a long
audit is. The Rich progress bar (``console.AuditProgress``) is for terminals.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import TextIO

from specseed.checks.findings import STATUSES
from specseed.core.secrets import safe_text
from specseed.core.wording import plural
from specseed.reporting.base import Reporter
from specseed.run.results import AuditEvent, AuditResult, AuditStarted, ScenarioChecked


class ProgressLines(Reporter):
    """``specseed: [3/10] uptime: 2 runs, 9 pass, 0 fail, 0 error (1.2s)``."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        """None: ``sys.stderr`` when the line is written (an engine log capture swaps it)."""
        self.total = 0
        self.done = 0

    def _line(self, text: str) -> None:
        try:
            stream = self.stream or sys.stderr
            stream.write(f"specseed: {safe_text(text)}\n")
            stream.flush()
        except (OSError, ValueError):  # a closed stderr must not stop the audit
            pass

    def on_event(self, event: AuditEvent) -> None:
        if isinstance(event, AuditStarted):
            self.total = event.scenarios
            self._line(
                f"auditing engine {event.engine}: {plural(event.scenarios, 'scenario')}, "
                f"{plural(event.runs, 'run')}"
            )
        elif isinstance(event, ScenarioChecked):
            self.done += 1
            result = event.result
            counts = Counter(f.status for f in result.findings)
            shown = ", ".join(
                f"{counts[s]} {s}" for s in STATUSES if counts[s] or s in ("pass", "fail")
            )
            runs = len(result.traces)
            self._line(
                f"[{self.done}/{self.total}] {result.scenario.name}: {plural(runs, 'run')}, "
                f"{shown} ({result.seconds:.1f}s)"
            )

    def finish(self, result: AuditResult, exit_code: int) -> None:
        """Nothing: the report itself follows."""
