"""What a person sees at 40 and 80 columns: text to copy is never wrapped, help names only
options that exist and cuts nothing, and output to a pipe carries no trailing spaces."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
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


def _commands() -> list[tuple[list[str], Any]]:
    """Every command of the app, groups included, with the words that invoke it."""
    found: list[tuple[list[str], Any]] = []

    def walk(path: list[str], command: Any) -> None:
        found.append((path, command))
        for name, sub in getattr(command, "commands", {}).items():
            walk([*path, name], sub)

    walk([], typer.main.get_command(app))
    return found


COMMANDS = _commands()
# The root's options (--version) and --help/-h are every command's.
GLOBAL_OPTIONS = {"--help"} | {o for p in COMMANDS[0][1].params for o in p.opts}
# Another program's, in report's example (gh issue create --title ... --body-file ...).
OUTSIDE_OPTIONS = {"--title", "--body-file"}


def _options(command: Any) -> set[str]:
    return {
        name
        for param in command.params
        for name in (*param.opts, *param.secondary_opts)
        if name.startswith("--")
    }


@pytest.mark.parametrize(
    ("path", "command"), COMMANDS, ids=[" ".join(p) or "specseed" for p, _ in COMMANDS]
)
def test_help_names_only_options_that_exist_and_cuts_nothing(path: list[str], command: Any) -> None:
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80", **PIPE})
    assert result.exit_code == 0, result.output
    text = result.output
    # An option of another command is named as part of that command's invocation
    # ("written by `specseed audit --bundle DIR`"): it is that command's to have.
    allowed = _options(command) | GLOBAL_OPTIONS | OUTSIDE_OPTIONS
    flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())
    for other_path, other in COMMANDS[1:]:
        if f"specseed {' '.join(other_path)} " in flat and other is not command:
            allowed |= _options(other)
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text))
    assert named <= allowed, f"{' '.join(path)} --help names {named - allowed}:\n{text}"
    for line in text.splitlines():
        row = line.strip().strip("│").rstrip()
        assert not row.endswith("…"), f"cut at 80 columns: {line!r}"
        assert not row.endswith("...") or "Usage:" in line or "[ARGS]" in line, line


FAILING_MODEL_YAML = """\
engine:
  options:
    defects: [neighbor-unseeded]
scenarios: [batch-composition]
"""


@pytest.mark.parametrize("failing", [False, True], ids=["passing", "failing"])
def test_audit_output_to_a_pipe_carries_no_trailing_spaces(
    failing: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    if failing:
        Path("model.yaml").write_text(FAILING_MODEL_YAML)
        args = ["audit", "model.yaml", "--no-progress"]
    else:
        args = ["audit", "-s", "uptime", "--no-progress"]
    result = runner.invoke(app, args, env={"COLUMNS": "80", **PIPE})
    assert result.exit_code == (1 if failing else 0), result.output
    padded = [line for line in result.output.splitlines() if line.endswith(" ")]
    assert not padded, "\n".join(repr(line) for line in padded)
