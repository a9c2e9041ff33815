"""A bundle from a stranger is data: crafted bundles (names that climb out, symlinks, FIFOs,
deep JSON, huge or damaged files) are refused with exit 2 and one line, nothing outside the
bundle is read or removed, and no engine the bundle names runs, no server it names is
contacted, unless the user says so (a real socket on 127.0.0.1 counts the connections)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from tests.bundle.common import SCENARIO, invoke


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real bundle of a failing audit on the reference engine (row0-seed)."""
    root = tmp_path_factory.mktemp("recorded")
    (root / "mine.yaml").write_text(SCENARIO)
    model = root / "model.yaml"
    model.write_text("engine:\n  options:\n    defects: [row0-seed]\nscenarios: [mine.yaml]\n")
    result = invoke("audit", str(model), "--no-progress", "--summary", "--bundle", str(root / "b"))
    assert result.exit_code == 1, result.output
    return root / "b"


@pytest.fixture
def bundle(recorded: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "bundle"
    shutil.copytree(recorded, copy)
    return copy


def _refused(result, *says: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    text = " ".join(result.output.split())
    assert "Traceback" not in text
    for said in says:
        assert said in text, text


def _manifest(bundle: Path, **changes: object) -> None:
    data = json.loads((bundle / "manifest.json").read_text())
    data.update(changes)
    (bundle / "manifest.json").write_text(json.dumps(data))


# -- names that climb out ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["../victim", "/abs/victim", "a/b", "..", "x\x00y"])
def test_a_manifest_name_that_is_not_one_path_component_is_refused(bundle: Path, name: str) -> None:
    entry = json.loads((bundle / "manifest.json").read_text())["scenarios"][0]
    _manifest(bundle, scenarios=[{**entry, "name": name}])
    _refused(invoke("check", str(bundle)), "a bundle name must be one plain path component")


def test_force_on_a_crafted_manifest_removes_nothing_outside_the_bundle(
    bundle: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    (victim / "scenario.yaml").write_text("mine too")
    absolute = tmp_path / "absolute"
    absolute.mkdir()
    (absolute / "findings.json").write_text("{}")
    entry = json.loads((bundle / "manifest.json").read_text())["scenarios"][0]
    _manifest(
        bundle,
        scenarios=[entry, {**entry, "name": "../victim"}, {**entry, "name": str(absolute)}],
    )
    # Without --force: refused before anything runs.
    model = bundle / "model.yaml"
    _refused(invoke("audit", str(model), "--bundle", str(bundle)), "holds a bundle already")
    assert (bundle / "mine" / "findings.json").exists()
    # With it: the bundle's own files go, the others stay.
    result = invoke(
        "audit", str(model), "--no-progress", "--summary", "--bundle", str(bundle), "--force"
    )
    assert result.exit_code == 1, result.output
    assert "--force: removed the earlier bundle" in result.output
    assert (victim / "keep.txt").read_text() == "mine"
    assert (victim / "scenario.yaml").read_text() == "mine too"
    assert (absolute / "findings.json").exists()


def test_reusing_a_bundle_folder_needs_force_and_keeps_minimal(bundle: Path) -> None:
    (bundle / "mine" / "minimal.yaml").write_text(SCENARIO)
    out = bundle.parent / "replayed"
    first = invoke("replay", str(bundle), "--bundle", str(out))
    assert first.exit_code == 1, first.output  # the replay's audit fails, as recorded
    _refused(invoke("replay", str(bundle), "--bundle", str(out)), "--force")
    again = invoke("replay", str(bundle), "--bundle", str(out), "--force")
    assert again.exit_code == 1, again.output
    assert "removed the earlier bundle" in again.output
    assert (bundle / "mine" / "minimal.yaml").exists()


def test_a_bundle_folder_whose_parent_is_missing_is_an_input_error(bundle: Path) -> None:
    missing = bundle.parent / "no" / "such" / "dir"
    _refused(invoke("replay", str(bundle), "--bundle", str(missing)), "does not exist")
    assert not missing.parent.exists()


# -- symlinks and special files -----------------------------------------------------------


def test_a_symlinked_minimal_yaml_is_refused_and_its_target_never_read(
    bundle: Path, tmp_path: Path
) -> None:
    private = tmp_path / "private.yaml"
    private.write_text("name: secret-7c1e\n")
    (bundle / "mine" / "minimal.yaml").symlink_to(private)
    result = invoke("report", str(bundle), "--no-minimize")
    _refused(result, "is a symlink")
    assert "secret-7c1e" not in result.output


@pytest.mark.parametrize("member", ["model.yaml", "manifest.json", "mine/alone.jsonl"])
def test_a_fifo_in_a_bundle_is_refused_without_blocking(bundle: Path, member: str) -> None:
    path = bundle / member
    path.unlink()
    os.mkfifo(path)  # opening it for reading would wait for a writer forever
    _refused(invoke("check", str(bundle)), "not a regular file")


def test_a_symlink_to_a_device_is_refused(bundle: Path) -> None:
    (bundle / "model.yaml").unlink()
    (bundle / "model.yaml").symlink_to("/dev/zero")
    _refused(invoke("check", str(bundle)), "is a symlink")


def test_a_symlinked_scenario_folder_is_refused(bundle: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    shutil.move(bundle / "mine", elsewhere)
    (bundle / "mine").symlink_to(elsewhere, target_is_directory=True)
    _refused(invoke("check", str(bundle)), "is a symlink")


# -- damaged and oversized files ----------------------------------------------------------


def test_damaged_files_are_one_line_not_a_traceback(bundle: Path) -> None:
    cases: list[tuple[str, bytes, str]] = [
        ("model.yaml", b"engine: {name: reference}\n# \xff\xfe\n", "not UTF-8"),
        ("mine/minimal.yaml", b"name: \xc3\x28\n", "not UTF-8"),
        ("manifest.json", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        ("mine/findings.json", b"{" * 50_000, "findings"),
        ("environment.json", b"\xff", "not UTF-8"),
    ]
    for member, content, says in cases:
        path = bundle / member
        before = path.read_bytes() if path.exists() else None
        path.write_bytes(content)
        _refused(invoke("check", str(bundle)), says)
        if before is None:
            path.unlink()
        else:
            path.write_bytes(before)
    assert invoke("check", str(bundle)).exit_code == 1  # restored: it reads again


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda lines: [lines[0], "42", *lines[1:]], "a record is a JSON object"),
        (lambda lines: [*lines[:-1], json.dumps({"record": "end", "outputs": [1, 2]})], "trace"),
        (lambda lines: [lines[0], "[" * 100_000, *lines[1:]], "trace"),
        (lambda lines: [lines[0], "\x1b]0;pwned\x07" * 3, *lines[1:]], "not a JSON record"),
    ],
)
def test_a_damaged_trace_is_exit_2(bundle: Path, edit, says: str) -> None:  # type: ignore[no-untyped-def]
    trace = bundle / "mine" / "alone.jsonl"
    trace.write_text("\n".join(edit(trace.read_text().splitlines())) + "\n")
    result = invoke("check", str(bundle))
    _refused(result, says)
    assert "\x1b" not in result.output  # the trace's bytes reach the terminal escaped


def test_a_trace_line_over_the_cap_is_refused_before_it_is_parsed(bundle: Path) -> None:
    from specseed.bundle.format import MAX_TRACE_LINE_BYTES

    trace = bundle / "mine" / "alone.jsonl"
    lines = trace.read_text().splitlines()
    with trace.open("w") as handle:
        handle.write(lines[0] + "\n")
        handle.write('{"record": "step", "pad": "' + "x" * (MAX_TRACE_LINE_BYTES + 10) + '"}\n')
    _refused(invoke("check", str(bundle)), "a trace line longer than")


def test_a_model_yaml_over_the_size_cap_is_refused(bundle: Path) -> None:
    with (bundle / "model.yaml").open("a") as handle:
        handle.write("# " + "x" * (2 << 20) + "\n")
    _refused(invoke("check", str(bundle)), "larger than 1 MiB")


# -- no engine, server or variable because a bundle names it --------------------------------


@contextmanager
def counting_server() -> Iterator[tuple[str, list[bytes]]]:
    """A TCP server on 127.0.0.1 that records every connection and what it was sent."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.settimeout(0.2)
    seen: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1.0)
                try:
                    seen.append(conn.recv(65536))
                except OSError:
                    seen.append(b"")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", seen
    finally:
        stop.set()
        thread.join(timeout=5)
        sock.close()


def _point_at(bundle: Path, url: str) -> None:
    """Make the bundle name an openai engine at ``url`` with a key from GITHUB_TOKEN, its
    traces saying so too (a bundle whose traces name another engine is refused whole)."""
    model = yaml.safe_load((bundle / "model.yaml").read_text())
    model["engine"] = {
        "name": "openai",
        "options": {"base_url": url, "api_key_env": "SPECSEED_TEST_VICTIM_TOKEN", "retries": 0},
    }
    (bundle / "model.yaml").write_text(yaml.safe_dump(model))
    _manifest(bundle, engine="openai")
    for trace in (bundle / "mine").glob("*.jsonl"):
        records = [json.loads(line) for line in trace.read_text().splitlines()]
        records[0]["engine_config"]["name"] = "openai"
        trace.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_report_replay_minimize_never_contact_a_server_the_bundle_names(
    bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECSEED_TEST_VICTIM_TOKEN", "victim-token-51d3")
    with counting_server() as (url, seen):
        _point_at(bundle, url)
        report = invoke("report", str(bundle))
        assert report.exit_code == 0, report.output
        assert "not minimized" in report.output
        _refused(invoke("replay", str(bundle)), "--engine-from-bundle")
        _refused(invoke("minimize", str(bundle)), "--engine-from-bundle")
        _refused(invoke("report", str(bundle), "--minimize"), "--engine-from-bundle")
        assert seen == []
        # The flag is what makes it run: it says where first, and then it connects.
        ran = invoke("replay", str(bundle), "--engine-from-bundle")
        assert "running the bundle's engine openai" in ran.output and url in ran.output
        assert ran.exit_code == 3, ran.output
    assert seen, "the explicit flag must reach the server (else this test proves nothing)"
    assert "victim-token-51d3" not in ran.output


def test_replay_with_the_users_own_model_runs_that_engine(bundle: Path, tmp_path: Path) -> None:
    with counting_server() as (url, seen):
        _point_at(bundle, url)
        mine = tmp_path / "mine.model.yaml"
        mine.write_text("engine:\n  options:\n    defects: [row0-seed]\nscenarios: [uptime]\n")
        result = invoke("replay", str(bundle), "--model", str(mine))
    assert result.exit_code == 1, result.output  # row0-seed again: the replay's audit fails
    assert seen == []


def test_a_trace_over_the_size_cap_is_refused_without_reading_it(bundle: Path) -> None:
    from specseed.bundle.format import MAX_TRACE_BYTES

    trace = bundle / "mine" / "alone.jsonl"
    with trace.open("r+b") as handle:  # sparse: the size is there, the bytes are not
        handle.truncate(MAX_TRACE_BYTES + 1)
    _refused(invoke("check", str(bundle)), "the trace is larger than")
