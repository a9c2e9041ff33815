"""README.md stays true: its commands are the ones CI runs, and it names what the code has."""

from __future__ import annotations

import re
from pathlib import Path

from specseed.checks import CHECKS
from specseed.core.contracts import CONTRACT_NAMES
from specseed.core.defects import DEFECT_IDS
from specseed.scenarios.loader import library_names
from specseed.scenarios.schema import EngineConfig

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _code_lines() -> list[str]:
    return [
        line.strip()
        for line in re.findall(r"```\n(.*?)```", README, re.S)
        for line in line.splitlines()
    ]


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = next(line for line in _code_lines() if line.endswith("pytest -q"))
    assert command in ci


def test_readme_has_the_install_and_audit_command() -> None:
    assert any(line.endswith("&& specseed audit") for line in _code_lines())


def test_readme_names_every_check_defect_contract_field_and_scenario() -> None:
    names = [*CHECKS, *DEFECT_IDS, *CONTRACT_NAMES, *EngineConfig.model_fields, *library_names()]
    missing = [name for name in names if f"`{name}`" not in README and f"{name}:" not in README]
    assert not missing


def test_ci_runs_the_lint_and_type_checks_after_the_tests() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "set -euo pipefail" in ci
    tests_at = ci.index("pytest -q")
    for command in ("ruff check src tests", "ruff format --check src tests", "mypy"):
        assert f"`{command}`" in README
        assert command in ci[tests_at:], command
