"""Every place a report lands, fed findings whose text a hostile server or bundle wrote:
JUnit stays well-formed XML, JSON stays valid UTF-8, the terminal (``check``, ``diff``) shows
no control, bidi or zero-width character raw, and a stream of any encoding takes the text."""

from __future__ import annotations

import io
import json
import unicodedata
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from specseed.bundle.compare import RecordingDiff, RequestComparison
from specseed.checks.findings import Finding
from specseed.core.files import write_atomic
from specseed.core.secrets import SafeConsole
from specseed.reporting.console import render_report
from specseed.reporting.json_report import render_json
from specseed.reporting.junit import render_junit
from specseed.reporting.recording_diff import render_recording_diff
from specseed.run.results import AuditResult, ScenarioResult
from specseed.scenarios.loader import load_library_scenario
from specseed.scenarios.schema import AuditConfig

HOSTILE = "x\x1b[2J\x07\u202eevil\u2066\u200b\ufeff\U000e0041\ud800\udfff\ufffe\uffff\x00y"
HIDDEN = set("\x1b\x07\u202e\u2066\u200b\ufeff\U000e0041\ud800\udfff\ufffe\uffff\x00")


def _result() -> AuditResult:
    scenario = load_library_scenario("reproducibility").scenario
    findings = tuple(
        Finding(
            status,  # type: ignore[arg-type]
            f"{status}: {HOSTILE}",
            runs=("a",),
            details=(HOSTILE,),
            limitation=HOSTILE if status == "known-limitation" else None,
            check="run-to-run",
            scenario="reproducibility",
        )
        for status in ("pass", "fail", "error", "skip", "known-limitation")
    )
    return AuditResult(
        config=AuditConfig(),
        contract="ideal",
        scenarios=(ScenarioResult(scenario, "builtin:reproducibility", {}, findings, 0.0),),
        environment={"model": HOSTILE, HOSTILE: "key"},
        seconds=0.0,
        command=f"specseed audit {HOSTILE}",
    )


def test_junit_is_well_formed_xml_whatever_the_messages_hold() -> None:
    text = render_junit(_result())
    root = ET.fromstring(text.encode("utf-8"))
    failure = root.find(".//failure")
    assert failure is not None
    assert "\\u202eevil" in failure.get("message", "") and "\\ufffe" in (failure.text or "")
    assert not HIDDEN & set(text)


def test_json_is_valid_utf8_whatever_the_messages_hold(tmp_path: Path) -> None:
    text = render_json(_result(), 1)
    data = json.loads(text.encode("utf-8"))
    fail = next(f for f in data["findings"] if f["status"] == "fail")
    assert fail["message"].startswith("fail: x\x1b[2J")  # JSON carries the text as sent
    assert "\ud800" not in text and "\\ud800" not in text
    path = tmp_path / "report.json"
    write_atomic(path, text)
    assert json.loads(path.read_bytes()) == data


def test_a_file_writer_takes_a_lone_surrogate(tmp_path: Path) -> None:
    path = tmp_path / "out.md"
    write_atomic(path, "a\ud800b")  # a renderer that forgot: the file is still written
    assert path.read_text(encoding="utf-8") == "a\\ud800b"


def _printed(render, encoding: str = "utf-8") -> str:  # type: ignore[no-untyped-def]
    buffer = io.BytesIO()
    stream = io.TextIOWrapper(buffer, encoding=encoding, errors="strict", write_through=True)
    console = SafeConsole(file=stream, width=100, force_terminal=True, color_system=None)
    render(console)
    return buffer.getvalue().decode(encoding)


def test_the_terminal_report_shows_every_hidden_character_as_an_escape() -> None:
    shown = _printed(lambda c: render_report(_result(), c, 1, command="check"))
    assert "\\u202eevil" in shown and "\\x1b[2J" in shown
    assert not HIDDEN & set(shown)
    assert not [c for c in shown if unicodedata.category(c) in ("Cf", "Cs")]


def test_diff_shows_bidi_and_zero_width_names_as_escapes() -> None:
    diff = RecordingDiff(
        left=f"bundles/{HOSTILE}",
        right="bundles/b\u202e",
        requests=(
            RequestComparison(
                "s\u200b", "r\u2066", "q\ufeff", "diverged", position=1, left_tokens=(1, 2)
            ),
        ),
    )
    shown = _printed(lambda c: render_recording_diff(diff, c))
    assert "bundles/b\\u202e" in shown and "s\\u200b" in shown
    assert not HIDDEN & set(shown)


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_console_on_a_narrow_encoding_prints_without_error(
    encoding: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specseed.cli.app import tolerant_streams

    buffer = io.BytesIO()
    stream = io.TextIOWrapper(buffer, encoding=encoding, errors="strict", write_through=True)
    monkeypatch.setattr("sys.stdout", stream)
    tolerant_streams()
    console = SafeConsole(width=100, color_system=None)
    render_report(_result(), console, 1, command="check")
    shown = buffer.getvalue().decode(encoding)
    assert "FAIL" in shown and "\\u202eevil" in shown
