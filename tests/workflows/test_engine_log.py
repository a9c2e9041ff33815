"""The engine's log goes to a file during the runs (issue 19), specseed's own output does not;
without a bundle or ``--engine-log`` an audit sends it to a temporary file it names at the
end, and ``--engine-log -`` leaves it on the terminal.

Real file descriptors and the real ``vllm`` logger name (no vLLM needed: the logger is only
a name); pytest's own fd capture shows what reached the terminal.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from specseed.engine_adapters.base import EngineSettings, RunPlan
from specseed.engine_adapters.reference.adapter import ReferenceEngine
from specseed.traces.records import TraceRecorder
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


# -- where an audit sends it by default ---------------------------------------------------


class _LoggingEngine(ReferenceEngine):
    """The reference engine, writing as in-process engines do: to descriptor 2 and to the
    ``vllm`` logger, on every run."""

    @staticmethod
    def _log() -> None:
        os.write(2, b"engine stderr line\n")
        logging.getLogger("vllm").warning("engine logger line")

    def serve(self, plan: RunPlan, recorder: TraceRecorder) -> dict[str, tuple[int, ...]]:
        self._log()
        return super().serve(plan, recorder)

    def serve_side_by_side(self, runs: Sequence[tuple[RunPlan, TraceRecorder]]) -> list[Any]:
        self._log()
        return super().serve_side_by_side(runs)


def _audit(adapter: ReferenceEngine, **outputs: Any) -> None:
    from specseed.plan.resolve import resolve_audit
    from specseed.scenarios.schema import AuditConfig
    from specseed.workflows.audit import Audit
    from specseed.workflows.outputs import AuditOutputs

    config = AuditConfig(scenarios=["distinct-seeds"])
    resolved = resolve_audit(config, base_dir=Path.cwd())
    Audit(resolved, AuditOutputs(progress=False, **outputs), adapter=adapter).run()


@pytest.fixture
def temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder, emptied for the test: what an audit leaves there is seen."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture(scope="module")
def settings() -> EngineSettings:
    return EngineSettings()


def _audit_alone(engine: str, folder: Path) -> tuple[str, str]:
    """``_audit`` of ``engine`` (a class of this module) with ``folder`` as the temporary
    folder, in a process of its own: what counts lines must not see another test's stray
    writes to file descriptor 2 (a logger or thread left by an earlier test in the worker)."""
    import subprocess

    code = (
        "import tempfile, sys; tempfile.tempdir = sys.argv[1]\n"
        "from tests.workflows.test_engine_log import _audit, _LoggingEngine, ReferenceEngine\n"
        "from specseed.engine_adapters.base import EngineSettings\n"
        f"_audit({engine}(EngineSettings()), terminal=True)\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
    done = subprocess.run(
        [sys.executable, "-c", code, str(folder)],
        capture_output=True, text=True, timeout=300, check=False, cwd=root, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, done.stderr


def test_without_a_bundle_the_engine_log_goes_to_a_temporary_file_named_at_the_end(
    temporary: Path,
) -> None:
    out, err = _audit_alone("_LoggingEngine", temporary)
    assert "engine stderr line" not in out + err and "engine logger line" not in out + err
    logs = list(temporary.glob("specseed-engine-*.log"))
    assert len(logs) == 1
    text = logs[0].read_text()
    assert "engine stderr line" in text and "engine logger line" in text
    assert f"The engine's log (2 lines) is in {logs[0]}" in " ".join(err.split())


def test_engine_log_dash_shows_it_live(
    temporary: Path, settings: EngineSettings, capfd: pytest.CaptureFixture[str]
) -> None:
    _audit(_LoggingEngine(settings), terminal=True, engine_log=Path("-"))
    err = capfd.readouterr().err
    assert "engine stderr line" in err and "engine log" not in err.lower()
    assert not list(temporary.iterdir())


def test_an_engine_that_logs_nothing_leaves_no_file_and_no_note(temporary: Path) -> None:
    _out, err = _audit_alone("ReferenceEngine", temporary)
    assert "engine's log" not in err
    assert not list(temporary.iterdir())


def test_with_a_bundle_the_log_is_the_bundles(
    tmp_path: Path, temporary: Path, settings: EngineSettings, capfd: pytest.CaptureFixture[str]
) -> None:
    _audit(_LoggingEngine(settings), terminal=True, bundle=tmp_path / "bundle")
    assert "engine stderr line" in (tmp_path / "bundle" / "engine.log").read_text()
    err = capfd.readouterr().err
    assert "engine stderr line" not in err and "engine's log" not in err
    assert not list(temporary.iterdir())
