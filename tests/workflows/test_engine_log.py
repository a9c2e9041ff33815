"""The engine's log goes to a file during the runs (issue 19), specseed's own output does not.

Real file descriptors and the real ``vllm`` logger name (no vLLM needed: the logger is only
a name); pytest's own fd capture shows what reached the terminal.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

from specseed.workflows.engine_log import capture_engine_log


def test_engine_stderr_and_vllm_logger_go_to_the_file_and_specseed_keeps_the_terminal(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "bundle" / "engine.log"
    logger = logging.getLogger("vllm")
    before = list(logger.handlers)
    with capture_engine_log(log) as terminal:
        assert terminal is not None
        os.write(2, b"C++ engine line\n")
        print("python engine line", file=sys.stderr, flush=True)
        logger.info("vllm info line")
        terminal.write("specseed: [1/1] done\n")
        terminal.flush()
    text = log.read_text()
    assert "C++ engine line" in text and "python engine line" in text
    assert "vllm info line" in text
    seen = capfd.readouterr().err
    assert "specseed: [1/1] done" in seen
    assert "engine line" not in seen and "vllm info line" not in seen
    assert logger.handlers == before  # put back as it was
    os.write(2, b"after\n")
    assert "after" in capfd.readouterr().err and "after" not in log.read_text()


def test_no_path_changes_nothing() -> None:
    with capture_engine_log(None) as terminal:
        assert terminal is None


def test_a_key_the_engine_logs_is_removed_from_the_file(tmp_path: Path) -> None:
    from specseed.core import secrets

    key = "sk-engine-log-4f1c9e2b7d"
    secrets.hold(key)
    log = tmp_path / "engine.log"
    with capture_engine_log(log):
        os.write(2, f"connecting with key {key} to http://u:pw-9@host/v1\n".encode())
    text = log.read_text()
    assert "connecting with key" in text
    assert key not in text and "pw-9" not in text


def test_a_full_disk_loses_log_lines_never_the_audit(tmp_path: Path) -> None:
    """An engine that logs more than the disk holds (vLLM's start-up lines into a bundle on a
    small disk): writes through sys.stderr, the engine's logger and the final close must not
    raise into the audit."""
    import subprocess

    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(small)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        with capture_engine_log(small / "engine.log") as terminal:
            assert terminal is not None
            for _ in range(200):
                sys.stderr.write("x" * 100 + "\n")
                logging.getLogger("vllm").warning("y" * 100)
        assert 0 < (small / "engine.log").stat().st_size <= 8192
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)
