"""The HTML report: one self-contained page that shows an audit's failure at a glance.

Written by ``--report html=PATH`` (the output format ``html``), into every bundle
(``DIR/report.html``, ``reporting.bundle_reporter``) and by ``specseed report BUNDLE -f
html``. The verdict and the root causes come first, then every failing finding with its
evidence drawn: for a ``distribution`` or ``losslessness`` finding the token frequencies with
and without speculation and the PIT histogram against uniform, with 95% bands; for an RNG
finding the draw ranges of the requests involved per decoding iteration, overlaps marked; for
a divergence the two token streams side by side and the RNG state behind the first token
that differs. Then every finding in one table, the environment and how to reproduce.

Everything is rendered from recorded data (``reporting.html_evidence``: findings, the
distribution evidence, trace headers and outputs, and trace steps where the caller has them),
so a bundle read anywhere gives the same page.

One file, nothing fetched: styles inline, figures inline SVG (``reporting.html_plots``,
matplotlib, imported only when a figure is drawn), no script, and a Content-Security-Policy
that forbids the page to load anything. Without matplotlib the page still renders, the
figures' numbers as tables, and says how to get the figures (``pip install
'specseed[report]'``). Every piece of outside text (request, run and scenario names, model
ids, server error text, messages) is scrubbed of secrets, its control characters made
visible, and HTML-escaped (``html.escape``) before it reaches the page: no markup comes from
data.
"""

from __future__ import annotations

import html
import importlib
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from specseed.checks import CHECKS
from specseed.checks.attribution import RootCause, root_causes
from specseed.checks.baseline import CHECK_ID as LOSSLESSNESS_CHECK
from specseed.checks.baseline import sampled_groups
from specseed.checks.distribution import CHECK_ID as DISTRIBUTION_CHECK
from specseed.checks.findings import (
    ATTRIBUTION_TEXT,
    FAILING,
    STATUSES,
    EventState,
    Finding,
    OffsetRow,
    TokenDiff,
)
from specseed.core.defects import DEFECT_IDS, get_defect
from specseed.core.secrets import scrub_text
from specseed.core.seeds import fmt_request_seed, fmt_seed
from specseed.core.text import printable
from specseed.core.version import __version__
from specseed.reporting import html_evidence as ev
from specseed.run.results import AuditResult, ScenarioResult
from specseed.traces.records import RunTrace

INSTALL_HINT = "pip install 'specseed[report]'"
"""How to get the figures (the optional extra that brings matplotlib)."""
MAX_FINDINGS_SHOWN = 12
"""Failing findings shown with their evidence; the others are in the table of findings."""
MAX_DIFFS_SHOWN = 3
"""Divergences of one finding shown in full; the others get one line each."""
MAX_OFFSET_ROWS = 16
MAX_DETAIL_LINES = 24
MAX_TABLE_ROWS = 200
"""Rows of a figure's number table (the figure itself shows what it can)."""
MAX_FINDING_ROWS = 500
"""Rows of the table of every finding (a large audit's passes are in the JSON report)."""
MAX_TEXT = 2_000
"""Characters of one piece of outside text shown (a server's error page is longer)."""
STATUS_LABEL = {
    "fail": "FAIL",
    "error": "ERROR",
    "known-limitation": "LIMITATION",
    "pass": "ok",
    "skip": "skip",
}
_SEVERITY = {"fail": 4, "error": 3, "known-limitation": 2, "pass": 1, "skip": 0}
_BIDI = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")
RNG_EVIDENCE = "rng-state"
"""What the RNG checks ``need``: their findings get the draw-range figure."""

StepSource = Callable[[str, str], "RunTrace | None"]
"""``(scenario, run)`` -> the run's trace with its steps (a bundle's file), or None."""


def esc(value: object, limit: int = MAX_TEXT) -> str:
    """Outside text for the page: secrets removed, control and bidirectional-override
    characters written visibly, cut to ``limit`` characters, then HTML-escaped."""
    text = printable(scrub_text(str(value), by_name=False), limit)
    text = _BIDI.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return html.escape(text, quote=True)


def render(result: AuditResult, exit_code: int) -> str:
    """The ``html`` output format's renderer (``--report html=PATH``)."""
    return render_html(result, exit_code)


def render_html(
    result: AuditResult,
    exit_code: int,
    *,
    steps: StepSource | None = None,
    notes: Sequence[str] = (),
    source: str = "",
) -> str:
    """The page. ``steps`` gives a run's trace with its steps where the result's traces
    dropped them (a bundle's files): the draw-range figures then show every event of the
    requests involved, not only those an offset table lists. ``notes``: what the caller
    knows is missing (a bundle cut short); ``source``: where the result comes from."""
    page = _Page(result, exit_code, steps, tuple(notes), source)
    return page.render()


# -- the page --------------------------------------------------------------------------------


