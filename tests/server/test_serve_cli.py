"""``specseed serve`` as a process: it prints its URL, concurrent requests share engine
steps, bad input exits 2, and it stops on SIGTERM."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from specseed.cli.app import app
from tests.engine_adapters.openai.servers import SRC, specseed_serve

pytestmark = pytest.mark.slow


def test_concurrent_requests_share_engine_steps() -> None:
    async def together(url: str, count: int) -> list[list[int]]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            bodies = [
                {"prompt": [5, 6, 7 + i], "seed": i, "max_tokens": 8, "return_token_ids": True}
                for i in range(count)
            ]
            answers = await asyncio.gather(
                *(client.post("/v1/completions", json=b) for b in bodies)
            )
        return [a.json()["choices"][0]["token_ids"] for a in answers]

    with specseed_serve() as server:
        alone = asyncio.run(together(server.url, 1))
        batched = asyncio.run(together(server.url, 6))
        health = httpx.get(f"{server.url}/health").json()
    assert health["largest_batch"] >= 2  # requests sent together ran in one step
    assert batched[0] == alone[0]  # and the ideal engine does not care
    assert server.process.returncode is not None  # stopped when the block ended


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--api-key-env", "SPECSEED_NO_SUCH_VAR"], {}, "SPECSEED_NO_SUCH_VAR"),
        (["no-such.model.yaml"], {}, "no-such.model.yaml"),
        (["--port", "70000"], {}, "65535"),
    ],
)
def test_bad_input_exits_2_without_a_traceback(
    args: list[str], env: dict[str, str], says: str
) -> None:
    result = CliRunner().invoke(app, ["serve", *args], env=env)
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert "Traceback" not in result.output


def test_serving_another_engine_is_refused(tmp_path: Path) -> None:
    model = tmp_path / "model.yaml"
    model.write_text("engine:\n  name: openai\n  options: {base_url: 'http://127.0.0.1:9'}\n")
    done = subprocess.run(
        [sys.executable, "-m", "specseed", "serve", str(model), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 3, done.stderr
    assert "runs the reference engine" in done.stderr


HIDE_FASTAPI = """
import sys

class _Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("fastapi", "uvicorn"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Hide())
"""


def test_without_the_http_extra_it_is_one_line_and_the_install_hint(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(HIDE_FASTAPI)
    done = subprocess.run(
        [sys.executable, "-m", "specseed", "serve", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": f"{tmp_path}:{SRC}", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert "needs the http extra" in done.stderr and "specseed[http]" in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 3, done.stderr
