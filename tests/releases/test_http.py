"""What ``specseed sweep --via http`` starts for a release: vLLM's server command line as the
release spells its options, and a server that dies before answering, reported with its log."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from specseed.core.errors import EngineError
from specseed.engine_adapters.base import EngineSettings
from specseed.engine_adapters.vllm.options import VllmOptions
from specseed.engine_adapters.vllm.server import server_arguments
from specseed.releases.http import Server, free_port, wait_healthy

SETTINGS = EngineSettings(
    name="vllm",
    checkpoint=Path("/ckpt/target"),
    draft_checkpoint=Path("/ckpt/draft"),
    max_num_requests=8,
    max_draft_len=3,
    contract="vllm-generators",
    options=VllmOptions(),
)


def _speculative(args: list[str]) -> dict[str, object]:
    return dict(json.loads(args[args.index("--speculative-config") + 1]))


def test_each_release_gets_the_speculative_config_it_spells() -> None:
    newest = server_arguments(SETTINGS, "0.32.0", 8000)
    assert newest[:2] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert ["--host", "127.0.0.1", "--port", "8000"] == newest[newest.index("--host") :][:4]
    assert _speculative(newest) == {
        "method": "eagle3",
        "num_speculative_tokens": 3,
        "draft_sample_method": "greedy",
        "rejection_sample_method": "standard",
        "model": "/ckpt/draft",
    }
    # 0.20.0 has no draft_sample_method and spells rejection sampling otherwise: left out.
    assert _speculative(server_arguments(SETTINGS, "0.20.0", 8000)) == {
        "method": "eagle3",
        "num_speculative_tokens": 3,
        "model": "/ckpt/draft",
    }
    sampled = dataclasses.replace(
        SETTINGS, options=VllmOptions(draft_sample_method="probabilistic")
    )
    assert (
        _speculative(server_arguments(sampled, "0.21.0", 8000))["draft_sample_method"] == "gumbel"
    )
    with pytest.raises(EngineError, match=r"vLLM 0\.20\.0 cannot take draft_sample_method"):
        server_arguments(sampled, "0.20.0", 8000)
    plain = server_arguments(dataclasses.replace(SETTINGS, max_draft_len=0), "0.32.0", 8001)
    assert "--speculative-config" not in plain


def test_a_server_that_exits_is_reported_with_the_end_of_its_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", "import sys; print('no such model'); sys.exit(3)"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Server(process, f"http://127.0.0.1:{free_port()}", log)
    try:
        problem = wait_healthy([server], timeout=60)
    finally:
        server.stop()
    assert problem is not None
    assert problem.startswith("the server exited (3)")
    assert "no such model" in problem


def test_what_ran_over_http_is_what_the_server_says_it_is() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from specseed.releases.http import server_version

    class Server(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"version": "0.29.0"}' if self.path == "/version" else b"{}"
            self.send_response(200 if self.path == "/version" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert server_version(url) == "0.29.0"
        assert server_version(url + "/elsewhere") is None  # a 404: it does not say
    finally:
        server.shutdown()