@dataclass
class _Figures:
    """Draws figures through ``html_plots``, importing it (and matplotlib) on first use."""

    module: Any = None
    missing: str | None = None
    drawn: int = 0
    failures: list[str] = field(default_factory=list)

    def draw(self, name: str, *args: Any) -> str | None:
        if self.missing is not None:
            return None
        if self.module is None:
            try:
                self.module = importlib.import_module("specseed.reporting.html_plots")
            except ImportError as exc:
                self.missing = str(exc)
                return None
        self.drawn += 1
        try:
            svg: str = getattr(self.module, name)(*args, f"specseed-figure-{self.drawn}")
        except Exception as exc:  # a figure that cannot be drawn must not lose the report
            self.failures.append(f"{type(exc).__name__}: {exc}")
            return f'<p class="note">This figure could not be drawn ({esc(type(exc).__name__)}: {esc(exc, 300)}); its numbers follow.</p>'
        return f'<figure class="plot">{svg}</figure>'


class _Page:
    def __init__(
        self,
        result: AuditResult,
        exit_code: int,
        steps: StepSource | None,
        notes: tuple[str, ...],
        source: str,
    ) -> None:
        self.result = result
        self.exit_code = exit_code
        self.steps = steps
        self.notes = notes
        self.source = source
        self.figures = _Figures()
        self.findings = result.findings
        self.causes = root_causes(self.findings)
        self.anchors: dict[int, str] = {}
        self.pit_drawn: dict[tuple[str, str], str] = {}
        self.rng_drawn: dict[tuple[object, ...], str] = {}
        """Where a run's draw ranges of the same requests and iterations were drawn."""
        """Where a failing distribution finding draws a run's PIT histogram."""
        self._full_traces: dict[tuple[str, str], RunTrace | None] = {}

    # -- helpers -------------------------------------------------------------------------

    def scenario_of(self, finding: Finding) -> ScenarioResult | None:
        return next((s for s in self.result.scenarios if s.scenario.name == finding.scenario), None)

    def trace(self, scenario: ScenarioResult, run: str) -> RunTrace | None:
        """The run's trace, with its steps where the steps source has them."""
        held = scenario.traces.get(run)
        if (held is not None and held.steps) or self.steps is None:
            return held
        key = (scenario.scenario.name, run)
        if key not in self._full_traces:
            try:
                self._full_traces[key] = self.steps(*key)
            except Exception:  # an unreadable trace file: the offset tables remain
                self._full_traces[key] = None
        return self._full_traces[key] or held

    # -- structure -----------------------------------------------------------------------

    def render(self) -> str:
        leads, others = self._failing_in_order()
        failing = [*leads, *others]
        for n, finding in enumerate(failing[:MAX_FINDINGS_SHOWN], 1):
            self.anchors[id(finding)] = f"finding-{n}"
            scenario = self.scenario_of(finding)
            if finding.check == DISTRIBUTION_CHECK and scenario is not None:
                for run in finding.runs:
                    if run in scenario.distribution_evidence:
                        self.pit_drawn.setdefault((finding.scenario, run), f"finding-{n}")
        body = [
            self._header(),
            self._warnings(),
            self._causes(),
            self._grid(),
            self._failing(leads, others),
            self._all_findings(),
            self._environment(),
        ]
        footer = self._footer()
        # The figures' note goes on top: it says why the page has tables where figures were.
        note = ""
        if self.figures.missing is not None:
            note = (
                '<p class="note banner">Figures need matplotlib, which is not installed '
                f"here ({esc(self.figures.missing, 200)}): <code>{esc(INSTALL_HINT)}</code> "
                "and write the report again (<code>specseed report BUNDLE -f html</code> "
                "for a bundle). Their numbers are in the tables below.</p>"
            )
        return _PAGE.format(
            title=esc(self._title()),
            style=_STYLE,
            body=body[0] + note + "".join(body[1:]) + footer,
        )

    def _title(self) -> str:
        verdict = self._verdict_word()
        engine = self.result.config.engine.name
        causes = "; ".join(c.label for c in self.causes[:2])
        return f"specseed {verdict}: {engine}" + (f": {causes}" if causes else "")

    def _verdict_word(self) -> str:
        if self.result.interrupted:
            return "INTERRUPTED"
        if self.result.verdict == "fail":
            return "FAIL"
        if self.result.missing_evidence or self.notes:
            return "INCOMPLETE"
        return "PASS"

    def _header(self) -> str:
        result = self.result
        word = self._verdict_word()
        tone = {"FAIL": "fail", "PASS": "pass"}.get(word, "warn")
        counts = Counter(f.status for f in self.findings)
        summary = ", ".join(
            f"{counts[s]} {STATUS_LABEL[s] if s != 'pass' else 'pass'}"
            for s in STATUSES
            if counts.get(s)
        )
        runs = sum(len(s.traces) for s in result.scenarios)
        lead = ""
        if self.causes:
            lead = (
                f'<p class="lead">{len(self.causes)} root cause'
                f"{'' if len(self.causes) == 1 else 's'}: "
                + ", ".join(f"<strong>{esc(c.label, 300)}</strong>" for c in self.causes[:4])
                + (" …" if len(self.causes) > 4 else "")
                + "</p>"
            )
        return (
            f'<header class="verdict {tone}"><h1>{word}</h1>'
            f'<div><p class="engine">{esc(self._engine_line())}</p>'
            f"<p>{len(result.scenarios)} scenario{'s' if len(result.scenarios) != 1 else ''}, "
            f"{runs} run{'s' if runs != 1 else ''}, {esc(summary or 'no findings')}; "
            f"exit code {self.exit_code}"
            + (f"; {esc(self.source)}" if self.source else "")
            + f"</p>{lead}</div></header>"
        )

    def _engine_line(self) -> str:
        engine = self.result.config.engine
        options = ", ".join(
            f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}"
            for k, v in engine.options.items()
            if v not in (None, [], "", {})
        )
        return (
            f"engine {engine.name} on {engine.device}, contract {self.result.contract}, "
            f"max_draft_len {engine.max_draft_len}, verification {engine.verification}"
            + (f", options: {options}" if options else "")
        )

    def _warnings(self) -> str:
        lines = list(self.notes)
        if self.result.interrupted:
            unfinished = ", ".join(self.result.unfinished) or "none"
            lines.append(
                f"the audit was interrupted by {self.result.interrupted}; not finished: "
                f"{unfinished}"
            )
        lines += [f"missing evidence: {m}" for m in self.result.missing_evidence]
        if not lines:
            return ""
        items = "".join(f"<li>{esc(line)}</li>" for line in lines)
        return f'<section class="warnings"><h2>Not everything was judged</h2><ul>{items}</ul></section>'

    def _causes(self) -> str:
        if not self.causes:
            return ""
        items = []
        for cause in self.causes:
            items.append(self._cause(cause))
        return (
            '<section id="causes"><h2>Root causes</h2><p class="hint">The fewest defect '
            "classes that explain every failing finding.</p>"
            f'<ol class="causes">{"".join(items)}</ol></section>'
        )

    def _cause(self, cause: RootCause) -> str:
        summary = ""
        if cause.defect in DEFECT_IDS:
            summary = f' <span class="summary">({esc(get_defect(cause.defect).summary)})</span>'
        n = len(cause.findings)
        affected = (
            f"{n} failing finding{'s' if n != 1 else ''} in "
            f"{len(cause.scenarios)} scenario{'s' if len(cause.scenarios) != 1 else ''}, "
            f"{len(cause.requests)} request{'s' if len(cause.requests) != 1 else ''} "
            f"({', '.join(cause.checks)})"
        )
        anchor = self.anchors.get(id(cause.lead))
        link = f' <a href="#{anchor}">see the evidence</a>' if anchor else ""
        consequences = ""
        if cause.consequences:
            listed = ", ".join(f"{f.check} ({f.scenario})" for f in cause.consequences[:6])
            consequences = f'<p class="small">Follows from it: {esc(listed)}</p>'
        return (
            f'<li class="cause"><p class="label"><strong>{esc(cause.label, 400)}</strong>'
            f"{summary}</p><p>{esc(affected)}.{link}</p><p>Evidence: {esc(cause.why)}</p>"
            f"{consequences}</li>"
        )

    def _grid(self) -> str:
        used = [c for c in _ordered_checks() if any(f.check == c for f in self.findings)]
        used += sorted({f.check for f in self.findings} - set(used))
        if not used:
            return '<section id="verdict"><h2>Verdict</h2><p>No findings.</p></section>'
        head = "".join(
            f'<th title="{esc(c)}">{esc(CHECKS[c].short if c in CHECKS else c)}</th>' for c in used
        )
        rows = []
        for scenario in self.result.scenarios:
            by_check: dict[str, list[Finding]] = {}
            for finding in scenario.findings:
                by_check.setdefault(finding.check, []).append(finding)
            cells = []
            for check in used:
                found = by_check.get(check)
                if not found:
                    cells.append('<td class="none">·</td>')
                    continue
                status = max((f.status for f in found), key=lambda s: _SEVERITY[s])
                label = STATUS_LABEL[status]
                first = next((f for f in found if f.status == status), found[0])
                anchor = self.anchors.get(id(first))
                text = f'<a href="#{anchor}">{label}</a>' if anchor else label
                cells.append(
                    f'<td class="s-{status}" title="{esc(first.message, 300)}">{text}</td>'
                )
            rows.append(f"<tr><th>{esc(scenario.scenario.name)}</th>{''.join(cells)}</tr>")
        legend = ", ".join(f"{esc(CHECKS[c].short)} = {esc(c)}" for c in used if c in CHECKS)
        return (
            '<section id="verdict"><h2>Verdict: scenario by check</h2>'
            f'<table class="grid"><thead><tr><th>scenario</th>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table><p class="small">{legend}</p></section>'
        )

    def _failing_in_order(self) -> tuple[list[Finding], list[Finding]]:
        """The clearest failing finding of each cause (``RootCause.lead``), so that every
        cause's evidence comes near the top; then the other failing findings, by cause."""
        leads = list({id(c.lead): c.lead for c in self.causes if c.lead.status in FAILING}.values())
        seen = {id(f) for f in leads}
        others: list[Finding] = []
        for finding in (*(f for c in self.causes for f in c.findings), *self.findings):
            if finding.status in FAILING and id(finding) not in seen:
                seen.add(id(finding))
                others.append(finding)
        return leads, others

    def _failing(self, leads: Sequence[Finding], others: Sequence[Finding]) -> str:
        if not leads and not others:
            return ""
        room = MAX_FINDINGS_SHOWN
        parts = ['<section id="failing"><h2>Failing findings</h2>']
        if leads:
            parts.append('<p class="hint">The clearest finding of each root cause.</p>')
            parts += [self._finding(f) for f in leads[:room]]
            room -= min(room, len(leads))
        if others and room:
            parts.append("<h2>Other failing findings</h2>")
            parts += [self._finding(f) for f in others[:room]]
        rest = len(leads) + len(others) - MAX_FINDINGS_SHOWN
        if rest > 0:
            parts.append(
                f'<p class="small">{rest} more failing findings are in the table of every '
                "finding below.</p>"
            )
        parts.append("</section>")
        return "".join(parts)

    # -- one finding ---------------------------------------------------------------------

    def _finding(self, finding: Finding) -> str:
        spec = CHECKS.get(finding.check)
        anchor = self.anchors.get(id(finding), "")
        runs = f" · runs {esc(', '.join(finding.runs))}" if finding.runs else ""
        title = f'<p class="check">{esc(spec.title)}: {esc(spec.description)}</p>' if spec else ""
        parts = [
            f'<article class="finding s-{finding.status}" id="{anchor}">',
            f'<h3><span class="badge s-{finding.status}">{STATUS_LABEL[finding.status]}</span> '
            f"<code>{esc(finding.check)}</code> · scenario <code>{esc(finding.scenario)}</code>"
            f"{runs}</h3>",
            title,
            self._scenario_line(finding),
            f'<p class="message">{esc(finding.message)}</p>',
        ]
        if finding.suspects:
            items = "".join(
                f"<li><strong>{esc(s.defect)}</strong>: {esc(s.why)}</li>" for s in finding.suspects
            )
            parts.append(f'<p class="small">Suspects:</p><ul class="suspects">{items}</ul>')
        if finding.limitation:
            parts.append(f'<p class="small">Stated limitation: {esc(finding.limitation)}</p>')
        parts.append(self._evidence(finding))
        if finding.details:
            lines = finding.details[:MAX_DETAIL_LINES]
            more = len(finding.details) - len(lines)
            text = "\n".join(esc(line) for line in lines) + (f"\n… {more} more" if more > 0 else "")
            parts.append(
                f"<details><summary>details ({len(finding.details)} lines)</summary>"
                f"<pre>{text}</pre></details>"
            )
        parts.append("</article>")
        return "".join(parts)

    def _scenario_line(self, finding: Finding) -> str:
        scenario = self.scenario_of(finding)
        if scenario is None or not scenario.scenario.description:
            return ""
        return (
            f'<p class="small">Scenario {esc(finding.scenario)} '
            f"({esc(scenario.source, 300)}): {esc(scenario.scenario.description, 600)}</p>"
        )

    def _evidence(self, finding: Finding) -> str:
        scenario = self.scenario_of(finding)
        parts = []
        if scenario is not None and finding.check == DISTRIBUTION_CHECK:
            parts.append(self._distribution(finding, scenario))
        if scenario is not None and finding.check == LOSSLESSNESS_CHECK:
            parts.append(self._losslessness(finding, scenario))
        spec = CHECKS.get(finding.check)
        if scenario is not None and spec is not None and RNG_EVIDENCE in spec.needs:
            parts.append(self._rng(finding, scenario))
        if finding.diffs:
            parts.append(self._diffs(finding.diffs))
        if finding.offsets:
            parts.append(_offsets_table(finding.offsets))
        return "".join(parts)

    # -- distribution ----------------------------------------------------------------------

    def _baseline_of(self, scenario: ScenarioResult, run: str) -> RunTrace | None:
        for spec in scenario.scenario.runs:
            if spec.baseline_of == run and spec.name in scenario.traces:
                return scenario.traces[spec.name]
        return None

    def _distribution(self, finding: Finding, scenario: ScenarioResult) -> str:
        parts = []
        for run in finding.runs:
            evidence = scenario.distribution_evidence.get(run)
            if evidence is None:
                parts.append(
                    f'<p class="note">Run {esc(run)}: no distribution evidence recorded, '
                    "nothing to draw (the details below hold the sub-tests).</p>"
                )
                continue
            baseline = self._baseline_of(scenario, run)
            parts.append(self._pit(scenario, run, evidence))
            arms = _arms(baseline) if baseline is not None else {}
            for freq in ev.evidence_frequencies(evidence, arms):
                parts.append(self._frequencies(freq, run, baseline.name if baseline else None))
        return "".join(parts)

    def _pit(self, scenario: ScenarioResult, run: str, evidence: Any) -> str:
        histograms = ev.pit_histograms(evidence, f"{scenario.scenario.name}/{run}")
        if not histograms:
            return ""
        caption = (
            f'<h4>Run {esc(run)}: PIT histogram against uniform</h4><p class="small">Each '
            "emitted token's randomized probability integral transform under the target's "
            "exact distribution (the values the check tested): uniform when the tokens follow "
            "the target. Dashed: the uniform count; shaded: where a bin falls with 95% "
            "probability (darker: that bin alone; lighter: every bin at once). Red bins are "
            "outside the lighter band.</p>"
        )
        figure = self.figures.draw("pit_figure", histograms)
        rows = []
        for hist in histograms:
            for i, count in enumerate(hist.counts):
                outside = i in hist.outside
                rows.append(
                    [
                        esc(hist.group),
                        hist.order,
                        f"[{i / hist.bins:.2f}, {(i + 1) / hist.bins:.2f})",
                        f'<b class="bad">{count}</b>' if outside else str(count),
                        f"{hist.expected:.1f}",
                        f"{hist.band[0]}–{hist.band[1]}",
                        f"{hist.simultaneous[0]}–{hist.simultaneous[1]}",
                    ]
                )
        table = _numbers(
            ["group", "order", "PIT bin", "tokens", "uniform", "95% per bin", "95% all bins"],
            rows,
            open_=figure is None,
        )
        return caption + (figure or "") + table

    def _frequencies(self, freq: ev.TokenFrequencies, run: str, baseline: str | None) -> str:
        arms = f"run {esc(run)}" + (f" against run {esc(baseline)} (K = 0)" if baseline else "")
        exact = " and the target's exact probabilities" if freq.exact is not None else ""
        caption = (
            f"<h4>Token frequencies with and without speculation: {arms}{exact}</h4>"
            f'<p class="small">{esc(freq.group)}, tokens at {esc(freq.where)}: where the '
            f"counts stray furthest (chi-square p = {freq.p_value:.2g} before Holm). Bars: "
            "the share of sequences with each token, with 95% intervals (Wilson).</p>"
        )
        figure = self.figures.draw("frequency_figure", freq)
        rows = []
        for i, cell in enumerate(freq.cells):
            row = [cell]
            for arm in freq.arms:
                low, high = arm.interval(i)
                row.append(f"{arm.counts[i]} ({arm.share(i):.3f}, {low:.3f}–{high:.3f})")
            if freq.exact is not None:
                row.append(f"{freq.exact[i]:.3f}")
            rows.append(row)
        header = ["token", *(esc(a.name) for a in freq.arms)]
        if freq.exact is not None:
            header.append("target (exact)")
        return caption + (figure or "") + _numbers(header, rows, open_=figure is None)

    def _losslessness(self, finding: Finding, scenario: ScenarioResult) -> str:
        if len(finding.runs) != 2:
            return ""
        spec_run, base_run = finding.runs
        spec, base = scenario.traces.get(spec_run), scenario.traces.get(base_run)
        if spec is None or base is None:
            return ""
        from specseed.distribution.twosample import MAX_POSITIONS

        parts = []
        left, right = sampled_groups(spec), sampled_groups(base)
        for key, ids in list(left.items())[: ev.MAX_GROUPS]:
            other = right.get(key)
            if not other:
                continue
            label = f"{key[0]} (T={key[2]:g})"
            freq = ev.arm_frequencies(
                label,
                [spec.end.outputs.get(i, ()) for i in ids],
                [base.end.outputs.get(i, ()) for i in other],
                MAX_POSITIONS,
            )
            if freq is not None:
                parts.append(self._frequencies(freq, spec_run, base_run))
        evidence = scenario.distribution_evidence.get(spec_run)
        drawn = self.pit_drawn.get((scenario.scenario.name, spec_run))
        if evidence is not None and drawn is not None:
            parts.append(
                f'<p class="small">The PIT histogram of run {esc(spec_run)}: with its '
                f'<a href="#{drawn}">distribution finding</a>.</p>'
            )
        elif evidence is not None:
            parts.append(self._pit(scenario, spec_run, evidence))
        else:
            parts.append(
                f'<p class="note">No PIT histogram: run {esc(spec_run)} has no distribution '
                "evidence (the oracle's exact probabilities), as for an engine specseed "
                "cannot load the model of.</p>"
            )
        return "".join(parts)

    # -- RNG -------------------------------------------------------------------------------

    def _rng(self, finding: Finding, scenario: ScenarioResult) -> str:
        traces = {}
        for run in finding.runs[:2]:
            trace = self.trace(scenario, run)
            if trace is not None:
                traces[run] = trace
        tables = [row for f in scenario.findings if f is not finding for row in f.offsets]
        parts = []
        for windows in ev.offset_windows(finding, traces, tables):
            key = (scenario.scenario.name, windows.run, windows.requests, windows.iterations)
            drawn = self.rng_drawn.get(key)
            if drawn is not None:
                parts.append(
                    f'<p class="small">The draw ranges of {esc(", ".join(windows.requests))} in '
                    f'run {esc(windows.run)}: <a href="#{drawn}">drawn above</a>.</p>'
                )
                continue
            self.rng_drawn[key] = self.anchors.get(id(finding), "")
            hidden = []
            if windows.more_iterations:
                hidden.append(f"{windows.more_iterations} more iterations")
            if windows.more_requests:
                hidden.append(f"{windows.more_requests} more requests")
            caption = (
                f"<h4>Run {esc(windows.run)}: draw ranges per decoding iteration "
                f"{windows.iterations[0]}–{windows.iterations[1]}</h4>"
                f'<p class="small">From the {esc(windows.source)}. Each marker is a sampling '
                "event at its first Philox offset (circle: target, square: accept, "
                "triangle: draft), one lane per request; a red ring: another event of the "
                "same seed and subsequence reads some of the same draws ("
                f"{windows.overlapping_pairs} pairs in all)"
                + (f"; not shown: {', '.join(hidden)}" if hidden else "")
                + ".</p>"
            )
            figure = self.figures.draw("offsets_figure", windows)
            rows = [
                [
                    str(d.decoding_iter),
                    str(d.step),
                    esc(d.request),
                    esc(d.event),
                    fmt_seed(d.seed),
                    str(d.subsequence),
                    _mark(str(d.offset), "offset" in d.mismatch),
                    str(d.draws),
                    "" if d.expected_offset is None else str(d.expected_offset),
                    '<b class="bad">overlaps</b>' if d.overlaps else "",
                ]
                for d in windows.draws[:MAX_TABLE_ROWS]
            ]
            header = [
                "iter",
                "step",
                "request",
                "event",
                "seed",
                "subseq",
                "offset",
                "draws",
                "contract's offset",
                "",
            ]
            parts.append(caption + (figure or "") + _numbers(header, rows, open_=figure is None))
        return "".join(parts)

    # -- divergences -----------------------------------------------------------------------

    def _diffs(self, diffs: Sequence[TokenDiff]) -> str:
        parts = [_diff(d) for d in diffs[:MAX_DIFFS_SHOWN]]
        rest = diffs[MAX_DIFFS_SHOWN:]
        if rest:
            items = "".join(
                f"<li><code>{esc(d.request)}</code> first diverges at token {d.position} "
                f"({esc(d.left.run)} vs {esc(d.right.run)}): {esc(ATTRIBUTION_TEXT[d.attribution])}</li>"
                for d in rest[:50]
            )
            parts.append(f'<p class="small">Other requests of this finding:</p><ul>{items}</ul>')
        return "".join(parts)

    # -- the rest --------------------------------------------------------------------------

    def _all_findings(self) -> str:
        rows = []
        for finding in self.findings[:MAX_FINDING_ROWS]:
            anchor = self.anchors.get(id(finding))
            status = STATUS_LABEL[finding.status]
            label = f'<a href="#{anchor}">{status}</a>' if anchor else status
            rows.append(
                f'<tr><td class="s-{finding.status}">{label}</td><td>{esc(finding.check)}</td>'
                f"<td>{esc(finding.scenario)}</td><td>{esc(', '.join(finding.runs), 200)}</td>"
                f"<td>{esc(finding.message, 400)}</td></tr>"
            )
        if not rows:
            return ""
        more = len(self.findings) - len(rows)
        if more > 0:
            rows.append(
                f'<tr><td colspan="5">… {more} more findings (in the JSON report)</td></tr>'
            )
        return (
            f'<section id="all"><h2>Every finding</h2><details><summary>{len(self.findings)} findings'
            "</summary><table><thead><tr><th>status</th><th>check</th><th>scenario</th>"
            f"<th>runs</th><th>message</th></tr></thead><tbody>{''.join(rows)}</tbody>"
            "</table></details></section>"
        )

    def _environment(self) -> str:
        env = self.result.environment
        rows = "".join(
            f"<tr><th>{esc(k, 200)}</th><td>{esc(v, 500)}</td></tr>" for k, v in sorted(env.items())
        )
        command = ""
        if self.result.command:
            command = f"<p>Command: <code>{esc(self.result.command)}</code></p>"
        return (
            '<section id="environment"><h2>Environment and reproduction</h2>'
            f"{command}<details><summary>{len(env)} entries</summary>"
            f"<table>{rows}</table></details></section>"
        )

    def _footer(self) -> str:
        if self.figures.module is not None:
            figures = f"figures drawn by matplotlib {esc(self.figures.module.VERSION)} as SVG"
        elif self.figures.missing is not None:
            figures = f"no figures (matplotlib is not installed: {esc(INSTALL_HINT)})"
        else:
            figures = "no figures needed"
        return (
            f"<footer>Written by specseed {esc(__version__)}; {figures}. Self-contained: "
            "this page loads nothing.</footer>"
        )


