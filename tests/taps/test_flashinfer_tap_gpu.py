"""The flashinfer tap on the real ``flashinfer.sampling`` (GPU machines with flashinfer only).

The central check: on the reference engine with ``sampling_backend: flashinfer``, what the tap
records (seed, offset, subsequence, draws, tokens per kernel row) equals what the engine's
own trace says, row for row.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from specseed import sampling
from specseed.plan.planning import plan_audit
from specseed.run.execute import run_audit
from specseed.sampling.backend import make_backend
from specseed.scenarios.schema import AuditConfig, EngineConfig
from specseed.taps.flashinfer_tap import FlashinferTap, reads_element0_only
from tests.taps.copy_count import CopyCount
from tests.taps.trace_match import unmatched

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(importlib.util.find_spec("flashinfer") is None, reason="no flashinfer"),
]


@pytest.fixture(scope="module")
def fs() -> ModuleType:
    import flashinfer.sampling

    return flashinfer.sampling


@pytest.mark.parametrize("contract", ["ideal", "trtllm-pr17599"])
def test_tap_equals_the_engine_trace_row_for_row(fs: ModuleType, contract: str) -> None:
    config = AuditConfig(
        engine=EngineConfig(
            device="cuda", options={"sampling_backend": "flashinfer"}, contract=contract
        ),
        scenarios=["continuous-batching", "reproducibility", "warmup", "overlap-scheduler"],
    )
    planned = plan_audit(config, Path.cwd())
    with FlashinferTap() as tap:
        result = run_audit(config, planned, Path.cwd(), keep_steps=True)  # the rows are read
    assert tap.blind_spots() == []
    assert all(call.seed_kind == "tensor" for call in tap.calls)
    assert {call.flashinfer_version for call in tap.calls} == {fs_version()}
    traces = [t for scenario in result.scenarios for t in scenario.traces.values()]
    missing, extra = unmatched(tap, traces)
    assert missing == [] and extra == 0
    assert sum(len(call.rows) for call in tap.calls) > 100


def fs_version() -> str:
    import flashinfer

    return str(flashinfer.__version__)


def test_tap_sees_names_imported_before_it(fs: ModuleType) -> None:
    importer = ModuleType("specseed_test_fi_importer")
    exec("from flashinfer.sampling import sampling_from_probs", importer.__dict__)
    sys.modules[importer.__name__] = importer
    try:
        probs = torch.full((4, 64), 1 / 64, device="cuda")
        seeds = torch.arange(4, dtype=torch.int64, device="cuda")
        with FlashinferTap() as tap:
            importer.sampling_from_probs(probs, seed=seeds, offset=seeds * 0)
        assert len(tap.calls) == 1 and tap.calls[0].seed_kind == "tensor"
        assert "specseed_test_fi_importer.sampling_from_probs" in tap.aliases_patched
    finally:
        del sys.modules[importer.__name__]


def test_generator_seeded_calls_are_marked(fs: ModuleType) -> None:
    with FlashinferTap() as tap:
        fs.sampling_from_probs(torch.full((2, 64), 1 / 64, device="cuda"))
    assert tap.calls[0].seed_kind == "generator"


def test_cuda_graph_capture_is_reported_as_a_blind_spot(fs: ModuleType) -> None:
    probs = torch.full((8, 256), 1 / 256, device="cuda")
    seeds = torch.arange(8, dtype=torch.int64, device="cuda")
    offsets = torch.zeros(8, dtype=torch.int64, device="cuda")
    fs.sampling_from_probs(probs, seed=seeds, offset=offsets)  # build before capture
    graph = torch.cuda.CUDAGraph()
    with FlashinferTap() as tap:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fs.sampling_from_probs(probs, seed=seeds, offset=offsets)  # warm-up on the stream
        torch.cuda.current_stream().wait_stream(stream)
        with torch.cuda.graph(graph):
            fs.sampling_from_probs(probs, seed=seeds, offset=offsets)
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
    assert tap.captured_calls == 1
    assert len(tap.calls) == 2  # the warm-up and the capture; replays are invisible
    assert any("CUDA graph" in note for note in tap.blind_spots())


@pytest.mark.parametrize("subsequence", ["kernel-row", "zero", "mixed"])
def test_backend_tokens_equal_the_twin(fs: ModuleType, subsequence: str) -> None:
    """Dyadic probabilities: the twin is exact, so tokens must be equal bit for bit."""
    rows, vocab = 16, 512
    gen = torch.Generator().manual_seed(3)
    weights = torch.randint(1, 64, (rows, vocab), generator=gen).float()
    probs = weights / weights.sum(-1, keepdim=True)
    probs = torch.round(probs * 2**20) / 2**20
    seeds = torch.randint(0, 2**62, (rows,), generator=gen, dtype=torch.int64)
    offsets = torch.randint(0, 2**20, (rows,), generator=gen, dtype=torch.int64) * 4
    subs = {
        "kernel-row": None,
        "zero": torch.zeros(rows, dtype=torch.int64),
        "mixed": torch.tensor([i % 3 for i in range(rows)], dtype=torch.int64),
    }[subsequence]
    backend = make_backend("flashinfer", "cuda")
    got = backend.sampling_from_probs(probs, seeds, offsets, subs)
    used = torch.tensor(got.subsequences, dtype=torch.int64)
    if subs is not None:
        assert got.subsequences == tuple(subs.tolist())
    # 0.6.4 .. 0.7.1 read element 0 of each launch: the whole call when it is one launch, the
    # row itself when every row has a launch of its own.
    element0 = reads_element0_only(backend.version)
    if element0 and subsequence == "mixed":
        pytest.skip("0.6.4 reads each packed launch's row 0; the twin reads the call's row 0")
    indexing = "element0" if element0 and subsequence == "kernel-row" else "per_row"
    twin = sampling.sampling_from_probs(
        probs, seed=seeds, offset=offsets, subsequence=used, seed_offset_indexing=indexing
    )
    assert got.tokens.tolist() == twin.tolist()


def test_reading_calls_copies_once_whatever_the_number_of_calls(fs: ModuleType) -> None:
    """Twenty calls' seeds, offsets and tokens reach the host in one concatenation and one
    transfer, and each call reads back its own."""
    probs = torch.full((4, 64), 1 / 64, device="cuda")
    base = torch.arange(4, dtype=torch.int64, device="cuda")
    with FlashinferTap() as tap:
        returned = [
            fs.sampling_from_probs(probs, seed=base + 10 * i, offset=base * 4) for i in range(20)
        ]
    with CopyCount() as counted:
        calls = tap.calls
    assert counted.copies == 2
    for i, (call, tokens) in enumerate(zip(calls, returned, strict=True)):
        seeds, offsets = [10 * i + j for j in range(4)], [0, 4, 8, 12]
        assert [r.seed_given for r in call.rows] == seeds
        assert [r.offset_given for r in call.rows] == offsets
        # 0.6.4 .. 0.7.1 read element 0 for every row.
        assert [r.seed for r in call.rows] == ([seeds[0]] * 4 if call.element0 else seeds)
        assert [r.offset for r in call.rows] == ([0] * 4 if call.element0 else offsets)
        assert [r.tokens for r in call.rows] == [(t,) for t in tokens.tolist()]
