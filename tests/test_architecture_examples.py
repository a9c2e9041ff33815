"""ARCHITECTURE.md's worked examples are code the tests run: each block under an
``<!-- example: PATH -->`` marker is a contiguous excerpt of that file, and the files are the
plugins and workflow the tests install and run (the engine and its check:
tests/engine_adapters/test_plugin_engine.py; the output format:
tests/cli/test_report_formats.py; the workflow: tests/workflows/test_example_workflow.py)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
ARCHITECTURE = ROOT / "ARCHITECTURE.md"
MARKED = re.compile(r"<!-- example: (?P<path>\S+) -->\n+```[a-z]*\n(?P<code>.*?)\n```", re.S)
KINDS = {
    "an engine": "tests/data/plugins/specseed_tokens_only/__init__.py",
    "a check": "tests/data/plugins/specseed_tokens_only/checks.py",
    "an output format": "tests/data/plugins/specseed_csv_report.py",
    "a workflow": "tests/data/examples/token_streams.py",
}


def _examples() -> list[tuple[str, str]]:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    return [(m["path"], m["code"]) for m in MARKED.finditer(text)]


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


def test_every_worked_example_is_an_excerpt_of_the_file_it_names() -> None:
    examples = _examples()
    assert examples, "ARCHITECTURE.md shows no marked worked example"
    for path, code in examples:
        source = _lines((ROOT / path).read_text(encoding="utf-8"))
        block = _lines(code)
        starts = [
            i for i in range(len(source) - len(block) + 1) if source[i : i + len(block)] == block
        ]
        assert starts, f"ARCHITECTURE.md's example from {path} is not in that file as shown"


def test_an_engine_a_check_an_output_format_and_a_workflow_are_shown() -> None:
    shown = {path for path, _ in _examples()}
    missing = {kind: path for kind, path in KINDS.items() if path not in shown}
    assert not missing, f"ARCHITECTURE.md lacks the worked example of {sorted(missing)}"


def test_an_edited_example_is_caught(tmp_path: Path) -> None:
    """The excerpt rule fails on a block that differs from its file by one line."""
    path, code = _examples()[0]
    source = _lines((ROOT / path).read_text(encoding="utf-8"))
    edited = _lines(code)
    edited[len(edited) // 2] += "  # changed"
    assert not any(
        source[i : i + len(edited)] == edited for i in range(len(source) - len(edited) + 1)
    )