# -- pieces ----------------------------------------------------------------------------------


def _ordered_checks() -> list[str]:
    return [c for c in CHECKS if CHECKS[c].kind == "run"] + [
        c for c in CHECKS if CHECKS[c].kind != "run"
    ]


def _mark(text: str, bad: bool) -> str:
    return f'<b class="bad">{text}</b>' if bad else text


def _numbers(header: Sequence[str], rows: Sequence[Sequence[str]], *, open_: bool) -> str:
    """A figure's numbers: cells are page text already (escaped where they came from data)."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    opened = " open" if open_ else ""
    return (
        f'<details class="numbers"{opened}><summary>the numbers ({len(rows)} rows)</summary>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></details>"
    )


def _arms(trace: RunTrace) -> dict[tuple[object, ...], list[tuple[int, ...]]]:
    """A baseline run's sampled sequences by (prompt, temperature, top_k, top_p)."""
    out: dict[tuple[object, ...], list[tuple[int, ...]]] = {}
    for key, ids in sampled_groups(trace).items():
        out.setdefault(key[1:], []).extend(tuple(trace.end.outputs.get(i, ())) for i in ids)
    return out


def _tokens_row(label: str, tokens: Sequence[int], other: Sequence[int], diff: TokenDiff) -> str:
    cells = [f"<th>{esc(label, 200)}</th>"]
    if diff.window_start > 0:
        cells.append('<td class="gap">…</td>')
    for i, token in enumerate(tokens):
        index = diff.window_start + i
        cls = (
            "first"
            if index == diff.position
            else ("differs" if i >= len(other) or other[i] != token else "")
        )
        cells.append(f'<td class="{cls}">{token}</td>' if cls else f"<td>{token}</td>")
    if diff.window_start + len(tokens) <= diff.position:
        cells.append('<td class="first">end</td>')
    return "<tr>" + "".join(cells) + "</tr>"


