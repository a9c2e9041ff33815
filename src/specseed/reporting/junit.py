"""JUnit XML for CI: one testsuite per scenario, one testcase per finding.

fail -> <failure>, error -> <error>, skip and known-limitation -> <skipped> (with the reason),
pass -> an empty testcase. The ``testsuites`` totals count findings, the figures of the
console's last line ("N pass, M fail"). A last testsuite ``root-causes`` has one failing
testcase per root cause (``specseed.checks.attribution``), its body the findings the cause
rests on; it restates failures already counted, so it stays out of the totals and its
``specseed.counts`` property says so.

Every text and attribute goes through ``specseed.core.text.for_xml`` last: a message from a
server or a bundle may hold characters XML 1.0 forbids (U+FFFE, ``ESC``, a lone surrogate),
which would leave a file no CI can parse.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from specseed.checks.attribution import root_causes
from specseed.checks.findings import Finding
from specseed.core.text import for_xml
from specseed.reporting.base import DocumentReporter
from specseed.run.results import AuditResult


def _case_name(finding: Finding) -> str:
    runs = ",".join(finding.runs)
    return f"{finding.check}[{runs}]" if runs else finding.check


def _body(finding: Finding) -> str:
    lines = [finding.message]
    lines += [f"suspect {s.defect}: {s.why}" for s in finding.suspects]
    lines += list(finding.details)
    for diff in finding.diffs:
        lines.append(
            f"{diff.request}: first divergence at token {diff.position} "
            f"({diff.left.run}: {list(diff.left.tokens)} / {diff.right.run}: "
            f"{list(diff.right.tokens)}), {diff.attribution}"
        )
    return "\n".join(lines)


def render_junit(result: AuditResult) -> str:
    root = ET.Element("testsuites", name="specseed audit")
    total = failures = errors = skipped = 0
    for scenario in result.scenarios:
        suite = ET.SubElement(root, "testsuite", name=scenario.scenario.name)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for finding in scenario.findings:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"specseed.{scenario.scenario.name}",
                name=_case_name(finding),
            )
            counts["tests"] += 1
            if finding.status == "fail":
                counts["failures"] += 1
                node = ET.SubElement(case, "failure", message=finding.message, type="violation")
                node.text = _body(finding)
            elif finding.status == "error":
                counts["errors"] += 1
                node = ET.SubElement(case, "error", message=finding.message, type="error")
                node.text = _body(finding)
            elif finding.status in ("skip", "known-limitation"):
                counts["skipped"] += 1
                reason = finding.message
                if finding.status == "known-limitation":
                    reason = f"known limitation: {finding.limitation or finding.message}"
                ET.SubElement(case, "skipped", message=reason)
        for key, value in counts.items():
            suite.set(key, str(value))
        suite.set("time", f"{scenario.seconds:.3f}")
        total += counts["tests"]
        failures += counts["failures"]
        errors += counts["errors"]
        skipped += counts["skipped"]
    causes = root_causes(result.findings)
    if causes:
        suite = ET.SubElement(
            root,
            "testsuite",
            name="root-causes",
            tests=str(len(causes)),
            failures=str(len(causes)),
            errors="0",
            skipped="0",
            time="0.000",
        )
        properties = ET.SubElement(suite, "properties")
        ET.SubElement(
            properties,
            "property",
            name="specseed.counts",
            value="not counted in the testsuites totals nor in the console's figures: one "
            "testcase per root cause, restating failing findings counted in their "
            "scenarios' suites",
        )
        for cause in causes:
            case = ET.SubElement(
                suite, "testcase", classname="specseed.root-causes", name=cause.label
            )
            node = ET.SubElement(case, "failure", message=cause.why, type="root-cause")
            node.text = "\n".join(
                f"{'follows: ' if f in cause.consequences else ''}{f.check}[{','.join(f.runs)}] "
                f"{f.scenario}: {f.message}"
                for f in cause.findings
            )
    root.set("tests", str(total))
    root.set("failures", str(failures))
    root.set("errors", str(errors))
    root.set("skipped", str(skipped))
    for element in root.iter():
        if element.text:
            element.text = for_xml(element.text)
        for name, attribute in element.attrib.items():
            element.set(name, for_xml(attribute))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


class JunitReporter(DocumentReporter):
    """``--junit``: JUnit XML for CI."""

    def render(self, result: AuditResult, exit_code: int) -> str:
        return render_junit(result)
