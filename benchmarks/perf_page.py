"""docs/performance.md from the benchmarks: each script rewrites its own section with what it
measured and the machine it measured it on.

A benchmark script adds the flag and runs its ``main`` inside ``docs_section``:

    parser.add_argument(...)
    add_write_docs(parser)
    args = parser.parse_args()
    ...
    if __name__ == "__main__":
        with docs_section(__file__):
            main()

With ``--write-docs`` everything the script prints still goes to the terminal and is also kept;
when ``main`` returns, the section between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``
(NAME = the script's file name without ``.py``) is replaced by the machine, the command and that
output. A run that fails, or is interrupted, leaves the page as it was. A script whose section
is not on the page yet gets one at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import os
import platform
import re
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import TextIO

PAGE = Path(__file__).resolve().parents[1] / "docs" / "performance.md"
FLAG = "--write-docs"


def add_write_docs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        FLAG,
        action="store_true",
        help="also rewrite this script's section of docs/performance.md with the figures it "
        "prints and this machine",
    )


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (the platform's processor string elsewhere)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine() -> str:
    """One line naming where the figures come from: CPU, cores, torch, GPU, date."""
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = "not installed"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    gpu = ""
    if "torch" in sys.modules:  # only when the benchmark itself imported torch
        cuda = sys.modules["torch"].cuda
        if cuda.is_available():
            gpu = f", GPU {cuda.get_device_name(0)}"
    today = datetime.date.today().isoformat()
    return (
        f"{cpu_model()}, {cores} cores available, {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}, torch {torch}{gpu}; {today}"
    )


def markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"


def render(command: str, output: str) -> str:
    return f"Machine: {machine()}.\n\n`{command}`:\n\n```text\n" + output.rstrip() + "\n```\n"


def write_section(name: str, body: str, page: Path | None = None) -> None:
    """Replace NAME's section of the page with ``body`` (a new section at the end if none)."""
    page = page or PAGE
    start, end = markers(name)
    text = page.read_text(encoding="utf-8")
    section = f"{start}\n{body.rstrip()}\n{end}"
    pattern = re.compile("^" + re.escape(start) + r"$.*?^" + re.escape(end) + "$", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text, count=1)
    else:
        text = text.rstrip() + f"\n\n## {name}\n\n{section}\n"
    page.write_text(text, encoding="utf-8")


class _Tee(io.TextIOBase):
    def __init__(self, terminal: TextIO, kept: io.StringIO) -> None:
        self.terminal = terminal
        self.kept = kept

    def write(self, text: str) -> int:
        self.kept.write(text)
        return self.terminal.write(text)

    def flush(self) -> None:
        self.terminal.flush()


@contextlib.contextmanager
def docs_section(script: str) -> Iterator[None]:
    """Run the block; with ``--write-docs`` on the command line, write what it printed."""
    if FLAG not in sys.argv[1:]:
        yield
        return
    kept = io.StringIO()
    with contextlib.redirect_stdout(_Tee(sys.stdout, kept)):
        yield
    name = Path(script).stem
    shown = [arg for arg in sys.argv[1:] if arg != FLAG]
    command = " ".join(["python", f"benchmarks/{name}.py", *shown])
    write_section(name, render(command, kept.getvalue()))
    print(f"wrote the {name} section of {PAGE}", file=sys.stderr)