def _diff(diff: TokenDiff) -> str:
    right_name = diff.right_request or diff.request
    left_label = diff.left.run + (f" ({diff.request})" if diff.right_request else "")
    right_label = diff.right.run + (f" ({right_name})" if diff.right_request else "")
    positions = "".join(
        f"<th>{diff.window_start + i}</th>"
        for i in range(max(len(diff.left.tokens), len(diff.right.tokens)))
    )
    gap = "<th></th>" if diff.window_start > 0 else ""
    streams = (
        f'<table class="streams"><thead><tr><th>output index</th>{gap}{positions}</tr></thead><tbody>'
        + _tokens_row(left_label, diff.left.tokens, diff.right.tokens, diff)
        + _tokens_row(right_label, diff.right.tokens, diff.left.tokens, diff)
        + "</tbody></table>"
    )
    parts = [
        '<div class="diff">',
        f"<h4><code>{esc(diff.request)}</code> first diverges at token {diff.position}: "
        f"{esc(ATTRIBUTION_TEXT[diff.attribution])}</h4>",
        streams,
    ]
    keys = diff.event_keys()
    if keys:
        parts.append(
            f'<p class="small">RNG state behind the first different token ({esc(diff.left.run)}: '
            f"step {diff.left.step}, row {diff.left.row}; {esc(diff.right.run)}: step "
            f"{diff.right.step}, row {diff.right.row}); values that differ between the sides "
            "are marked:</p>"
        )
        rows = []
        for kind, index in keys:
            label = kind if kind == "accept" else f"{kind}[{index}]"
            pair = [
                next((e for e in side.events if (e.kind, e.index) == (kind, index)), None)
                for side in (diff.left, diff.right)
            ]
            for n, (side, event) in enumerate(zip((diff.left, diff.right), pair, strict=True)):
                rows.append(_state_row(label if n == 0 else "", side.run, event, pair[1 - n]))
        parts.append(
            '<table class="states"><thead><tr><th>event</th><th>run</th><th>seed</th>'
            "<th>subseq</th><th>offset</th><th>draws</th><th>kernel row</th><th>iter</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    first = diff.first_state_difference
    event = None if first is None else (first[0] or first[1])
    if first is not None and event is not None and event.step != diff.left.step:
        parts.append(
            f"<p>The earliest RNG difference for <code>{esc(diff.request)}</code> is earlier: "
            f"{esc(event.label())} at iteration {event.decoding_iter}: "
            f"{esc(_state_text(first[0]))} in {esc(diff.left.run)}, "
            f"{esc(_state_text(first[1]))} in {esc(diff.right.run)}.</p>"
        )
    same = diff.left.logits_fingerprint == diff.right.logits_fingerprint
    parts.append(
        f'<p class="small">Target logits fingerprint: <code>{esc(diff.left.logits_fingerprint or "—")}</code> '
        f"vs <code>{esc(diff.right.logits_fingerprint or '—')}</code> "
        f"({'equal' if same else 'different'}).</p></div>"
    )
    return "".join(parts)


def _state_text(event: EventState | None) -> str:
    if event is None:
        return "no event"
    return f"seed {fmt_seed(event.seed)}, subsequence {event.subsequence}, offset {event.offset}"


def _state_row(label: str, run: str, event: EventState | None, other: EventState | None) -> str:
    if event is None:
        return f'<tr><th>{esc(label)}</th><td>{esc(run)}</td><td colspan="6">no event</td></tr>'
    mine = (event.seed, event.subsequence, event.offset, event.draws)
    theirs = (other.seed, other.subsequence, other.offset, other.draws) if other else mine
    shown = (fmt_seed(event.seed), str(event.subsequence), str(event.offset), str(event.draws))
    cells = "".join(
        f"<td>{_mark(text, a != b)}</td>" for text, a, b in zip(shown, mine, theirs, strict=True)
    )
    return (
        f"<tr><th>{esc(label)}</th><td>{esc(run)}</td>{cells}<td>{event.kernel_row}</td>"
        f"<td>{event.decoding_iter}</td></tr>"
    )


def _offsets_table(rows: Sequence[OffsetRow]) -> str:
    request = rows[0].request
    mine = [r for r in rows if r.request == request]
    first_bad = next((i for i, r in enumerate(mine) if r.mismatch), 0)
    shown = mine[max(0, first_bad - 2) :][:MAX_OFFSET_ROWS]
    body = []
    for r in shown:
        body.append(
            "<tr>"
            + "".join(
                f"<td>{c}</td>"
                for c in (
                    str(r.step),
                    str(r.decoding_iter),
                    esc(r.event),
                    fmt_request_seed(r.expected_seed),
                    str(r.expected_subsequence),
                    str(r.expected_offset),
                    _mark(fmt_seed(r.seed), "seed" in r.mismatch),
                    _mark(str(r.subsequence), "subsequence" in r.mismatch),
                    _mark(str(r.offset), "offset" in r.mismatch),
                    str(r.draws),
                )
            )
            + "</tr>"
        )
    others = sorted({r.request for r in rows} - {request})
    more = len(mine) - len(shown)
    tail = []
    if more > 0:
        tail.append(f"{more} more events of {esc(request)}")
    if others:
        tail.append(f"the events of {len(others)} more requests")
    note = (
        f'<p class="small">Not shown: {"; ".join(tail)} (in the JSON report).</p>' if tail else ""
    )
    return (
        f"<h4>RNG state of <code>{esc(request)}</code> in run {esc(shown[0].run)}: expected by "
        "the contract beside observed (differences marked)</h4>"
        '<table class="states"><thead><tr><th>step</th><th>iter</th><th>event</th>'
        "<th>exp. seed</th><th>exp. subseq</th><th>exp. offset</th><th>seed</th><th>subseq</th>"
        f"<th>offset</th><th>draws</th></tr></thead><tbody>{''.join(body)}</tbody></table>{note}"
    )


_STYLE = """
:root{--fail:#c62828;--error:#ad1457;--warn:#ef6c00;--pass:#2e7d32;--skip:#757575;--line:#ddd}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;
color:#1f1f1f;background:#fafafa}
main{max-width:1100px;margin:0 auto;padding:0 18px 40px}
header.verdict{display:flex;gap:22px;align-items:center;padding:16px 22px;color:#fff;margin:0 -18px 14px}
header.verdict h1{font-size:40px;margin:0;letter-spacing:1px}
header.verdict p{margin:2px 0}
header.fail{background:var(--fail)}header.pass{background:var(--pass)}header.warn{background:var(--warn)}
header .lead{font-size:16px}
h2{font-size:19px;border-bottom:1px solid var(--line);padding-bottom:3px;margin-top:28px}
h3{font-size:16px;margin:0 0 6px}h4{font-size:14px;margin:16px 0 4px}
code{font:12.5px ui-monospace,"DejaVu Sans Mono",monospace;background:#f0f0f0;padding:0 3px;border-radius:3px}
pre{font:12px ui-monospace,"DejaVu Sans Mono",monospace;white-space:pre-wrap;background:#f4f4f4;padding:8px}
table{border-collapse:collapse;margin:6px 0;font-size:13px}
th,td{border:1px solid var(--line);padding:2px 7px;text-align:left;vertical-align:top}
thead th{background:#f0f0f0}
table.grid td{text-align:center;font-weight:600}
td.s-fail,td.s-error{background:#fde0e0;color:var(--fail)}
td.s-known-limitation{background:#fff0dc;color:var(--warn)}
td.s-pass{background:#e6f4e7;color:var(--pass)}td.s-skip{color:var(--skip)}td.none{color:#bbb}
.badge{display:inline-block;padding:1px 7px;border-radius:3px;color:#fff;font-size:12px}
.badge.s-fail{background:var(--fail)}.badge.s-error{background:var(--error)}
.badge.s-known-limitation{background:var(--warn)}.badge.s-pass{background:var(--pass)}
.badge.s-skip{background:var(--skip)}
article.finding{background:#fff;border:1px solid var(--line);border-left:5px solid var(--fail);
padding:10px 14px;margin:14px 0}
article.s-error{border-left-color:var(--error)}
.message{font-weight:600}.small,.check{font-size:12.5px;color:#555}.hint{color:#555}
ol.causes{padding-left:22px}li.cause{margin-bottom:10px}li.cause p{margin:2px 0}
li.cause .label{font-size:16px}
.bad{color:var(--fail)}
table.streams td{font:13px ui-monospace,"DejaVu Sans Mono",monospace;text-align:right}
table.streams td.first{background:var(--fail);color:#fff;font-weight:700}
table.streams td.differs{background:#fde0e0}
figure.plot{margin:6px 0;overflow-x:auto}
figure.plot svg{max-width:100%;height:auto;display:block}
.note{background:#fff8e1;border:1px solid #ffe082;padding:6px 10px}
.banner{margin:10px 0}
section.warnings{background:#fff3e0;border:1px solid #ffcc80;padding:4px 14px;margin-top:10px}
details.numbers summary{font-size:12.5px;color:#555;cursor:pointer}
footer{margin-top:30px;font-size:12px;color:#777}
"""

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{style}</style>
</head><body><main>
{body}
</main></body></html>
"""
