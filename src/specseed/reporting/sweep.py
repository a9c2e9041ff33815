"""A sweep rendered: the terminal's summary (80 columns) and ``sweep.md``.

The terminal shows one line per release (how long it took, its verdict or why it has none),
the verdict of each scenario by release (releases as columns, in as many blocks as 80 columns
need), the changes between neighbouring releases with the evidence of each changed check, and
where the verdict changed. ``sweep.md`` holds the whole table: every check of every scenario
by release. Renders what the sweep decided; decides nothing.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from specseed.core.text import printable
from specseed.core.wording import plural
from specseed.releases.result import SweepResult
from specseed.releases.table import ReleaseOutcome, changes, failing, transition

WIDTH = 80
SHOWN_CELLS = 4
"""Verdict changes shown per pair of releases on the terminal (sweep.md has every one)."""
SHORT_STATUS = {
    "not-installable": "n/i",
    "cannot-run": "n/r",
    "timed-out": "t/o",
    "interrupted": "int",
}
LEGEND = (
    "ok: every check passes or skips · FAIL: a check fails or errs · n/i: not "
    "installable · n/r: cannot run the audit's settings · t/o: timed out · blank: "
    "not run (bisection)"
)


def scenario_status(outcome: ReleaseOutcome | None, scenario: str) -> str:
    """One scenario of one release in one word."""
    if outcome is None:
        return ""
    if not outcome.judged:
        return SHORT_STATUS.get(outcome.status, outcome.status)
    row = outcome.cells.get(scenario)
    if not row:
        return "-"
    statuses = {cell.status for cell in row.values()}
    if statuses & {"fail", "error"}:
        return "FAIL"
    if statuses <= {"skip"}:
        return "skip"
    return "ok"


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}s" if value < 100 else f"{value:.0f}s"


def _release_line(outcome: ReleaseOutcome) -> tuple[str, str, str, str, str]:
    t = outcome.timings
    install = _seconds(t.install) + (" cached" if t.cached else "")
    if outcome.judged:
        result = f"{(outcome.verdict or '?').upper()} (exit {outcome.exit_code})"
        if outcome.via == "http":
            result += ", http"
    else:
        result = outcome.status
    return (outcome.version, install, _seconds(t.starting), _seconds(t.serving), result)


def _wrap(text: str, indent: str) -> list[str]:
    return textwrap.wrap(
        printable(text),
        WIDTH,
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_long_words=True,
        break_on_hyphens=False,
    ) or [indent]


def summary_lines(result: SweepResult, folder: Path | None = None) -> list[str]:
    """The terminal summary as lines of at most 80 columns."""
    outcomes = {o.version: o for o in result.outcomes}
    versions = [r.version for r in result.releases]
    run = [v for v in versions if v in outcomes]
    scenarios = sorted({s for o in result.outcomes for s in o.cells})
    head = (
        f"specseed sweep: {result.package} {versions[0]} to {versions[-1]} "
        f"({plural(len(versions), 'release')}, {len(run)} run"
        f"{', bisected' if result.bisected else ''}), {result.via}, "
        f"{plural(len(scenarios), 'scenario')} in {_seconds(result.seconds)}"
    )
    lines = _wrap(head, "")
    # One line per release run.
    table = [("release", "install", "start", "audit", "result")]
    table += [_release_line(outcomes[v]) for v in run]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    for row in table:
        cells = [row[i].ljust(widths[i]) for i in range(4)]
        lines.append(printable("  ".join([*cells, row[4]]))[:WIDTH].rstrip())
    # Verdict by scenario, releases as columns.
    if scenarios:
        lines.append("")
        lines.append("Verdict by scenario and release")
        name_width = min(max(len(s) for s in scenarios), 24)
        column = max(6, *(len(v) for v in run)) + 2
        per_block = max(1, (WIDTH - name_width - 2) // column)
        for start in range(0, len(run), per_block):
            block = run[start : start + per_block]
            lines.append(
                (
                    "scenario".ljust(name_width) + "  " + "".join(v.ljust(column) for v in block)
                ).rstrip()
            )
            for scenario in scenarios:
                marks = "".join(scenario_status(outcomes[v], scenario).ljust(column) for v in block)
                name = scenario if len(scenario) <= name_width else scenario[: name_width - 1] + "~"
                lines.append(printable(name.ljust(name_width) + "  " + marks).rstrip())
        lines.extend(_wrap(LEGEND, ""))
    # Verdict changes between neighbours (every change of evidence is in sweep.md).
    found = changes(result.outcomes, result.releases, verdicts_only=True)
    if found:
        lines.append("")
        lines.append("Verdict changes between neighbouring releases")
        for change in found:
            between = (
                f" ({len(change.untested_between)} between not judged: "
                f"{', '.join(change.untested_between)})"
                if change.untested_between
                else ""
            )
            lines.extend(_wrap(f"{change.older} -> {change.newer}{between}", ""))
            for moved in change.cells[:SHOWN_CELLS]:
                before = moved.before.status if moved.before else "absent"
                after = moved.after.status if moved.after else "absent"
                lines.extend(_wrap(f"{moved.scenario} / {moved.check}: {before} -> {after}", "  "))
                side, cell = (
                    (change.newer, moved.after)
                    if failing(moved.after)
                    else (change.older, moved.before)
                )
                if cell is not None and cell.evidence:
                    lines.extend(_wrap(f"{side}: {cell.evidence}", "    "))
            hidden = len(change.cells) - SHOWN_CELLS
            if hidden > 0:
                lines.extend(_wrap(f"(+{hidden} more; every change is in sweep.md)", "  "))
    lines.extend(_transition_lines(result))
    unjudged = [o for o in result.outcomes if not o.judged]
    if unjudged:
        lines.append("")
        lines.append("Releases without a verdict")
        for outcome in unjudged:
            reason = " ".join(outcome.reason.split()) or "no reason given"
            lines.extend(_wrap(f"{outcome.version} {outcome.status}: {reason[:400]}", ""))
    if folder is not None:
        lines.append("")
        lines.extend(_wrap(f"Every check by release: {folder / 'sweep.md'}; each release's "
                           f"bundle in {folder}/<package>-<version>/.", ""))  # fmt: skip
    return lines


def _transition_lines(result: SweepResult) -> list[str]:
    found = transition(result.outcomes, result.releases)
    judged = result.judged
    if found is None:
        if len(judged) >= 2:
            return ["", *_wrap(
                f"No verdict changes between {judged[0].version} and {judged[-1].version} "
                "(the releases judged agree on every check both ran).", "")]  # fmt: skip
        return []
    names = {
        "regression": ("First bad release", "last good"),
        "fix": ("First fixed release", "last bad"),
        "change": ("First changed release", "last unchanged"),
    }[found.kind]
    text = f"{names[0]}: {found.first_after} ({names[1]}: {found.last_before})"
    if found.untested_between:
        text += (
            f"; not judged between them: {', '.join(found.untested_between)} "
            "(the change is in one of those or in " + found.first_after + ")"
        )
    checks = ", ".join(sorted({f"{c.scenario}/{c.check}" for c in found.cells}))
    return ["", *_wrap(f"{text}. Changed: {checks}.", "")]


def render_terminal(result: SweepResult, console: Any, folder: Path | None = None) -> None:
    for line in summary_lines(result, folder):
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def _md(text: str) -> str:
    return printable(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(result: SweepResult) -> str:
    """``sweep.md``: every release's timings, every check by release, the changes."""
    outcomes = {o.version: o for o in result.outcomes}
    run = [r.version for r in result.releases if r.version in outcomes]
    out = [f"# specseed sweep: {_md(result.package)} ({_md(result.selection)})", ""]
    out.append(f"Input: `{_md(result.source)}`, {result.via}; "
               f"{len(run)} of {len(result.releases)} releases run"
               f"{' (bisected)' if result.bisected else ''}.")  # fmt: skip
    out += [
        "",
        "## Releases",
        "",
        "| release | install | start | audit | result | engine | observed |",
    ]
    out.append("|---|---|---|---|---|---|---|")
    for version in run:
        o = outcomes[version]
        row = _release_line(o)
        engine = ", ".join(f"{k} {v}" for k, v in sorted(o.engine.items()))
        result_text = row[4] if o.judged else f"{o.status}: {' '.join(o.reason.split())[:300]}"
        starts = f" ({o.timings.engine_starts})" if o.timings.engine_starts is not None else ""
        out.append(
            f"| {row[0]} | {row[1]} | {row[2]}{starts} | {row[3]} | {_md(result_text)} | "
            f"{_md(engine)} | {_md(o.observed)} |"
        )
    cells = sorted({(s, c) for o in result.outcomes for s, row in o.cells.items() for c in row})
    if cells:
        out += ["", "## Every check by release", ""]
        out.append("| scenario | check | " + " | ".join(run) + " |")
        out.append("|---|---|" + "---|" * len(run))
        for scenario, check in cells:
            values = []
            for version in run:
                o = outcomes[version]
                cell = o.cell(scenario, check)
                values.append(
                    cell.status
                    if cell
                    else ("" if o.judged else SHORT_STATUS.get(o.status, o.status))
                )
            out.append(f"| {_md(scenario)} | {_md(check)} | " + " | ".join(values) + " |")
    found = changes(result.outcomes, result.releases)
    if found:
        out += ["", "## Changes between neighbouring releases", ""]
        for change in found:
            out.append(f"### {change.older} → {change.newer}")
            if change.untested_between:
                out.append(f"\nNot judged between them: {', '.join(change.untested_between)}.")
            out.append("")
            for moved in change.cells:
                before = moved.before.status if moved.before else "absent"
                after = moved.after.status if moved.after else "absent"
                mark = " (verdict)" if failing(moved.before) != failing(moved.after) else ""
                out.append(
                    f"- `{_md(moved.scenario)}` / `{_md(moved.check)}`: {before} → "
                    f"**{after}**{mark}"
                )
                for label, side in ((change.older, moved.before), (change.newer, moved.after)):
                    if side is not None and side.evidence:
                        out.append(f"  - {label}: {_md(side.evidence)}")
            out.append("")
    tail = _transition_lines(result)
    if tail:
        out += ["## Where the verdict changed", "", " ".join(line.strip() for line in tail if line)]
    return "\n".join(out).rstrip() + "\n"


__all__ = ["render_markdown", "render_terminal", "scenario_status", "summary_lines"]
