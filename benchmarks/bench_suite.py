"""Wall time of the test suite as the README's test command runs it (``pytest -q``).

Runs pytest in a child process from the repository root (extra arguments are passed to it,
e.g. ``-m "not vllm"``) and prints its summary line and the wall time. It does not time the
install: on a fresh clone with pip's cache warm, add what ``pip install`` took yourself.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from perf_page import add_write_docs, docs_section

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest after -q")
    add_write_docs(parser)
    args = parser.parse_args()
    command = [sys.executable, "-m", "pytest", "-q", *args.pytest_args]
    started = time.perf_counter()
    proc = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, env=os.environ, check=False
    )
    seconds = time.perf_counter() - started
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    summary = lines[-1] if lines else "(no output)"
    minutes, rest = divmod(round(seconds), 60)
    print(f"pytest -q {' '.join(args.pytest_args)}".rstrip() + f": exit {proc.returncode}")
    print(f"summary: {summary}")
    print(f"wall time: {minutes} min {rest} s ({seconds:.1f} s)")


if __name__ == "__main__":
    with docs_section(__file__):
        main()
