"""Every command's output and help, as a person sees it at 80 columns and at 200: the same
words in both, so nothing is cut (``step 1, d…``) and no word is split across lines
(``site-pac`` / ``kages``); at 80 columns a line is longer than the terminal only when it is
one word too long to break (a path), never a sentence left unwrapped. Output sent to a pipe
carries no padding at the lines' ends.

Each command runs in-process (``CliRunner``), once at 80 columns as on a terminal and once at
200 into a pipe; the audits among them are the tiny ones (one failing scenario plus one with
long names, one passing scenario, a replay), so the whole file costs a few audits.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from specseed.cli.app import app

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
BOX = re.compile(r"[\u2500-\u257f]")
TERMINAL = {"TTY_COMPATIBLE": "1"}
"""Rich takes CliRunner's output for a terminal (as a person sees it)."""
PIPE = {"TTY_COMPATIBLE": "0"}
NARROW, WIDE = 80, 200

LONG_NAMES = """\
name: a-scenario-whose-name-is-rather-long-indeed
description: long names, as a user's own scenario may have them
defaults: {max_tokens: 3, temperature: 1.0}
requests:
  a-request-with-a-long-descriptive-name: {prompt: [5, 6, 7], seed: 3}
runs:
  - name: the-first-run-of-this-scenario
    requests: [a-request-with-a-long-descriptive-name]
  - name: the-second-run-of-this-scenario
    requests: [a-request-with-a-long-descriptive-name]
expect:
  - check: run-to-run
    runs: [the-first-run-of-this-scenario, the-second-run-of-this-scenario]
"""
FAILING = """\
engine:
  options:
    defects: [neighbor-unseeded]
scenarios: [batch-composition, long.yaml]
"""
INVALID = """\
engine:
  max_draft_len: 99
  options: {bogus: 1, defects: [nope]}
scenarios: [batch-composition, nosuch-scenario]
checks: {skip: [rng-contractt]}
"""
CLEAN = """\
engine: {name: reference}
scenarios: [batch-composition]
"""
UNREACHABLE = """\
engine:
  name: openai
  options: {base_url: "http://127.0.0.1:9", retries: 0, connect_timeout_s: 1}
scenarios: [uptime]
"""


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    copy_text: bool = False
    """Text to copy or parse (YAML, JSON, Markdown, a command): never wrapped, so its long
    lines are whole; the same words at both widths all the same."""


CASES: dict[str, Case] = {
    "audit-failing": Case(("audit", "model.yaml", "--no-progress", "--bundle", "{bundle}")),
    "audit-passing": Case(("audit", "-s", "distinct-seeds", "--no-progress")),
    "audit-unknown-scenario": Case(("audit", "-s", "slot-reuse")),
    "audit-invalid": Case(("audit", "invalid.yaml")),
    "audit-unreachable-server": Case(("audit", "unreachable.yaml", "--no-progress")),
    "check": Case(("check", "bundle")),
    "check-summary": Case(("check", "bundle", "--summary")),
    "report": Case(("report", "bundle", "--no-minimize"), copy_text=True),
    "diff-all": Case(("diff", "--all", "bundle", "bundle")),
    "replay": Case(("replay", "bundle", "--model", "clean.yaml")),
    "init": Case(("init", "{dir}/init.yaml", "--engine", "openai"), copy_text=True),
    "scenarios-list": Case(("scenarios", "list")),
    "scenarios-show": Case(("scenarios", "show", "uptime"), copy_text=True),
    "scenarios-validate": Case(("scenarios", "validate", "long.yaml", "invalid.yaml")),
    "schema": Case(("schema", "--kind", "trace"), copy_text=True),
    "checks": Case(("checks",)),
    "contracts": Case(("contracts",)),
    "engines": Case(("engines",)),
    "formats": Case(("formats",)),
    "doctor": Case(("doctor",)),
    "rng-draws": Case(("rng", "draws", "--seed", "42", "--subsequence", "3", "--offset", "12")),
    "serve-without-its-key": Case(("serve", "--api-key-env", "SPECSEED_TEST_UNSET_KEY_VAR")),
    "make-checkpoint-refused": Case(("make-checkpoint", "model.yaml")),
    "search": Case(("search", "--seed", "0", "-j", "1", "--max-scenarios", "3", "--no-progress")),
}


def _commands() -> dict[str, tuple[tuple[str, ...], Any]]:
    """Every command of the app, groups included, by the words that invoke it."""
    found: dict[str, tuple[tuple[str, ...], Any]] = {}

    def walk(path: tuple[str, ...], command: Any) -> None:
        found[" ".join(path) or "specseed"] = (path, command)
        for name, sub in getattr(command, "commands", {}).items():
            walk((*path, name), sub)

    walk((), typer.main.get_command(app))
    return found


COMMANDS = _commands()
HELP = {name: Case((*path, "--help")) for name, (path, _) in COMMANDS.items()}
# The root's options (--version) and --help/-h are every command's.
GLOBAL_OPTIONS = {"--help"} | {o for p in COMMANDS["specseed"][1].params for o in p.opts}
OUTSIDE_OPTIONS = {"--title", "--body-file"}
"""Another program's, in report's example (gh issue create --title ... --body-file ...)."""


def _options(command: Any) -> set[str]:
    return {
        name
        for param in command.params
        for name in (*param.opts, *param.secondary_opts)
        if name.startswith("--")
    }


