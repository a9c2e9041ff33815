"""The ``specseed`` entry point: light to import, and it starts the workers' server early
only for an audit that runs on workers."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from specseed.cli.entry import starts_workers


@pytest.mark.parametrize(
    "argv",
    [
        ["audit"],
        ["audit", "--jobs", "2"],
        ["audit", "-j", "auto", "--no-progress"],
        ["audit", "--jobs=4", "--json", "out.json", "--junit=report.xml"],
        ["audit", "--report", "junit=report.xml", "--report=json=-"],
        ["audit", "--summary", "--engine-log", "engine.log", "--bundle", "b", "--force"],
        ["audit", "--matrix"],
        ["audit", "--matrix", "-s", "uptime", "--jobs", "2"],
    ],
)
def test_an_audit_on_workers_starts_the_server_early(argv: list[str]) -> None:
    assert starts_workers(argv)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["bundle", "check", "b"],
        ["audit", "model.yaml"],  # another engine's audit: the command decides
        ["audit", "--jobs", "1"],
        ["audit", "-j", " 1"],
        ["audit", "--jobs=1", "--matrix"],
        ["audit", "-s", "uptime"],  # one scenario: one process
        ["audit", "--scenario=uptime", "--scenario", "warmup"],
        ["audit", "--shard", "1/2"],
        ["audit", "--json"],  # a missing value: the command says so
        ["audit", "--report"],
        ["audit", "--report", "json=-", "-s", "uptime"],
        ["audit", "--jobs"],
        ["audit", "--help"],
        ["audit", "-j1"],  # a form this does not read: left to the command
        ["audit", "--unknown-flag"],
        ["--version", "audit"],
    ],
)
def test_anything_else_leaves_the_decision_to_the_audit_command(argv: list[str]) -> None:
    assert not starts_workers(argv)


def test_the_console_script_imports_only_the_light_entry_point() -> None:
    # Workers import the console script again: what it imports at its top level, each of
    # them imports (tests/test_parallel.py holds that for the workers of a real audit).
    (script,) = entry_points(group="console_scripts", name="specseed")  # as installed
    module, function = script.module, script.attr
    assert (module, function) == ("specseed.cli.entry", "main")
    heavy = ("typer", "rich", "torch", "pydantic", "specseed.cli.app")
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys, {module}; print([m for m in {heavy!r} if m in sys.modules])",
        ],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert probe.stdout.strip() == "[]", probe.stdout + probe.stderr


def test_the_exit_lists_no_leaks_of_an_engine_package() -> None:
    # The command freezes the heap at exit (the final collections would walk torch's
    # objects); where an engine's package checks for leaks at exit (triton, installed with
    # vLLM's CPU build: nanobind lists every object of its still alive), a frozen heap
    # left its objects alive, and a vLLM audit ended in thirty lines of leak report.
    pytest.importorskip("triton")
    done = subprocess.run(
        [
            sys.executable, "-c",
            "import sys, torch, triton\n"
            "from specseed.cli.app import main\n"
            "sys.argv = ['specseed', '--version']\n"
            "main()\n",
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "specseed" in done.stdout
    assert "leaked" not in done.stderr, done.stderr
