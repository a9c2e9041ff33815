"""The engine options of model.yaml are validated once per audit: when model.yaml is loaded.
Planning, the runner and the worker processes of ``--jobs`` take the settings the plans carry."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from specseed.engine_adapters.reference.options import ReferenceOptions
from specseed.plan.planning import plan_audit
from specseed.run.execute import run_audit
from specseed.run.parallel import run_audit_jobs
from specseed.scenarios.loader import load_audit_config

MODEL_YAML = """\
engine:
  name: reference
  options:
    model_seed: 0
scenarios: [distinct-seeds, warmup]
"""


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every validation of the reference engine's options model, as it happens."""
    seen: list[Any] = []
    original = ReferenceOptions.model_validate

    def counting(obj: Any, *args: Any, **kwargs: Any) -> ReferenceOptions:
        seen.append(obj)
        return original(obj, *args, **kwargs)

    monkeypatch.setattr(ReferenceOptions, "model_validate", counting)
    return seen


def _audit(tmp_path: Path, run: Callable[..., Any]) -> None:
    path = tmp_path / "model.yaml"
    path.write_text(MODEL_YAML, encoding="utf-8")
    config = load_audit_config(path)
    planned = plan_audit(config, tmp_path)
    result = run(config, planned, tmp_path)
    assert len(result.scenarios) == 2


def test_a_plain_audit_validates_the_options_once(tmp_path: Path, validations: list[Any]) -> None:
    _audit(tmp_path, run_audit)
    assert validations == [{"model_seed": 0}]


def test_an_audit_with_one_job_validates_the_options_once(
    tmp_path: Path, validations: list[Any]
) -> None:
    _audit(tmp_path, lambda *args: run_audit_jobs(*args, jobs=1))
    assert validations == [{"model_seed": 0}]


def test_a_changed_engine_section_is_validated_afresh(validations: list[Any]) -> None:
    from specseed.plan.planning import base_settings
    from specseed.scenarios.schema import AuditConfig, EngineConfig

    config = AuditConfig(engine=EngineConfig(options={"model_seed": 1}))
    assert options_seed(base_settings(config, Path.cwd())) == 1
    assert options_seed(base_settings(config, Path.cwd())) == 1  # remembered
    engine = config.engine.model_copy(update={"options": {"model_seed": 2}})
    changed = config.model_copy(update={"engine": engine})
    assert options_seed(base_settings(changed, Path.cwd())) == 2
    assert len(validations) == 2


def options_seed(settings: Any) -> int:
    assert isinstance(settings.options, ReferenceOptions)
    return settings.options.model_seed
