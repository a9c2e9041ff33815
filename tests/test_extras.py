"""A test folder whose optional extra is missing skips with the reason (``tests/extras.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("tests/server", "tests/engine_adapters/openai")
"""The folders that need the http extra (their ``__init__`` says so)."""


def test_a_missing_http_extra_skips_its_tests_with_the_reason(tmp_path: Path) -> None:
    """Without httpx/fastapi/uvicorn the http-extra folders skip instead of failing collection
    (``pytest -m gpu`` on a GPU machine without the extra)."""
    for name in ("httpx", "fastapi", "uvicorn"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(
            f'raise ModuleNotFoundError("no module named {name}", name={name!r})\n'
        )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--collect-only",
            *FOLDERS,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert "error" not in out.lower(), out
    assert "needs the http extra (httpx is missing): pip install -e '.[http]'" in out, out
