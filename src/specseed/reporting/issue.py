"""An issue body from a bundle (``specseed report``): Markdown to paste into a GitHub issue,
or the same content as JSON.

The body leads with what a maintainer needs to act: a title naming the suspect and the
check, the environment, expected versus observed, the smallest scenario that fails (the
minimized one when ``specseed minimize`` stored it), the first divergence with its token and
RNG diffs, the suspects, and the command that reproduces it. Everything else stays in the
bundle.

Every field of a bundle is outside text: the Markdown takes each one through
``specseed.core.text`` (``for_markdown`` for prose and table cells, ``markdown_code`` for
names in code spans, ``markdown_fence`` for scenario text, model.yaml, details and stack
traces), so no field can close a fence, start a heading, link or code block, or land as raw
HTML. The JSON form keeps the fields as they are (lone surrogates replaced: ``for_json``).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import yaml

from specseed.bundle.format import Bundle, BundleScenario
from specseed.checks import CHECKS
from specseed.checks.findings import ATTRIBUTION_TEXT, EventState, Finding, OffsetRow, TokenDiff
from specseed.core.defects import DEFECT_IDS, get_defect
from specseed.core.seeds import fmt_request_seed
from specseed.core.text import for_html, for_json, for_markdown, markdown_code, markdown_fence
from specseed.core.wording import plural
from specseed.engine_adapters.registry import recorded_packages
from specseed.plan.scope import checked_nothing
from specseed.reporting.causes import RootCause, root_causes

ENVIRONMENT_ROWS = (
    ("specseed", "specseed"),
    ("engine", "engine"),
    ("python", "Python"),
    ("torch", "torch"),
    ("cuda", "CUDA"),
    ("gpu", "GPU"),
    ("device", "device"),
    ("flashinfer-python", "flashinfer"),
    ("flashinfer", "flashinfer"),
)
"""Environment rows of every issue, in order; the engines' packages follow
(``EngineInfo.packages``), then :data:`LAST_ENVIRONMENT_ROWS`."""
LAST_ENVIRONMENT_ROWS = (("platform", "platform"), ("model", "model"))
MAX_OFFSET_ROWS = 12
MAX_INLINE_SCENARIO_LINES = 80
"""A scenario longer than this is not pasted into the issue (it is in the bundle)."""


@dataclass(frozen=True)
class IssueReport:
    """What ``specseed report`` renders."""

    title: str
    verdict: str
    causes: tuple[RootCause, ...]
    lead: Finding | None
    environment: tuple[tuple[str, str], ...]
    engine_line: str
    scenario: BundleScenario | None
    scenario_yaml: str
    minimized: bool
    model_yaml: str
    reproduce: tuple[str, ...]
    notes: tuple[str, ...]
    crashes: tuple[tuple[str, str], ...] = ()
    """(run, stack trace) of the lead scenario's runs that crashed."""
    unjudged: str | None = None
    """What the bundle cannot vouch for (``Bundle.unjudged``); None: it finished."""


def _engine_line(bundle: Bundle) -> str:
    engine = bundle.config.engine
    options = ", ".join(
        f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}"
        for k, v in engine.options.items()
        if v not in (None, [], "", {})
    )
    return (
        f"{engine.name} on {engine.device}, contract {bundle.contract}, max_draft_len "
        f"{engine.max_draft_len}, verification {engine.verification}, overlap_scheduler "
        f"{str(engine.overlap_scheduler).lower()}" + (f", options: {options}" if options else "")
    )


def _environment_rows() -> tuple[tuple[str, str], ...]:
    own = {key for key, _ in ENVIRONMENT_ROWS}
    engines = tuple(
        (dist, package.shown_as)
        for package in recorded_packages()
        for dist in package.dists
        if dist not in own
    )
    return (*ENVIRONMENT_ROWS, *engines, *LAST_ENVIRONMENT_ROWS)


def _environment(bundle: Bundle) -> tuple[tuple[str, str], ...]:
    env = bundle.environment
    rows: list[tuple[str, str]] = []
    seen = set()
    for key, label in _environment_rows():
        if key in env and label not in seen:
            rows.append((label, env[key]))
            seen.add(label)
    for label in ("CUDA", "GPU", "flashinfer"):
        if label not in seen:
            rows.append((label, "none" if label != "flashinfer" else "not installed"))
    return tuple(rows)