def words(text: str) -> Counter[str]:
    """The words a person reads, borders and colours aside; a name's parts apart (a table too
    narrow for its names may list ``scenario/run/request: result`` instead)."""
    parts = re.split(r"[\s/]+", BOX.sub(" ", ANSI.sub("", text)))
    return Counter(p.rstrip(":") for p in parts if p.rstrip(":"))


def run(case: Case, columns: int, where: dict[str, str], folder: Path) -> str:
    bundle = folder / f"bundle-{columns}" if columns != NARROW else folder / "bundle"
    args = [a.format(bundle=bundle, dir=folder / str(columns)) for a in case.args]
    (folder / str(columns)).mkdir(exist_ok=True)
    result = CliRunner().invoke(app, args, env={"COLUMNS": str(columns), **where})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    # The same text at both widths once paths and timings are set aside.
    text = result.output.replace(str(bundle), "BUNDLE").replace(str(folder / str(columns)), "DIR")
    text = re.sub(r"(?<![\d:])\d+:\d\d(?![\d:])", "T", text)  # a clock's m:ss (search)
    # Where the engine's log went: an in-process audit captures fd 2, which other tests' threads
    # in this worker (a session's vLLM engine) may write to; the line is not what this test reads.
    kept, wrapped = [], False
    for line in text.split("\n"):
        plain = ANSI.sub("", line)
        if plain.startswith("The engine's log ("):
            wrapped = not plain.rstrip().endswith(".log")  # the path went on the next line
            continue
        if not wrapped:
            kept.append(line)
        wrapped = False
    text = "\n".join(kept)
    return re.sub(r"\b\d+\.\d+s\b", "T", text)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("commands")
    (folder / "long.yaml").write_text(LONG_NAMES)
    (folder / "model.yaml").write_text(FAILING)
    (folder / "invalid.yaml").write_text(INVALID)
    (folder / "unreachable.yaml").write_text(UNREACHABLE)
    (folder / "clean.yaml").write_text(CLEAN)
    return folder


@pytest.fixture(scope="module")
def rendered(folder: Path) -> Iterator[dict[str, tuple[str, str]]]:
    """Every case at 80 columns on a terminal and at 200 into a pipe, in order (the failing
    audit writes the bundle the later cases read), run in the folder."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.delenv("SPECSEED_TEST_UNSET_KEY_VAR", raising=False)
        yield {
            name: (run(case, NARROW, TERMINAL, folder), run(case, WIDE, PIPE, folder))
            for name, case in {**CASES, **{f"help:{k}": v for k, v in HELP.items()}}.items()
        }


def _check(name: str, case: Case, narrow: str, wide: str) -> None:
    assert narrow.strip(), f"{name}: no output"
    plain = ANSI.sub("", narrow)
    # Nothing cut: no word ends in Rich's ellipsis ("…" alone marks "… 3 more"; a usage's
    # "FILES..." is click's "one or more").
    cut = [w for w in words(plain) if re.search(r"\w…$", w)]
    assert not cut, f"{name}: cut at {NARROW} columns: {cut}\n{plain}"
    # The same words at 80 and at 200 columns: none split, none cut, none dropped.
    split, lost = words(narrow) - words(wide), words(wide) - words(narrow)
    assert not split and not lost, (
        f"{name}: at {NARROW} columns only: {sorted(split)}; at {WIDE} only: {sorted(lost)}"
        f"\n{plain}"
    )
    if not case.copy_text:  # a sentence longer than the terminal was left to it to break
        unwrapped = [
            line
            for line in plain.splitlines()
            if len(line) > NARROW
            and " " in line.strip()
            and not line.strip().startswith("specseed ")  # a command to copy: never broken
        ]
        assert not unwrapped, f"{name}: lines over {NARROW} columns:\n" + "\n".join(unwrapped)
    padded = [line for line in wide.splitlines() if line.endswith(" ")]
    assert not padded, f"{name}: padding at the lines' ends in a pipe: {padded[:3]}"


@pytest.mark.parametrize("name", list(CASES))
def test_command_output_reads_at_80_and_200_columns(
    name: str, rendered: dict[str, tuple[str, str]]
) -> None:
    _check(name, CASES[name], *rendered[name])


@pytest.mark.parametrize("name", list(HELP))
def test_help_reads_at_80_and_200_columns(name: str, rendered: dict[str, tuple[str, str]]) -> None:
    narrow, wide = rendered[f"help:{name}"]
    _check(f"{name} --help", HELP[name], narrow, wide)


@pytest.mark.parametrize("name", list(HELP))
def test_help_names_only_options_that_exist(
    name: str, rendered: dict[str, tuple[str, str]]
) -> None:
    text = rendered[f"help:{name}"][1]
    command = COMMANDS[name][1]
    # An option of another command is named as part of that command's invocation
    # ("written by `specseed audit --bundle DIR`"): it is that command's to have.
    allowed = _options(command) | GLOBAL_OPTIONS | OUTSIDE_OPTIONS
    flat = " ".join(BOX.sub(" ", text).split())
    for other_path, other in COMMANDS.values():
        if other_path and f"specseed {' '.join(other_path)} " in flat and other is not command:
            allowed |= _options(other)
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text))
    assert named <= allowed, f"{name} --help names {named - allowed}:\n{text}"
