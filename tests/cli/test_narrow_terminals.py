"""Text to copy at 40 and 80 columns, on a terminal and into a pipe: never wrapped.

Every command's output and help at 80 and 200 columns (nothing cut or split, help naming only
options that exist, no padding in a pipe) is test_every_command_at_80_columns.py's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from specseed.cli.app import app
from specseed.scenarios.loader import library_text

runner = CliRunner()
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# TTY_COMPATIBLE=1 makes Rich treat CliRunner's stdout as a terminal (colour, width).
TERMINAL = {"TTY_COMPATIBLE": "1"}
PIPE = {"TTY_COMPATIBLE": "0"}


def plain(text: str) -> str:
    return ANSI.sub("", text)


@pytest.mark.parametrize("columns", ["40", "80"])
@pytest.mark.parametrize("where", [TERMINAL, PIPE], ids=["terminal", "pipe"])
def test_scenarios_show_prints_yaml_that_parses_unwrapped(columns: str, where: dict) -> None:
    result = runner.invoke(app, ["scenarios", "show", "uptime"], env={"COLUMNS": columns, **where})
    assert result.exit_code == 0, result.output
    shown = plain(result.output)
    assert shown.rstrip("\n") == library_text("uptime").rstrip("\n")
    assert yaml.safe_load(shown) == yaml.safe_load(library_text("uptime"))


@pytest.mark.parametrize("columns", ["40", "80"])
@pytest.mark.parametrize("where", [TERMINAL, PIPE], ids=["terminal", "pipe"])
def test_init_prints_the_command_to_run_on_one_line(
    columns: str, where: dict, tmp_path: Path
) -> None:
    path = tmp_path / "a-rather-long-directory-name" / "model.yaml"
    path.parent.mkdir()
    result = runner.invoke(app, ["init", str(path)], env={"COLUMNS": columns, **where})
    assert result.exit_code == 0, result.output
    assert plain(result.output) == f"wrote {path}; run: specseed audit {path}\n"


@pytest.mark.parametrize("columns", ["40", "80"])
def test_schema_prints_json_that_parses(columns: str) -> None:
    result = runner.invoke(
        app, ["schema", "--kind", "scenario"], env={"COLUMNS": columns, **TERMINAL}
    )
    assert result.exit_code == 0, result.output
    assert json.loads(plain(result.output))["title"]
