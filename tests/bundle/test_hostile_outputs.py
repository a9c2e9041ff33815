"""Outputs and secrets, against real failures: a full disk (a 20 KiB tmpfs), /dev/full, a
FIFO, a symlink, a missing folder; and a real HTTP server on 127.0.0.1 that echoes the
Authorization header in its errors, whose key must appear in no file and no console line."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from specseed.core.secrets import REMOVED, hold, scrub_text
from specseed.core.text import printable
from tests.bundle.common import SCENARIO, invoke


@pytest.fixture
def model(tmp_path: Path) -> Path:
    (tmp_path / "mine.yaml").write_text(SCENARIO)
    path = tmp_path / "model.yaml"
    path.write_text("engine: {}\nscenarios: [mine.yaml]\n")
    return path


# -- the scrubber and the terminal --------------------------------------------------------


def test_the_scrubber_removes_url_credentials_query_tokens_and_held_values() -> None:
    text = (
        "GET https://alice:pa55-word@api.example.com/v1?model=m&token=t0k3n&sig=abc "
        "Authorization: Basic YWxpY2U6cGE1NQ== x-api-key: plain-key-123 held-7f2a9e"
    )
    hold("held-7f2a9e")
    scrubbed = scrub_text(text)
    for secret in (
        "alice",
        "pa55-word",
        "t0k3n",
        "sig=abc",
        "YWxpY2U6",
        "plain-key-123",
        "held-7f2a9e",
    ):
        assert secret not in scrubbed, scrubbed
    assert "model=m" in scrubbed and "api.example.com/v1" in scrubbed
    # Files keep record fields such as last_token: only values, URLs and headers go.
    assert scrub_text('"last_token": 5', by_name=False) == '"last_token": 5'
    assert REMOVED in scrub_text("held-7f2a9e", by_name=False)


def test_printable_escapes_controls_but_newline_and_tab() -> None:
    assert (
        printable("a\x1b[31mred\x07\rb\n\tc\x9bd\x7f") == "a\\x1b[31mred\\x07\\x0db\n\tc\\x9bd\\x7f"
    )


# -- where an output goes -----------------------------------------------------------------


def test_json_to_dev_full_is_exit_5_and_the_device_stays_a_device(model: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    result = invoke("audit", str(model), "--no-progress", "--summary", "--json", "/dev/full")
    assert result.exit_code == 5, result.output
    assert "PASS" in result.output and "No space left on device" in result.output
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_json_to_a_fifo_is_written_into_it(model: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    result = invoke("audit", str(model), "--no-progress", "--summary", "--json", str(fifo))
    reader.join(timeout=30)
    assert result.exit_code == 0, result.output
    assert json.loads(received[0])["exit_code"] == 0
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_json_to_a_symlink_writes_its_target(model: Path, tmp_path: Path) -> None:
    target = tmp_path / "reports" / "real.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    result = invoke("audit", str(model), "--no-progress", "--summary", "--json", str(link))
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(target.read_text())["exit_code"] == 0


def test_a_missing_folder_for_an_output_is_an_input_error(model: Path, tmp_path: Path) -> None:
    for option in ("--json", "--junit"):
        missing = tmp_path / "no" / "such" / "report.out"
        result = invoke("audit", str(model), "--no-progress", option, str(missing))
        assert result.exit_code == 2, result.output
        assert "does not exist" in result.output and "Nothing was run" in result.output
        assert not (tmp_path / "no").exists()


def _traceback(result) -> str:  # type: ignore[no-untyped-def]
    if result.exc_info is None or isinstance(result.exception, SystemExit):
        return ""
    return "".join(traceback.format_exception(*result.exc_info))


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_full_disk_during_audit_bundle_is_exit_5_with_the_result_and_the_manifest_marked(
    model: Path, tmp_path: Path
) -> None:
    with tmpfs(tmp_path / "small", "20k") as small:
        bundle = small / "bug"
        result = invoke("audit", str(model), "--no-progress", "--summary", "--bundle", str(bundle))
        assert result.exit_code == 5, (result.output, _traceback(result))
        assert "Traceback" not in result.output
        assert "PASS" in result.output  # the result is printed all the same
        assert "No space left on device" in result.output
        manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["status"] == "complete"


# -- secrets echoed by a server -----------------------------------------------------------

KEY = "q7-victim-secret-key-0042"
"""Shaped like no known key format: only scrubbing by the value held can catch it."""
PASSWORD = "url-pass-6e1d"


@contextmanager
def echoing_server() -> Iterator[str]:
    """An OpenAI-like server whose completions fail with an error quoting the request's
    Authorization header, an ANSI escape and a carriage return."""

    class Handler(BaseHTTPRequestHandler):
        def _json(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.startswith("/v1/models"):
                self._json(200, {"object": "list", "data": [{"id": "m"}]})
            elif self.path.startswith("/openapi.json"):
                schema = {"properties": {"return_token_ids": {}}}
                body = {"requestBody": {"content": {"application/json": {"schema": schema}}}}
                self._json(200, {"paths": {"/v1/completions": {"post": body}}})
            else:
                self._json(404, {})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            said = self.headers.get("authorization", "")
            message = f"rejected {said} (raw {said.split()[-1]})\x1b]0;owned\x07\r"
            self._json(500, {"error": {"message": message}})

        def log_message(self, *args: object) -> None:
            pass

    class QuietServer(ThreadingHTTPServer):
        # A client that hangs up (the audit's timeout) is no error of the test's server: its
        # traceback would land in the captured output the test reads.
        def handle_error(self, request: object, client_address: object) -> None:
            pass

    server = QuietServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("userinfo", [False, True])
def test_a_key_echoed_by_the_server_reaches_no_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, userinfo: bool
) -> None:
    monkeypatch.setenv("SPECSEED_TEST_ECHO_KEY", KEY)
    (tmp_path / "mine.yaml").write_text(SCENARIO)
    with echoing_server() as url:
        # With userinfo the client sends Basic user:password; without, Bearer KEY.
        credentialed = url.replace("http://", f"http://user:{PASSWORD}@") if userinfo else url
        options = {
            "base_url": credentialed,
            "api_key_env": "SPECSEED_TEST_ECHO_KEY",
            "retries": 0,
            "request_timeout_s": 10,
        }
        model = tmp_path / "model.yaml"
        model.write_text(
            yaml.safe_dump(
                {"engine": {"name": "openai", "options": options}, "scenarios": ["mine.yaml"]}
            )
        )
        out = tmp_path / "out"
        out.mkdir()
        result = invoke(
            "audit",
            str(model),
            "--no-progress",
            "--json",
            str(out / "r.json"),
            "--junit",
            str(out / "j.xml"),
            "--bundle",
            str(out / "b"),
        )
    assert result.exit_code in (1, 3), result.output
    assert "Traceback" not in result.output
    written = {p: p.read_text() for p in out.rglob("*") if p.is_file()}
    assert any("rejected" in text for text in written.values()), "the server's error was kept"
    assert any(("Basic" if userinfo else "Bearer") in t for t in written.values())
    for text in [result.output, *written.values()]:
        assert KEY not in text and PASSWORD not in text
        assert "dXNlcjp1cmwtcGFzcy02ZTFk" not in text  # user:password as Basic sends it
    assert "\x1b]0;owned" not in result.output  # the server's escape reaches it escaped
