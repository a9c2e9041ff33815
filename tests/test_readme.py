"""README.md stays true: its commands are the ones CI runs, every output it shows is what the
command prints today, and the documentation under docs/ names what the code has."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from specseed.checks import CHECKS
from specseed.core.defects import DEFECT_IDS
from specseed.engine_adapters.contracts import CONTRACT_NAMES
from specseed.scenarios.loader import library_names
from specseed.scenarios.schema import EngineConfig

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"
# An output block: the command that prints it, then the block.
OUTPUT = re.compile(r"<!-- output of: (?P<command>.+?) -->\n```\n(?P<block>.*?)```", re.S)


def _code_blocks(text: str) -> list[str]:
    """The fenced blocks of a Markdown text, fences paired in order."""
    blocks: list[str] = []
    block: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("```"):
            if block is None:
                block = []
            else:
                blocks.append("\n".join(block))
                block = None
        elif block is not None:
            block.append(line)
    return blocks


def _code_lines() -> list[str]:
    return [line.strip() for block in _code_blocks(README) for line in block.splitlines()]


def _docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md")))


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = next(line for line in _code_lines() if line.endswith("pytest -q"))
    assert command in ci


def test_readme_has_the_install_and_audit_command() -> None:
    assert any(line.endswith("&& specseed audit") for line in _code_lines())


def test_readme_reads_in_five_minutes() -> None:
    assert len(README.splitlines()) <= 250


def test_docs_name_every_check_defect_contract_field_and_scenario() -> None:
    docs = _docs_text()
    names = [*CHECKS, *DEFECT_IDS, *CONTRACT_NAMES, *EngineConfig.model_fields, *library_names()]
    missing = [name for name in names if f"`{name}`" not in docs and f"{name}:" not in docs]
    assert not missing


def test_docs_list_every_command() -> None:
    from specseed.cli.app import app

    names = list(getattr(typer.main.get_command(app), "commands", {}))
    assert "audit" in names and "serve" in names
    commands = (DOCS / "commands.md").read_text(encoding="utf-8")
    assert [name for name in names if f"| `specseed {name}" not in commands] == []


def test_ci_runs_the_lint_type_and_docs_checks_after_the_tests() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    development = (DOCS / "development.md").read_text(encoding="utf-8")
    assert "set -euo pipefail" in ci
    tests_at = ci.index("pytest -q")
    for command in (
        "ruff check src tests",
        "ruff format --check src tests",
        "mypy",
        "mkdocs build --strict",
    ):
        assert f"`{command}`" in development
        assert command in ci[tests_at:], command


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="needs mkdocs")
def test_docs_build_strict(tmp_path: Path) -> None:
    """A broken link or a page left out of the navigation fails the build."""
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


# A logits fingerprint pair: hashes of float32 bits, which follow the CPU's matrix kernels (an
# AVX-512 Xeon and an AMD EPYC give other bits for the same tokens).
FINGERPRINTS = re.compile(r"fingerprint: (?P<a>[0-9a-f]{16}) vs (?P<b>[0-9a-f]{16})")


def _normalise(text: str) -> str:
    """The output with trailing blanks removed and what follows the machine replaced: the
    header's duration (and worker count, which follows its CPUs), and each logits fingerprint
    by its rank of first appearance, so that which fingerprints are equal still counts. The
    header is joined into one line first, as a longer duration can move where it wraps."""
    lines = [line.rstrip() for line in text.strip("\n").splitlines()]
    end = next(i for i, line in enumerate(lines) if line.startswith("Verdict:"))
    header = " ".join(lines[:end])
    header = re.sub(r" in \d+(\.\d+)?s( on \d+ workers)?", " in <duration>", header)
    seen: dict[str, str] = {}

    def ranks(match: re.Match[str]) -> str:
        a, b = (seen.setdefault(match[side], f"<{len(seen) + 1}>") for side in "ab")
        return f"fingerprint: {a} vs {b}"

    return FINGERPRINTS.sub(ranks, "\n".join([header, *lines[end:]]))


def test_normalising_keeps_which_fingerprints_are_equal() -> None:
    def shown(*pairs: tuple[str, str]) -> str:
        lines = [f"logits fingerprint: {a * 16} vs {b * 16}" for a, b in pairs]
        return "\n".join(["specseed audit: 1 run in 2.0s", "Verdict: x", *lines])

    assert _normalise(shown(("a", "a"), ("b", "a"))) == _normalise(shown(("c", "c"), ("d", "c")))
    assert _normalise(shown(("a", "a"))) != _normalise(shown(("a", "b")))
    assert _normalise(shown(("a", "a"), ("b", "b"))) != _normalise(shown(("a", "a"), ("a", "a")))


def _yaml_before(position: int) -> str:
    blocks = list(re.finditer(r"```yaml\n(.*?)```", README[:position], re.S))
    assert blocks, "no model.yaml shown before the command that reads it"
    return blocks[-1].group(1)


def test_readme_shows_outputs() -> None:
    assert len(OUTPUT.findall(README)) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("shown", list(OUTPUT.finditer(README)), ids=lambda m: m.group("command"))
def test_readme_output_is_what_the_command_prints(shown: re.Match[str], tmp_path: Path) -> None:
    """Regenerate a block: run its command at COLUMNS=80 in a folder holding the model.yaml
    shown above it, and paste stdout with trailing blanks stripped."""
    words = shlex.split(shown.group("command"))
    assert words[0] == "specseed"
    if "model.yaml" in words:
        (tmp_path / "model.yaml").write_text(_yaml_before(shown.start()), encoding="utf-8")
    env = {**os.environ, "COLUMNS": "80"}
    proc = subprocess.run(
        [sys.executable, "-m", "specseed", *words[1:]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert _normalise(proc.stdout) == _normalise(shown.group("block"))
