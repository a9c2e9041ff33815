"""The bundle as a reporter: it sees the audit's events as they happen (findings are written
per scenario) and the result at the end (the manifest is marked complete, then the HTML
report, ``report.html``, is written from the result and the bundle's trace files).

A file that cannot be written (a full disk, a read-only folder) does not stop the audit: the
first failure is kept, the audit runs on and prints its result, and :meth:`finish` still tries
to mark the manifest, then raises ``OutputError`` (exit 5) saying what is missing and whether
the manifest could be updated."""

from __future__ import annotations

from specseed.bundle.format import BundleWriter, read_run_trace
from specseed.core.errors import OutputError
from specseed.reporting.base import Reporter
from specseed.run.results import AuditEvent, AuditResult


def _describe(exc: OSError) -> str:
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}"


class BundleReporter(Reporter):
    """Feeds a :class:`BundleWriter` (the CLI starts it before the engine runs)."""

    def __init__(self, writer: BundleWriter) -> None:
        self.writer = writer
        self.failure: OSError | None = None
        """The first write that failed while the audit ran."""

    def on_event(self, event: AuditEvent) -> None:
        try:
            self.writer.on_event(event)
        except OSError as exc:
            if self.failure is None:
                self.failure = exc

    def _write_report(self, result: AuditResult, exit_code: int) -> None:
        """``DIR/report.html``, the page ``specseed report DIR -f html`` writes, from the
        result and the bundle's own trace files (the result's runs kept no steps)."""
        from specseed.reporting.html import render_html

        root = self.writer.root
        text = render_html(
            result,
            exit_code,
            steps=lambda scenario, run: read_run_trace(root, scenario, run),
            source=f"bundle {root}",
        )
        self.writer.write_report(text)

    def finish(self, result: AuditResult, exit_code: int) -> None:
        try:
            self.writer.finish(result, exit_code)
        except OSError as exc:
            if self.failure is None:
                self.failure = exc
        if self.writer.manifest is not None:
            try:
                self._write_report(result, exit_code)
            except OSError as exc:
                if self.failure is None:
                    self.failure = exc
        status = self.writer.manifest.status if self.writer.manifest else None
        if self.failure is not None and not self.writer.finished:
            first = self.failure
            raise OutputError(
                f"cannot write the bundle {self.writer.root}: {_describe(first)}; its manifest "
                "could not be updated either and still says the audit is running",
                hint="free space and run the audit again; the findings are in the terminal report",
            ) from None
        if self.failure is not None:
            raise OutputError(
                f"cannot write the bundle {self.writer.root}: {_describe(self.failure)}; the "
                f"bundle misses that file (its manifest says {status})",
                hint="free space and run the audit again; the findings are in the terminal report",
            )
