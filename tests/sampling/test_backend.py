"""The sampling backend switch on the CPU: launch planning, the CPU backend, and refusals."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from specseed import sampling
from specseed.cli.app import app
from specseed.core.errors import EngineError
from specseed.sampling.backend import (
    MAX_PACKED_SUBSEQUENCE,
    CpuBackend,
    FlashinferBackend,
    make_backend,
    plan_launches,
)
from specseed.sampling.streams import SamplingInputError
from tests.taps import standin_flashinfer


def test_kernel_row_subsequences_are_one_launch_as_is() -> None:
    assert plan_launches(4, None) == [[0, 1, 2, 3]]
    assert plan_launches(3, [0, 1, 2]) == [[0, 1, 2]]


def test_subsequence_zero_for_every_row_is_one_launch_per_row() -> None:
    """The ``ideal`` contract: every row must run at blockIdx.x 0."""
    assert plan_launches(3, [0, 0, 0]) == [[0], [1], [2]]


def test_rows_sit_at_their_subsequence_with_fillers_in_gaps() -> None:
    launches = plan_launches(4, [2, 0, 2, 1])
    assert launches == [[1, 3, 0], [-1, -1, 2]]
    for launch in launches:
        for pos, row in enumerate(launch):
            if row >= 0:
                assert [2, 0, 2, 1][row] == pos


def test_unreachable_subsequences_are_refused() -> None:
    with pytest.raises(SamplingInputError, match="cannot be reached"):
        plan_launches(1, [MAX_PACKED_SUBSEQUENCE + 1])


def test_cpu_backend_is_the_twins() -> None:
    probs = torch.softmax(torch.randn(3, 40, generator=torch.Generator().manual_seed(1)), -1)
    seeds = torch.tensor([1, 2, 3], dtype=torch.int64)
    offsets = torch.tensor([0, 4, 8], dtype=torch.int64)
    subs = torch.zeros(3, dtype=torch.int64)
    result = CpuBackend().sampling_from_probs(probs, seeds, offsets, subs)
    twin = sampling.sampling_from_probs(probs, seed=seeds, offset=offsets, subsequence=subs)
    assert result.tokens.tolist() == twin.tolist()
    assert result.subsequences == (0, 0, 0) and result.draws.tolist() == [1, 1, 1]


def test_flashinfer_backend_refuses_the_cpu() -> None:
    with pytest.raises(EngineError, match=r"engine\.device is cpu"):
        make_backend("flashinfer", "cpu")


def test_flashinfer_backend_refuses_when_flashinfer_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "flashinfer", None)  # import raises ImportError
    monkeypatch.setitem(sys.modules, "flashinfer.sampling", None)
    with pytest.raises(EngineError, match="flashinfer cannot be imported"):
        make_backend("flashinfer", "cuda")


def test_audit_with_flashinfer_on_cpu_exits_3(tmp_path: Path) -> None:
    model = tmp_path / "model.yaml"
    model.write_text("engine:\n  device: cpu\n  options: {sampling_backend: flashinfer}\n")
    result = CliRunner().invoke(app, ["audit", str(model), "--no-progress"])
    assert result.exit_code == 3, result.output
    assert "sampling_backend is flashinfer but engine.device is cpu" in result.output
    assert "Traceback" not in result.output


def test_unknown_backend_is_bad_input(tmp_path: Path) -> None:
    model = tmp_path / "model.yaml"
    model.write_text("engine:\n  options: {sampling_backend: triton}\n")
    result = CliRunner().invoke(app, ["audit", str(model), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert "sampling_backend" in result.output


# -- the flashinfer backend's own logic, over the CPU twins standing in for flashinfer ------
# The stand-in samples with subsequence = launch row, as the real kernels do, so what is
# tested here is the backend's packing, element-0 emulation and draw accounting.


@pytest.fixture
def standin_backend() -> Iterator[FlashinferBackend]:
    module = standin_flashinfer.make("0.7.4")
    yield FlashinferBackend(module, "0.7.4", torch.device("cpu"))
    standin_flashinfer.drop()


def _dyadic(rows: int, vocab: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    w = torch.randint(1, 64, (rows, vocab), generator=gen).float()
    return w / w.sum(-1, keepdim=True)


@pytest.mark.parametrize("subs", [None, [0] * 5, [2, 0, 2, 1, 0]])
@pytest.mark.parametrize("element0", [False, True])
def test_packed_launches_sample_what_the_twin_samples(
    standin_backend: FlashinferBackend, subs: list[int] | None, element0: bool
) -> None:
    probs = _dyadic(5, 48, 1)
    seeds = torch.tensor([11, 12, 13, 14, 15], dtype=torch.int64)
    offsets = torch.tensor([0, 4, 8, 12, 16], dtype=torch.int64)
    sub_t = None if subs is None else torch.tensor(subs, dtype=torch.int64)
    got = standin_backend.sampling_from_probs(probs, seeds, offsets, sub_t, element0=element0)
    want = CpuBackend().sampling_from_probs(probs, seeds, offsets, sub_t, element0=element0)
    assert got.tokens.tolist() == want.tokens.tolist()
    assert got.subsequences == want.subsequences
    assert got.launches == (1 if subs is None else len(plan_launches(5, subs)))
    k_arr = torch.tensor([3, 48, 10, 5, 7], dtype=torch.int32)
    p_arr = torch.tensor([0.9, 0.5, 1.0, 0.7, 0.95])
    got = standin_backend.top_k_top_p_sampling_from_probs(
        probs, k_arr, p_arr, seeds, offsets, sub_t, element0=element0
    )
    want = CpuBackend().top_k_top_p_sampling_from_probs(
        probs, k_arr, p_arr, seeds, offsets, sub_t, element0=element0
    )
    assert got.tokens.tolist() == want.tokens.tolist()
    assert got.draws.tolist() == want.draws.tolist()
    assert standin_backend.draw_replay_mismatches == 0


@pytest.mark.parametrize("subs", [None, [0] * 6])
def test_packed_chain_verification_matches_the_twin(
    standin_backend: FlashinferBackend, subs: list[int] | None
) -> None:
    batch, k, vocab = 6, 3, 24
    gen = torch.Generator().manual_seed(5)
    draft = torch.softmax(torch.randn(batch, k, vocab, generator=gen) * 3, -1)
    target = torch.softmax(torch.randn(batch, k + 1, vocab, generator=gen) * 3, -1)
    ids = torch.multinomial(draft.reshape(-1, vocab), 1, generator=gen).reshape(batch, k).int()
    seeds = torch.arange(batch, dtype=torch.int64) + 40
    offsets = torch.arange(batch, dtype=torch.int64) * 8
    sub_t = None if subs is None else torch.tensor(subs, dtype=torch.int64)
    got = standin_backend.chain_speculative_sampling(draft, ids, target, seeds, offsets, sub_t)
    want = CpuBackend().chain_speculative_sampling(draft, ids, target, seeds, offsets, sub_t)
    assert got.tokens.tolist() == want.tokens.tolist()
    assert got.draws.tolist() == want.draws.tolist()
    assert got.emitted is not None and want.emitted is not None
    assert got.emitted.tolist() == want.emitted.tolist()
