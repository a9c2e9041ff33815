"""The one interface every reporter implements.

A reporter sees the audit's progress events as they happen and the finished result once; it
renders, and never decides a verdict (``AuditResult.verdict`` does) or an exit code (the CLI
does). Reporters that produce a document hand its text to a ``sink`` the CLI gives them, so
where and how it is written (a file, stdout) stays the CLI's business.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from specseed.core.errors import OutputError, plugin_code
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


class FunctionReporter(DocumentReporter):
    """A document reporter from a plain function ``render(result, exit_code) -> str`` (what
    an output format may name instead of a class: ``reporting.formats``)."""

    def __init__(self, sink: Sink, render: Callable[[AuditResult, int], str]) -> None:
        super().__init__(sink)
        self._render = render

    def render(self, result: AuditResult, exit_code: int) -> str:
        return self._render(result, exit_code)


class GuardedReporter(Reporter):
    """Another package's reporter, kept from losing the audit: a failure while it follows
    the events or renders becomes the ``OutputError`` that ``failed`` makes of it, raised
    from ``finish`` (that document is not written, the audit exits 5, the other documents
    still are), never a traceback."""

    def __init__(self, inner: Reporter, failed: Callable[[Exception], OutputError]) -> None:
        self.inner = inner
        self.failed = failed
        self._broken: Exception | None = None

    def on_event(self, event: AuditEvent) -> None:
        if self._broken is not None:
            return
        try:
            with plugin_code("the reporter"):
                self.inner.on_event(event)
        except Exception as exc:  # its document would be wrong: finish says so
            self._broken = exc

    def finish(self, result: AuditResult, exit_code: int) -> None:
        if self._broken is not None:
            raise self.failed(self._broken)
        try:
            with plugin_code("the reporter"):
                self.inner.finish(result, exit_code)
        except OutputError:
            raise
        except Exception as exc:
            raise self.failed(exc) from None