def _model_for(bundle: Bundle, scenario_file: str) -> str:
    data = bundle.config.model_dump(mode="json")
    data["scenarios"] = [scenario_file]
    if not data["checks"]["skip"]:
        del data["checks"]
    return yaml.safe_dump(data, sort_keys=False)


def _verdict(causes: Sequence[RootCause], unjudged: str | None, nothing: bool) -> str:
    """The JSON verdict: what the audit's exit code says, in a word."""
    if causes:
        return "fail"
    if unjudged:
        return "unfinished"
    return "nothing-checked" if nothing else "pass"


def build_issue(bundle: Bundle, findings: Sequence[Finding] | None = None) -> IssueReport:
    """The issue of a bundle (its recorded findings unless ``findings`` are given)."""
    if findings is None:
        findings = [f for s in bundle.scenarios for f in (s.findings or ())]
    causes = tuple(root_causes(findings))
    lead = causes[0].lead if causes else None
    scenario = next((s for s in bundle.scenarios if lead and s.name == lead.scenario), None)
    engine = bundle.config.engine
    unjudged = bundle.unjudged
    if lead is None and unjudged:
        title = (
            f"specseed: unfinished audit of {engine.name} (contract {bundle.contract}), "
            f"{len(bundle.unfinished)} of {plural(len(bundle.scenarios), 'scenario')} not judged"
        )
    elif lead is None and checked_nothing(findings):
        title = f"specseed: nothing checked on {engine.name} (contract {bundle.contract})"
    elif lead is None:
        title = f"specseed: every invariant holds on {engine.name} (contract {bundle.contract})"
    else:
        # The title names the causes themselves (each one attribution kept), never a count
        # of phantoms.
        names = "; ".join(c.label for c in causes[:2])
        more = len(causes) - 2
        others = f" (+{plural(more, 'more cause')})" if more > 0 else ""
        title = f"[specseed] {names} on {engine.name} ({lead.check}, {lead.scenario}){others}"
    minimized = scenario is not None and scenario.minimal is not None
    scenario_yaml = ""
    if scenario is not None:
        scenario_yaml = scenario.minimal if scenario.minimal is not None else scenario.text
    name = f"{scenario.name}.yaml" if scenario is not None else "scenario.yaml"
    reproduce = [f"specseed audit model.yaml   # model.yaml and {name} as above"]
    # Shell words: a bundle folder named ``b; curl ... | sh`` stays one argument.
    root = shlex.quote(str(bundle.root))
    if scenario is not None:
        reproduce.append(
            f"specseed audit {shlex.quote(f'{bundle.root}/model.yaml')} "
            f"--scenario {shlex.quote(scenario.name)}   # from the bundle"
        )
    reproduce.append(f"specseed replay {root}   # the recording against this engine")
    return IssueReport(
        title=title,
        verdict=_verdict(causes, unjudged, checked_nothing(findings)),
        causes=causes,
        lead=lead,
        environment=_environment(bundle),
        engine_line=_engine_line(bundle),
        scenario=scenario,
        scenario_yaml=scenario_yaml,
        minimized=minimized,
        model_yaml=_model_for(bundle, name),
        reproduce=tuple(reproduce),
        notes=bundle.notes,
        unjudged=unjudged,
        crashes=tuple(
            (run, trace.end.failure.traceback or trace.end.failure.message)
            for run, trace in (scenario.traces.items() if scenario is not None else ())
            if trace.end.failure is not None
        ),
    )


# -- Markdown -----------------------------------------------------------------------------


md = for_markdown
code = markdown_code


class _Marked(str):
    """A table cell specseed marked up itself (``**5**``): written as it is."""


def _cell(text: object) -> str:
    return text if isinstance(text, _Marked) else md(str(text))


def _bold(text: str) -> _Marked:
    return _Marked(f"**{md(text)}**")


def _table(
    header: Sequence[str], rows: Sequence[Sequence[object]], *, text_columns: int = 1
) -> list[str]:
    """A GitHub table: the first ``text_columns`` columns left-aligned, numbers right. Each
    cell is outside text (escaped) unless :class:`_Marked`."""
    align = ["---" if i < text_columns else "---:" for i in range(len(header))]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def _tokens(tokens: Sequence[int], start: int, position: int) -> str:
    parts = ["…"] if start > 0 else []
    for i, token in enumerate(tokens):
        parts.append(f"[{token}]" if start + i == position else str(token))
    if start + len(tokens) <= position:
        parts.append("<end>")
    return " ".join(parts)


