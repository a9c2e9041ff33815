"""Where the probability oracle runs, and what a CUDA oracle adds to the envelope.

The CPU half runs everywhere; the tests marked ``gpu`` compare the CUDA oracle with the CPU
one on the built-in tiny model (they run on a GPU machine, tools/gpu/run_gpu_checks.sh).
"""

from __future__ import annotations

import pytest
import torch

from specseed.distribution.analysis import analyse
from specseed.distribution.oracle import (
    CUDA_LOGITS_ERROR,
    DEVICE_VARIABLE,
    OracleUnavailable,
    ReferenceOracle,
    oracle_device,
)
from tests.distribution.test_analysis import MarkovOracle, _exact_samples

SEQUENCES = [((1, 5, 9, 3), (7, 2, 11, 4, 8, 6)), ((3, 3, 2), (9, 1, 5, 5, 12, 30))]
SHARING = [*SEQUENCES, *[((31, 7, 88, 14), (5 + i, 9, 2 * i + 3)) for i in range(6)]]
"""Six sequences on one prompt besides: the oracle computes that prompt once and goes on
from copies of its KV cache."""


def test_the_device_is_chosen_by_the_variable_or_by_what_torch_sees(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(DEVICE_VARIABLE, raising=False)
    assert oracle_device() == ("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setenv(DEVICE_VARIABLE, "CPU")
    assert oracle_device() == "cpu"
    monkeypatch.setenv(DEVICE_VARIABLE, "tpu")
    with pytest.raises(OracleUnavailable, match="cpu, cuda or auto"):
        oracle_device()


def test_the_cpu_oracle_states_no_error_of_its_own() -> None:
    oracle = ReferenceOracle(None, 0, device="cpu")
    assert oracle.device.type == "cpu" and oracle.logits_error == 0.0
    assert "CPU, float32" in oracle.description


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_asked_for_without_a_device_falls_back_to_the_cpu_and_says_so() -> None:
    oracle = ReferenceOracle(None, 0, device="cuda")
    assert oracle.device.type == "cpu" and oracle.logits_error == 0.0
    assert "CUDA could not load it" in oracle.description
    reference = ReferenceOracle(None, 0, device="cpu")
    for a, b in zip(oracle.logits(SEQUENCES), reference.logits(SEQUENCES), strict=True):
        assert torch.equal(a, b)


def test_an_oracle_error_widens_the_envelope_and_only_raises_p_values() -> None:
    exact = MarkovOracle(5)
    loose = MarkovOracle(5)
    loose.logits_error = CUDA_LOGITS_ERROR  # type: ignore[attr-defined]
    samples = _exact_samples(exact, 200, 8, 3)
    tight, wide = analyse(samples, exact), analyse(samples, loose)
    assert wide.groups[0].envelope > 2 * tight.groups[0].envelope
    for a, b in zip(tight.tests, wide.tests, strict=True):
        assert b.p_value >= a.p_value - 1e-12


@pytest.mark.gpu
def test_the_cuda_oracle_is_within_its_stated_error_of_the_cpu_forward() -> None:
    cpu = ReferenceOracle(None, 0, device="cpu")
    cuda = ReferenceOracle(None, 0, device="cuda")
    assert cuda.device.type == "cuda" and cuda.logits_error == CUDA_LOGITS_ERROR
    for a, b in zip(cuda.logits(SHARING), cpu.logits(SHARING), strict=True):
        bound = CUDA_LOGITS_ERROR * b.abs().amax(dim=-1)
        assert bool(((a - b).abs().amax(dim=-1) <= bound).all())


@pytest.mark.gpu
def test_the_cuda_oracle_turns_tf32_off_and_puts_the_setting_back() -> None:
    cuda = ReferenceOracle(None, 0, device="cuda")
    exact = cuda.logits(SEQUENCES)
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # TF32 on, as a serving process may leave it
    try:
        again = cuda.logits(SEQUENCES)
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(previous)
    for a, b in zip(again, exact, strict=True):
        assert torch.equal(a, b)
