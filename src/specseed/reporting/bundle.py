"""The bundle as a reporter: it sees the audit's events as they happen (findings are written
per scenario) and the result at the end (the manifest is marked complete)."""

from __future__ import annotations

from specseed.bundle.format import BundleWriter
from specseed.reporting.base import Reporter
from specseed.run.results import AuditEvent, AuditResult


class BundleReporter(Reporter):
    """Feeds a :class:`BundleWriter` (the CLI starts it before the engine runs)."""

    def __init__(self, writer: BundleWriter) -> None:
        self.writer = writer

    def on_event(self, event: AuditEvent) -> None:
        self.writer.on_event(event)

    def finish(self, result: AuditResult, exit_code: int) -> None:
        self.writer.finish(result, exit_code)
