"""A report format from another package, in one file: the findings as CSV.

``FORMAT`` is what its distribution's entry point names::

    [specseed.formats]
    csv = specseed_csv_report:FORMAT

Nothing in specseed names it; ``specseed audit --report csv=findings.csv`` writes it.
"""

from __future__ import annotations

import csv
import io

from specseed.reporting.formats import OutputFormat
from specseed.run.results import AuditResult

FORMAT = OutputFormat(
    "csv",
    "one row per finding: check, scenario, status, message",
    ".csv",
    "specseed_csv_report:render",
    title="CSV findings",
)

BROKEN = OutputFormat("broken", "renders nothing", ".txt", "specseed_csv_report:fail")
"""A format whose renderer fails, for the test that a plugin's failure is not a traceback."""


def render(result: AuditResult, exit_code: int) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["check", "scenario", "status", "message"])
    for finding in result.findings:
        writer.writerow([finding.check, finding.scenario, finding.status, finding.message])
    writer.writerow(["exit_code", "", "", exit_code])
    return out.getvalue()


def fail(result: AuditResult, exit_code: int) -> str:
    raise RuntimeError("this renderer always fails")