def _diff_markdown(diff: TokenDiff) -> list[str]:
    right_name = diff.right_request or diff.request
    lines = [
        f"{code(diff.request)} first diverges at token {diff.position}: "
        f"**{md(ATTRIBUTION_TEXT.get(diff.attribution, diff.attribution))}**.",
        "",
    ]
    left_label = diff.left.run + (f" ({diff.request})" if diff.right_request else "")
    right_label = diff.right.run + (f" ({right_name})" if diff.right_request else "")
    width = max(len(left_label), len(right_label))
    tokens = (
        f"{left_label:<{width}}  {_tokens(diff.left.tokens, diff.window_start, diff.position)}\n"
        f"{right_label:<{width}}  {_tokens(diff.right.tokens, diff.window_start, diff.position)}"
    )
    lines += [*markdown_fence(tokens, "text").splitlines(), ""]
    keys = diff.event_keys()
    if keys:
        lines.append(
            f"RNG state behind it ({md(diff.left.run)}: step {diff.left.step}, row "
            f"{diff.left.row}; {md(diff.right.run)}: step {diff.right.step}, row "
            f"{diff.right.row}); differing states in bold:"
        )
        lines.append("")
        rows = []
        for key in keys:
            pair = [
                next((e for e in side.events if (e.kind, e.index) == key), None)
                for side in (diff.left, diff.right)
            ]
            label = key[0] if key[0] == "accept" else f"{key[0]}[{key[1]}]"
            other = pair[0]
            for n, (side, event) in enumerate(zip((diff.left, diff.right), pair, strict=True)):
                rows.append(
                    _state_row(label if n == 0 else "", side.run, event, other if n else None)
                )
        lines += _table(
            ["event", "run", "seed", "subseq", "offset", "draws", "kernel row", "iter"],
            rows,
            text_columns=2,
        )
        lines.append("")
    first = diff.first_state_difference
    event = None if first is None else (first[0] or first[1])
    if first is not None and event is not None and event.step != diff.left.step:
        lines.append(
            f"The earliest RNG difference for {code(diff.request)} is earlier: "
            f"{md(event.label())} at iteration {event.decoding_iter}: "
            f"{md(_state_text(first[0]))} in {md(diff.left.run)}, "
            f"{md(_state_text(first[1]))} in {md(diff.right.run)}."
        )
        lines.append("")
    same = diff.left.logits_fingerprint == diff.right.logits_fingerprint
    lines.append(
        f"Target logits fingerprint: {code(diff.left.logits_fingerprint or '—')} vs "
        f"{code(diff.right.logits_fingerprint or '—')} ({'equal' if same else 'different'})."
    )
    return lines


def _state_text(event: EventState | None) -> str:
    if event is None:
        return "no event"
    return f"seed {fmt_request_seed(event.seed)}, subsequence {event.subsequence}, offset {event.offset}"


def _state_row(
    label: str, run: str, event: EventState | None, compare: EventState | None
) -> list[str | _Marked]:
    """One side's state; where ``compare`` (the other side) is given, the fields that differ
    from it in bold."""
    if event is None:
        return [label, run, "—", "", "", "", "", ""]
    values: list[str | _Marked] = [
        fmt_request_seed(event.seed),
        str(event.subsequence),
        str(event.offset),
        str(event.draws),
        str(event.kernel_row),
        str(event.decoding_iter),
    ]
    if compare is not None:
        theirs = (compare.seed, compare.subsequence, compare.offset, compare.draws)
        mine = (event.seed, event.subsequence, event.offset, event.draws)
        marked = [_bold(v) if a != b else v for v, a, b in zip(values, mine, theirs, strict=False)]
        values = marked + values[4:]
    return [label, run, *values]


