"""The flashinfer backend inside the reference engine against the CPU twins (GPU only).

Both engines run the model on CUDA, so their logits are the same; only the sampler differs.
On a release that reads element 0 of the seed/offset tensors (0.6.4 .. 0.7.1) the CPU side
runs with the ``row0-seed`` defect injected: the real kernel must reproduce the emulation.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from specseed.plan.planning import plan_audit
from specseed.run.execute import run_audit
from specseed.scenarios.schema import AuditConfig, EngineConfig
from specseed.taps.flashinfer_tap import reads_element0_only

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(importlib.util.find_spec("flashinfer") is None, reason="no flashinfer"),
]


def _outputs(engine: EngineConfig) -> dict[tuple[str, str], dict[str, tuple[int, ...]]]:
    config = AuditConfig(engine=engine, scenarios=["batch-composition", "continuous-batching"])
    result = run_audit(config, plan_audit(config, Path.cwd()), Path.cwd())
    return {
        (s.scenario.name, run): dict(trace.end.outputs)
        for s in result.scenarios
        for run, trace in s.traces.items()
    }


@pytest.mark.parametrize("contract", ["ideal", "trtllm-pr17599"])
def test_flashinfer_backend_emits_the_twins_tokens(contract: str) -> None:
    import flashinfer

    element0 = reads_element0_only(flashinfer.__version__) and contract != "ideal"
    real = _outputs(
        EngineConfig(device="cuda", options={"sampling_backend": "flashinfer"}, contract=contract)
    )
    twin = _outputs(
        EngineConfig(
            device="cuda",
            contract=contract,
            options={"defects": ["row0-seed"] if element0 else []},
        )
    )
    assert real == twin
