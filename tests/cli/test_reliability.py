"""Nothing lost, run for real: signals, a full disk, a closed stdout, two audits on one
trace folder. Each case runs ``python -m specseed audit`` as a subprocess and asserts its exit
code, its message, that every file it left is whole, and that no traceback appears.

The "full disk" is a file size limit (``RLIMIT_FSIZE``) set in the child before it starts:
writes past it fail with EFBIG, a real failure of the write path (Python ignores SIGXFSZ).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from specseed.traces.records import load_trace

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SLOW_REQUESTS = 48


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["COLUMNS"] = "100"
    return env


def specseed(
    *args: str,
    stdout: int | None = subprocess.PIPE,
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "specseed", "audit", *args],
        cwd=ROOT,
        env=_env(),
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=preexec_fn,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 300) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out or "", err


def slow_model(tmp_path: Path) -> Path:
    """distinct-seeds (quick), then a scenario long enough to be interrupted in its first run."""
    names = [f"r{i}" for i in range(SLOW_REQUESTS)]
    requests = "\n".join(
        f"  {n}: {{prompt: [{i + 3}, 7, 11], seed: {i + 1}}}" for i, n in enumerate(names)
    )
    (tmp_path / "slow.yaml").write_text(
        "name: slow\ndescription: long enough to interrupt\n"
        "defaults: {max_tokens: 48, temperature: 1.0}\n"
        f"requests:\n{requests}\n"
        f"runs:\n  - name: first\n    requests: [{', '.join(names)}]\n"
        f"  - name: second\n    requests: [{', '.join(names)}]\n"
    )
    path = tmp_path / "model.yaml"
    path.write_text("engine: {max_num_requests: 4}\nscenarios: [distinct-seeds, slow.yaml]\n")
    return path


def wait_for_lines(path: Path, lines: int, proc: subprocess.Popen[str], limit: float = 240) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count("\n") >= lines:
            return
        assert proc.poll() is None, f"the audit ended before {path} had {lines} lines"
        time.sleep(0.05)
    raise AssertionError(f"{path} never reached {lines} lines")


def assert_whole_jsonl(path: Path) -> list[dict[str, object]]:
    """Every line of a trace is one complete JSON record."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records and records[0]["record"] == "header"
    return records


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_keeps_the_evidence_and_reports_what_finished(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    traces, report, junit = tmp_path / "traces", tmp_path / "r.json", tmp_path / "j.xml"
    # One process, so distinct-seeds has finished when slow starts (test_signal_with_jobs_...
    # covers the workers).
    proc = specseed(
        str(slow_model(tmp_path)), "--jobs", "1",
        "--trace-dir", str(traces), "--json", str(report), "--junit", str(junit),
    )  # fmt: skip
    wait_for_lines(traces / "slow" / "first.jsonl", 3, proc)
    proc.send_signal(sig)
    rc, out, err = finish(proc)
    assert rc == code, err
    assert "Traceback" not in out + err
    assert f"Interrupted by {sig.name}: 1 of 2 scenarios finished" in err
    assert f"Traces are in {traces}" in err
    # The finished scenario is reported; the interrupted one is named.
    data = json.loads(report.read_text())
    assert data["interrupted"] == sig.name and data["unfinished"] == ["slow"]
    assert data["exit_code"] == code
    assert {f["scenario"] for f in data["findings"]} == {"distinct-seeds"}
    assert ET.parse(junit).getroot().get("tests") == str(len(data["findings"]))
    # The reference engine serves a scenario's runs side by side: each interrupted run ends
    # with its own end record, readable as an interrupted run.
    for run in ("first", "second"):
        records = assert_whole_jsonl(traces / "slow" / f"{run}.jsonl")
        assert records[-1]["record"] == "end"
        interrupted = load_trace(traces / "slow" / f"{run}.jsonl")
        assert interrupted.end.failure is not None
        assert interrupted.end.failure.exception == "Interrupted"
        assert sig.name in interrupted.end.failure.message
    assert load_trace(traces / "distinct-seeds" / "together.jsonl").end.failure is None


def _file_size_limit(size: int) -> Callable[[], None]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


def test_full_disk_for_the_report_keeps_the_old_file_and_says_so(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    report.write_text('{"previous": "report"}\n')
    proc = specseed(
        "--scenario", "distinct-seeds", "--json", str(report),
        preexec_fn=_file_size_limit(2000),
    )  # fmt: skip
    rc, out, err = finish(proc)
    assert rc == 5, err
    assert "Traceback" not in out + err
    assert "Nothing was run." not in err
    assert f"cannot write the JSON report to {report}: File too large" in err
    assert "PASS" in out  # the findings themselves reached the terminal
    assert json.loads(report.read_text()) == {"previous": "report"}  # not cut off
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left


def test_full_disk_for_traces_keeps_every_finding(tmp_path: Path) -> None:
    traces, report = tmp_path / "traces", tmp_path / "r.json"
    proc = specseed(
        "--scenario", "distinct-seeds", "--trace-dir", str(traces), "--json", str(report),
        preexec_fn=_file_size_limit(20_000),
    )  # fmt: skip
    rc, out, err = finish(proc)
    assert rc == 5, err  # every invariant held, but evidence is missing
    assert "Traceback" not in out + err
    trace = traces / "distinct-seeds" / "together.jsonl"
    assert f"Missing evidence: {trace}: File too large" in " ".join(err.split())
    data = json.loads(report.read_text())
    assert data["verdict"] == "pass" and data["exit_code"] == 5
    statuses = [f["status"] for f in data["findings"]]
    assert len(statuses) >= 5 and set(statuses) == {"pass"}  # judged on the full run
    (missing,) = data["missing_evidence"]
    assert missing.startswith(f"{trace}: File too large; the file holds ")
    # What reached the disk reads as a truncated run, not as an engine crash.
    cut = load_trace(trace)
    assert cut.end.failure is not None and cut.end.failure.exception == "TraceTruncated"


def test_closed_stdout_keeps_the_json_and_junit_files(tmp_path: Path) -> None:
    report, junit = tmp_path / "r.json", tmp_path / "j.xml"
    proc = specseed("--scenario", "distinct-seeds", "--json", str(report), "--junit", str(junit))
    assert proc.stdout is not None
    proc.stdout.close()  # the reader went away before the audit printed anything
    err = proc.stderr.read() if proc.stderr else ""
    rc = proc.wait(timeout=300)
    assert rc == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err
    data = json.loads(report.read_text())
    assert data["verdict"] == "pass"
    assert ET.parse(junit).getroot().get("tests") == str(len(data["findings"]))


def test_two_audits_on_one_trace_folder(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    first = specseed(str(slow_model(tmp_path)), "--trace-dir", str(traces))
    wait_for_lines(traces / "slow" / "first.jsonl", 2, first)
    second = specseed(
        "--scenario", "distinct-seeds", "--trace-dir", str(traces), "--json",
        str(tmp_path / "second.json"), "--force",
    )  # fmt: skip
    rc, out, err = finish(second)
    assert rc == 2, err
    assert "Traceback" not in out + err
    assert f"the trace folder {traces} is in use by another audit (pid {first.pid})" in " ".join(
        err.split()
    )
    assert "Nothing was run." in err
    assert not (tmp_path / "second.json").exists()
    first.send_signal(signal.SIGTERM)  # enough evidence; stop the first audit early
    rc, _, err = finish(first)
    assert rc == 143, err
    # Every line the first audit wrote is whole; the second wrote none.
    for path in traces.rglob("*.jsonl"):
        assert_whole_jsonl(path)
    assert load_trace(traces / "distinct-seeds" / "together.jsonl").end.failure is None


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_with_jobs_stops_the_workers_and_keeps_their_traces(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    traces, report = tmp_path / "traces", tmp_path / "r.json"
    proc = specseed(
        str(slow_model(tmp_path)), "--jobs", "2", "--trace-dir", str(traces),
        "--json", str(report),
    )  # fmt: skip
    wait_for_lines(traces / "slow" / "first.jsonl", 3, proc)
    proc.send_signal(sig)
    rc, out, err = finish(proc)
    assert rc == code, err
    assert "Traceback" not in out + err
    assert f"Interrupted by {sig.name}" in err
    data = json.loads(report.read_text())
    assert data["interrupted"] == sig.name and "slow" in data["unfinished"]
    # The worker ended the run it was serving before it stopped, naming the audit's signal
    # (the parent stops workers with SIGTERM whatever stopped it).
    interrupted = load_trace(traces / "slow" / "first.jsonl")
    assert interrupted.end.failure is not None
    assert interrupted.end.failure.exception == "Interrupted"
    assert interrupted.end.failure.message == f"the audit was interrupted by {sig.name}"
    skips = [f["message"] for f in data["findings"] if f["status"] == "skip"]
    other = "SIGTERM" if sig == signal.SIGINT else "SIGINT"
    assert not [m for m in skips if other in m], skips
    for path in traces.rglob("*.jsonl"):
        assert_whole_jsonl(path)


def test_sigterm_as_the_report_appears_never_leaves_a_partial_file(tmp_path: Path) -> None:
    report, junit = tmp_path / "r.json", tmp_path / "j.xml"
    proc = specseed("--scenario", "distinct-seeds", "--junit", str(junit), "--json", str(report))
    deadline = time.monotonic() + 240
    while not junit.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.send_signal(signal.SIGTERM)  # while the JSON report is being written, or just after
    rc, out, err = finish(proc)
    assert "Traceback" not in out + err
    # Held until the reports were complete (143), or it came as the process left (-15, after
    # the handlers were restored) or after it ended (0): in every case both files are whole.
    assert rc in (0, 143, -signal.SIGTERM), err
    data = json.loads(report.read_text())
    assert data["verdict"] == "pass"
    assert ET.parse(junit).getroot().get("tests") == str(len(data["findings"]))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