def _offsets_markdown(rows: Sequence[OffsetRow]) -> list[str]:
    request = rows[0].request
    mine = [r for r in rows if r.request == request]
    first_bad = next((i for i, r in enumerate(mine) if r.mismatch), 0)
    shown = mine[max(0, first_bad - 2) :][:MAX_OFFSET_ROWS]
    lines = [
        f"{code(request)} in run {md(shown[0].run)}: RNG state per event, expected by the "
        "contract beside observed (mismatches in bold):",
        "",
    ]
    table: list[list[str | _Marked]] = []
    for r in shown:

        def mark(value: str, name: str, row: OffsetRow = r) -> str | _Marked:
            return _bold(value) if name in row.mismatch else value

        table.append(
            [
                str(r.step),
                str(r.decoding_iter),
                r.event,
                fmt_request_seed(r.expected_seed),
                str(r.expected_subsequence),
                str(r.expected_offset),
                mark(fmt_request_seed(r.seed), "seed"),
                mark(str(r.subsequence), "subsequence"),
                mark(str(r.offset), "offset"),
                str(r.draws),
            ]
        )
    lines += _table(
        [
            "step",
            "iter",
            "event",
            "exp seed",
            "exp subseq",
            "exp offset",
            "seed",
            "subseq",
            "offset",
            "draws",
        ],
        table,
        text_columns=3,
    )
    hidden = len(mine) - len(shown)
    if hidden > 0:
        lines.append("")
        lines.append(f"… {hidden} more events of {code(request)} in the bundle's findings.")
    return lines


def render_markdown(issue: IssueReport) -> str:
    """The issue body: every bundle field in it escaped for where it lands (prose, table
    cell, code span or fence)."""
    out: list[str] = [f"## {md(issue.title)}", ""]
    if issue.notes:
        out.append("> [!WARNING]")
        out.append(
            "> The bundle is incomplete or holds files not used; this report covers the rest:"
        )
        out += [f"> - {md(note)}" for note in issue.notes]
        out.append("")
    if issue.unjudged:
        out.append(f"**Not judged:** {md(issue.unjudged)}.")
        out.append("")
    if issue.lead is None and issue.unjudged:
        out.append(f"Engine: {md(issue.engine_line)}.")
        out.append("")
    elif issue.lead is None and issue.verdict == "nothing-checked":
        out.append(
            f"specseed checked nothing: every finding is skip (the engine exposed no evidence "
            f"any check could use), so nothing below vouches for it. Engine: "
            f"{issue.engine_line}."
        )
    elif issue.lead is None:
        out.append(f"specseed found no violation: engine {md(issue.engine_line)}.")
        out.append("")
    else:
        n = sum(len(c.findings) for c in issue.causes)
        out.append(
            f"specseed found {plural(n, 'failing finding')} with "
            f"{plural(len(issue.causes), 'root cause')}. "
            f"Engine: {md(issue.engine_line)}."
        )
        out.append("")
    out.append("### Environment")
    out.append("")
    out += _table(["component", "version"], issue.environment, text_columns=2)
    out.append("")
    lead = issue.lead
    if lead is not None:
        spec = CHECKS.get(lead.check)
        out.append("### Expected vs observed")
        out.append("")
        expected = spec.description if spec is not None else lead.check
        out.append(f"- **Expected** ({code(lead.check)}): {md(expected)}")
        out.append(
            f"- **Observed** in scenario {code(lead.scenario)} ({md(', '.join(lead.runs))}): "
            f"{md(lead.message)}"
        )
        out.append("")
        out.append("### Suspects")
        out.append("")
        for cause in issue.causes:
            affected = (
                f"{plural(len(cause.findings), 'failing finding')}"
                f" in {plural(len(cause.scenarios), 'scenario')},"
                f" {plural(len(cause.requests), 'request')}"
            )
            if len(cause.defects) > 1:
                # "One of A or B": each of them described, with its own evidence.
                out.append(f"- **{md(cause.label)}**: {affected}; the evidence fits each:")
                for defect in cause.defects:
                    what = get_defect(defect).summary if defect in DEFECT_IDS else defect
                    evidence = cause.evidence_for(defect) or cause.lead.message
                    out.append(f"  - `{md(defect)}` ({md(what)}). Evidence: {md(evidence)}")
                if cause.separated_by:
                    out.append(f"  - To tell them apart: {md(', '.join(cause.separated_by))}.")
                continue
            summary = ""
            if cause.defect in DEFECT_IDS:
                summary = f" ({get_defect(cause.defect).summary})"
            out.append(
                f"- **{md(cause.label)}**{md(summary)}: {affected}. Evidence: {md(cause.why)}"
            )
        out.append("")
        out.append("### Minimal reproduction" if issue.minimized else "### Scenario")
        out.append("")
        if issue.minimized:
            out.append(
                "The failing scenario, shrunk by `specseed minimize` while the same check "
                "still fails with the same suspect:"
            )
        else:
            out.append(
                "The failing scenario as recorded (`specseed minimize BUNDLE` shrinks it and "
                "this report then shows the smallest one):"
            )
        out.append("")
        lines = issue.scenario_yaml.rstrip().splitlines()
        if len(lines) <= MAX_INLINE_SCENARIO_LINES:
            name = f"{issue.scenario.name}.yaml" if issue.scenario else "scenario.yaml"
            out += [f"{code(name)}:", "", markdown_fence(issue.scenario_yaml, "yaml"), ""]
            out += ["`model.yaml`:", "", markdown_fence(issue.model_yaml, "yaml"), ""]
        else:
            out.append(
                f"({len(lines)} lines: attached in the bundle as "
                f"{code((issue.scenario.name if issue.scenario else '?') + '/scenario.yaml')}.)"
            )
            out.append("")
        out.append("### First divergence" if lead.diffs or lead.offsets else "### What failed")
        out.append("")
        if issue.minimized and (lead.diffs or lead.offsets):
            out.append("_As recorded in the bundle, with the scenario before minimization._")
            out.append("")
        if lead.diffs:
            out += _diff_markdown(lead.diffs[0])
            if len(lead.diffs) > 1:
                out.append("")
                out.append("Other requests of this finding:")
                out.append("")
                for diff in lead.diffs[1:]:
                    out.append(
                        f"- {code(diff.request)} first diverges at token {diff.position} "
                        f"({md(diff.left.run)} vs {md(diff.right.run)}): "
                        f"{md(ATTRIBUTION_TEXT.get(diff.attribution, diff.attribution))}"
                    )
        elif lead.offsets:
            out += _offsets_markdown(lead.offsets)
        else:
            out.append(md(lead.message))
            details = [line for line in lead.details[:20] if line not in lead.message]
            if details:
                out += ["", markdown_fence("\n".join(details), "text")]
        out.append("")
        for run, stack in issue.crashes:
            # Raw HTML: the run name escaped as HTML, the stack trace fenced after a blank line.
            out.append(
                f"<details><summary>Stack trace of the engine in run {for_html(run)}</summary>"
            )
            out += ["", markdown_fence(stack, "text"), "", "</details>", ""]
        rest = [f for c in issue.causes for f in c.findings if f is not lead]
        if rest:
            out.append(f"<details><summary>All failing findings ({len(rest) + 1})</summary>")
            out.append("")
            for finding in (lead, *rest):
                out.append(
                    f"- {code(finding.check)} · {code(finding.scenario)}: {md(finding.message)}"
                )
            out.append("")
            out.append("</details>")
            out.append("")
    out.append("### Reproduce")
    out.append("")
    out.append(markdown_fence("\n".join(issue.reproduce), "sh"))
    out.append("")
    out.append("_Report written by `specseed report`; the bundle holds every trace and finding._")
    return "\n".join(out) + "\n"


