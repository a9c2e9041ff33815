"""The one interface every reporter implements.

A reporter sees the audit's progress events as they happen and the finished result once; it
renders, and never decides a verdict (``AuditResult.verdict`` does) or an exit code (the CLI
does). Reporters that produce a document hand its text to a ``sink`` the CLI gives them, so
where and how it is written (a file, stdout) stays the CLI's business.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from specseed.run.results import AuditEvent, AuditResult

Sink = Callable[[str], None]
"""Where a reporter's document goes (the CLI writes it to a file or stdout)."""


class Reporter(ABC):
    """Consumes progress events and the final result."""

    def on_event(self, event: AuditEvent) -> None:  # noqa: B027 - most reporters ignore progress
        """A progress event (default: ignored)."""

    @abstractmethod
    def finish(self, result: AuditResult, exit_code: int) -> None:
        """The audit is over: render the result."""


class DocumentReporter(Reporter):
    """A reporter that renders one document at the end (JSON, JUnit XML, ...)."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink

    @abstractmethod
    def render(self, result: AuditResult, exit_code: int) -> str:
        """The document's text."""

    def finish(self, result: AuditResult, exit_code: int) -> None:
        self.sink(self.render(result, exit_code))
