"""The sampling backend switch on the CPU: launch planning, the CPU backend, and refusals."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from specseed import sampling
from specseed.cli.app import app
from specseed.errors import EngineError
from specseed.sampling.backend import (
    MAX_PACKED_SUBSEQUENCE,
    CpuBackend,
    make_backend,
    plan_launches,
)
from specseed.sampling.streams import SamplingInputError


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
    model.write_text("engine:\n  device: cpu\n  sampling_backend: flashinfer\n")
    result = CliRunner().invoke(app, ["audit", str(model), "--no-progress"])
    assert result.exit_code == 3, result.output
    assert "sampling_backend is flashinfer but engine.device is cpu" in result.output
    assert "Traceback" not in result.output


def test_unknown_backend_is_bad_input(tmp_path: Path) -> None:
    model = tmp_path / "model.yaml"
    model.write_text("engine:\n  sampling_backend: triton\n")
    result = CliRunner().invoke(app, ["audit", str(model), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert "sampling_backend" in result.output