def issue_dict(issue: IssueReport) -> dict[str, Any]:
    lead = issue.lead
    return {
        "title": issue.title,
        "verdict": issue.verdict,
        "engine": issue.engine_line,
        "environment": dict(issue.environment),
        "expected": CHECKS[lead.check].description if lead and lead.check in CHECKS else None,
        "observed": lead.message if lead else None,
        "check": lead.check if lead else None,
        "scenario": lead.scenario if lead else None,
        "causes": [
            {
                "label": c.label,
                "kind": c.kind,
                "defect": c.defect,
                "alternatives": list(c.alternatives),
                "summaries": {d: get_defect(d).summary for d in c.defects if d in DEFECT_IDS},
                "evidence_by_defect": {d: c.evidence_for(d) for d in c.defects},
                "checks": c.checks,
                "findings": len(c.findings),
                "scenarios": c.scenarios,
                "requests": len(c.requests),
                "why": c.why,
            }
            for c in issue.causes
        ],
        "scenario_yaml": issue.scenario_yaml,
        "minimized": issue.minimized,
        "model_yaml": issue.model_yaml,
        "first_divergence": asdict(lead.diffs[0]) if lead and lead.diffs else None,
        "reproduce": list(issue.reproduce),
        "notes": list(issue.notes),
        "crashes": [{"run": run, "traceback": stack} for run, stack in issue.crashes],
        "body": render_markdown(issue),
    }


def render_issue_json(issue: IssueReport) -> str:
    return json.dumps(for_json(issue_dict(issue)), indent=2) + "\n"
