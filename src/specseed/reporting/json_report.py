"""The machine-readable audit report (``--json``): verdict, findings, environment.

Schema (``report_version`` 1): top-level ``verdict`` ("pass" or "fail"), ``exit_code``,
``summary`` (count of findings per status: the console's last line, "N pass, M fail"; root
causes are not in it), ``engine`` (model.yaml's engine section), ``contract``,
``environment``, ``command``, ``interrupted`` (the signal that stopped the audit, or null),
``unfinished`` (scenarios an interrupt left out), ``missing_evidence`` (trace files that could
not be written, with why), and ``findings``: a list of objects with ``check``,
``scenario``, ``status``, ``suspects`` (list of {defect, why}), ``requests``, ``runs``,
``message``, ``limitation``, ``details``, ``diffs`` and ``offsets``; ``root_causes``: the
audit's conclusion (``specseed.checks.attribution``), each with ``label``, ``kind`` (defect,
ambiguous, crash, specseed-bug, server, unexplained), ``defect``, ``alternatives``,
``separated_by``, ``crash``, ``server`` (what the server did and what was not judged),
``evidence`` and ``consequences`` (the findings it rests on and those following from it, by
check, scenario and runs) and ``why``; ``plugin_problems``: check plugins that could not be
loaded (their checks did not run), one line each. Strings hold no lone surrogate (``for_json``: each
becomes U+FFFD), so the file is valid UTF-8 JSON whatever a server or bundle sent.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict
from typing import Any

from specseed.checks import PLUGIN_PROBLEMS
from specseed.checks.attribution import root_causes
from specseed.checks.findings import STATUSES, Finding
from specseed.core.text import for_json
from specseed.core.version import __version__
from specseed.reporting.base import DocumentReporter
from specseed.run.results import AuditResult

REPORT_VERSION = 1


def finding_dict(finding: Finding) -> dict[str, Any]:
    data = asdict(finding)
    # Field order users read first.
    ordered = {
        key: data.pop(key)
        for key in ("check", "scenario", "status", "suspects", "requests", "runs", "message")
    }
    ordered.update(data)
    return ordered


def report_dict(result: AuditResult, exit_code: int) -> dict[str, Any]:
    counts = Counter(f.status for f in result.findings)
    return {
        "report_version": REPORT_VERSION,
        "specseed_version": __version__,
        "verdict": result.verdict,
        "exit_code": exit_code,
        "summary": {status: counts.get(status, 0) for status in STATUSES},
        "engine": result.config.engine.model_dump(mode="json"),
        "contract": result.contract,
        "scenarios": [s.scenario.name for s in result.scenarios],
        "environment": result.environment,
        "command": result.command,
        "seconds": round(result.seconds, 3),
        "interrupted": result.interrupted,
        "unfinished": list(result.unfinished),
        "missing_evidence": result.missing_evidence,
        "findings": [finding_dict(f) for f in result.findings],
        "root_causes": [c.to_json() for c in root_causes(result.findings)],
        "plugin_problems": list(PLUGIN_PROBLEMS),
    }


def render_json(result: AuditResult, exit_code: int) -> str:
    return json.dumps(for_json(report_dict(result, exit_code)), indent=2) + "\n"


class JsonReporter(DocumentReporter):
    """``--json``: the machine-readable report."""

    def render(self, result: AuditResult, exit_code: int) -> str:
        return render_json(result, exit_code)
