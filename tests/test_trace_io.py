"""The JSONL trace on disk when writing goes wrong: a cut last line reads as truncation, a
corrupt line in the middle is refused, a run that never wrote leaves no file, and a write
failure reaches the recorder as a ``TraceWriteError``, not as an exception in the engine."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from specseed.core.errors import TraceWriteError
from specseed.traces.records import (
    RunEnd,
    RunHeader,
    TraceRecorder,
    TraceWriter,
    load_trace,
    read_trace,
)

TRACES = Path(__file__).parent / "data" / "traces"


def _lines() -> list[str]:
    path = next(TRACES.rglob("*.jsonl"))
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def test_a_cut_last_line_reads_as_a_truncated_run() -> None:
    lines = _lines()
    whole = read_trace(lines)
    cut = read_trace([*lines[:3], lines[3][: len(lines[3]) // 2]])
    assert cut.end.failure is not None
    assert cut.end.failure.exception == "TraceTruncated"
    assert "cut line" in cut.end.failure.message
    assert cut.steps == whole.steps[:2]


def test_a_bad_line_in_the_middle_is_refused() -> None:
    lines = _lines()
    with pytest.raises(ValueError, match="line 3: not a JSON record"):
        read_trace([*lines[:2], lines[2][:10] + "\n", *lines[3:]])


def _header() -> RunHeader:
    return read_trace(_lines()).header


def test_a_writer_that_never_wrote_leaves_no_file(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path / "s" / "r.jsonl")
    writer.close()
    assert not (tmp_path / "s").exists()


def test_a_write_failure_stops_the_file_not_the_run(tmp_path: Path) -> None:
    (tmp_path / "s").write_text("a file where the folder should be")
    recorder = TraceRecorder(TraceWriter(tmp_path / "s" / "r.jsonl"))
    recorder.header(_header())  # does not raise: the engine must not see the disk
    assert isinstance(recorder.write_error, TraceWriteError)
    assert "cannot create the folder" in recorder.write_error.message
    for step in read_trace(_lines()).steps[:2]:
        recorder.step(step)
    trace = recorder.end(RunEnd(outputs={}))
    assert len(trace.steps) == 2 and recorder.written_steps == 0


def test_a_whole_trace_round_trips(tmp_path: Path) -> None:
    original = read_trace(_lines())
    recorder = TraceRecorder(TraceWriter(tmp_path / "r.jsonl"))
    recorder.header(original.header)
    for step in original.steps:
        recorder.step(step)
    recorder.end(original.end)
    recorder.close()
    assert recorder.write_error is None
    assert load_trace(tmp_path / "r.jsonl") == original


def test_a_1_0_header_reads_with_the_engines_own_keys_as_options() -> None:
    header = read_trace(_lines()).header
    assert header.schema_version == "1.0"
    config = header.engine_config
    assert (config.name, config.max_draft_len, config.max_num_requests) == ("reference", 3, 8)
    assert config.options == {
        "model_seed": 0,
        "rng_profile": "ideal",
        "defects": ["overlap-window-reuse"],
    }
    assert config.contract == header.contract == "ideal"


def test_a_header_is_written_with_the_engine_config_in_its_order(tmp_path: Path) -> None:
    from specseed.engine_adapters.base import EngineSettings

    written = dataclasses.replace(_header(), engine_config=EngineSettings().record())
    writer = TraceWriter(tmp_path / "r.jsonl")
    writer.header(written)
    writer.close()
    line = json.loads((tmp_path / "r.jsonl").read_text())
    assert list(line["engine_config"]) == [
        "name",
        "device",
        "max_num_requests",
        "max_draft_len",
        "verification",
        "overlap_scheduler",
        "checkpoint",
        "draft_checkpoint",
        "contract",
        "options",
    ]
    assert line["engine_config"]["options"] == {}
    assert load_trace(tmp_path / "r.jsonl").header == written
