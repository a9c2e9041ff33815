"""A stdout that cannot take what a command prints: full (``> /dev/full``), closed (``>&-``)
or of a narrow encoding (``PYTHONIOENCODING=ascii``). Each command ends with a message and
exit 5 (an output that could not be written) or its own code, never a traceback, and the
files it was asked for are written.

In process: ``sys.stdout`` is pointed at /dev/full, None or an ASCII stream, as the
interpreter sets it for those shells, and the console script's ``main`` runs."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

import pytest

from specseed.cli.app import main

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")


@contextmanager
def stdout_on(stream: TextIO | None) -> Iterator[None]:
    """``sys.stdout`` is ``stream`` inside the block (set in the test's body: pytest sets its
    own capture again between a fixture and the test)."""
    saved = sys.stdout
    sys.stdout = stream  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout = saved


def full() -> TextIO:
    return open("/dev/full", "w", encoding="utf-8")


def run(*args: str) -> int:
    """The console script on ``args``: its exit code."""
    sys.argv = ["specseed", *args]
    with pytest.raises(SystemExit) as caught:
        main()
    code = caught.value.code
    return code if isinstance(code, int) else (0 if code is None else 1)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("b") / "bundle"
    sys_argv = sys.argv
    try:
        assert run("audit", "--no-progress", "-s", "reproducibility", "--bundle", str(root)) == 0
    finally:
        sys.argv = sys_argv
    return root


@pytest.mark.parametrize(
    "args",
    [
        ("scenarios", "list"),
        ("scenarios", "show", "uptime"),
        ("schema", "--kind", "trace"),
        ("checks",),
        ("--version",),
        ("rng", "draws", "--seed", "1", "--subsequence", "0", "--offset", "0", "--json"),
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_a_full_stdout_is_exit_5_with_a_message(
    args: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with full() as stream, stdout_on(stream):
        assert run(*args) == 5
    err = capsys.readouterr().err
    assert "cannot write" in err and "stdout" in err and "No space left" in err
    assert "Traceback" not in err


def test_report_and_check_json_to_a_full_stdout(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A fresh stream each: a failed one is silenced (pointed at /dev/null) for the exit.
    with full() as stream, stdout_on(stream):
        assert run("report", str(bundle), "--no-minimize") == 5
    with full() as stream, stdout_on(stream):
        assert run("check", str(bundle), "--json", "-") == 5
    err = capsys.readouterr().err
    assert err.count("cannot write the output to stdout: No space left on device") == 2
    assert "PASS" in err  # check's terminal report went to stderr, whole


def test_an_audit_with_json_on_a_full_stdout_is_exit_5_not_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with full() as stream, stdout_on(stream):
        assert run("audit", "--no-progress", "-s", "distinct-seeds", "--json", "-") == 5
    err = capsys.readouterr().err
    assert "cannot write the JSON report to stdout: No space left on device" in err
    assert "Traceback" not in err


def test_a_closed_stdout_loses_no_file_and_no_document_silently(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "r.json"
    with stdout_on(None):  # what Python sets for `specseed ... >&-`
        # The terminal report goes nowhere, as with > /dev/null; the file is written.
        assert run("audit", "--no-progress", "-s", "distinct-seeds", "--json", str(report)) == 0
        # A document asked for on stdout cannot be: exit 5, said on stderr.
        assert run("report", str(bundle), "--no-minimize") == 5
    assert json.loads(report.read_text())["verdict"] == "pass"
    assert "cannot write the output to stdout: it is closed" in capsys.readouterr().err


def test_an_ascii_stdout_takes_every_report(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    buffer = io.BytesIO()
    ascii_stream = io.TextIOWrapper(buffer, encoding="ascii")
    with stdout_on(ascii_stream):
        assert run("check", str(bundle)) == 0
        assert run("report", str(bundle), "--no-minimize") == 0
        assert run("checks") == 0  # its lines hold "·"
    ascii_stream.flush()
    shown = buffer.getvalue().decode("ascii")
    assert "PASS" in shown and "### Environment" in shown and "\\xb7 targets" in shown
    assert "Traceback" not in capsys.readouterr().err
