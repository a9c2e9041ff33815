"""docs/performance.md cannot drift from the benchmarks: every section on it is written by
the benchmark script it names, and that script can write it (``--write-docs``)."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "performance.md"
BENCHMARKS = ROOT / "benchmarks"
START = re.compile(r"^<!-- bench:([\w-]+) -->$", re.M)
END = re.compile(r"^<!-- /bench:([\w-]+) -->$", re.M)


def _perf_page() -> ModuleType:
    spec = importlib.util.spec_from_file_location("perf_page", BENCHMARKS / "perf_page.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sections() -> list[str]:
    return START.findall(PAGE.read_text(encoding="utf-8"))


def _calls(path: Path) -> set[str]:
    """Names of the functions the script calls anywhere."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }


def test_the_page_has_sections() -> None:
    assert len(_sections()) >= 5


def test_every_section_opens_and_closes_once() -> None:
    text = PAGE.read_text(encoding="utf-8")
    starts, ends = START.findall(text), END.findall(text)
    assert starts == ends
    assert len(set(starts)) == len(starts)
    for name in starts:
        assert text.index(f"<!-- bench:{name} -->") < text.index(f"<!-- /bench:{name} -->")


@pytest.mark.parametrize("name", _sections())
def test_section_names_a_script_that_writes_it(name: str) -> None:
    script = BENCHMARKS / f"{name}.py"
    assert script.is_file(), f"no benchmarks/{name}.py writes the section {name}"
    assert {"add_write_docs", "docs_section"} <= _calls(script)


def test_write_section_replaces_only_its_own_section(tmp_path: Path) -> None:
    perf_page = _perf_page()
    page = tmp_path / "performance.md"
    page.write_text(
        "# P\n\n<!-- bench:a -->\nold a\n<!-- /bench:a -->\n\n<!-- bench:b -->\nold b\n"
        "<!-- /bench:b -->\n"
    )
    perf_page.write_section("a", "new a\n", page)
    perf_page.write_section("c", "new c\n", page)
    assert page.read_text() == (
        "# P\n\n<!-- bench:a -->\nnew a\n<!-- /bench:a -->\n\n<!-- bench:b -->\nold b\n"
        "<!-- /bench:b -->\n\n## c\n\n<!-- bench:c -->\nnew c\n<!-- /bench:c -->\n"
    )


def test_write_docs_keeps_what_the_script_printed_and_the_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    perf_page = _perf_page()
    page = tmp_path / "performance.md"
    page.write_text("<!-- bench:bench_x -->\nold\n<!-- /bench:bench_x -->\n")
    monkeypatch.setattr(perf_page, "PAGE", page)
    monkeypatch.setattr(sys, "argv", ["bench_x.py", "--rounds", "2", "--write-docs"])
    with perf_page.docs_section(str(BENCHMARKS / "bench_x.py")):
        print("1,234 tokens/s")
    text = page.read_text()
    assert "old" not in text
    assert "`python benchmarks/bench_x.py --rounds 2`" in text
    assert "1,234 tokens/s" in text and "Machine: " in text and " cores available" in text
    assert "1,234 tokens/s" in capsys.readouterr().out


def test_a_failing_run_leaves_the_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    perf_page = _perf_page()
    page = tmp_path / "performance.md"
    page.write_text("<!-- bench:bench_x -->\nold\n<!-- /bench:bench_x -->\n")
    monkeypatch.setattr(perf_page, "PAGE", page)
    monkeypatch.setattr(sys, "argv", ["bench_x.py", "--write-docs"])
    with pytest.raises(RuntimeError), perf_page.docs_section("bench_x.py"):
        print("half")
        raise RuntimeError("engine crashed")
    assert "old" in page.read_text()
