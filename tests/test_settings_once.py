"""The engine options of model.yaml are validated once per audit: when ``resolve_audit`` reads
it. Planning, the runner and the worker processes of ``--jobs`` take the settings the plans
carry."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from specseed.engine_adapters.reference.options import ReferenceOptions
from specseed.plan.resolve import resolve_audit
from specseed.run.execute import run_audit
from specseed.run.parallel import run_audit_jobs

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
    resolved = resolve_audit(path)
    result = run(resolved.config, list(resolved.planned), tmp_path)
    assert len(result.scenarios) == 2


def test_a_plain_audit_validates_the_options_once(tmp_path: Path, validations: list[Any]) -> None:
    _audit(tmp_path, run_audit)
    assert validations == [{"model_seed": 0}]


def test_an_audit_with_one_job_validates_the_options_once(
    tmp_path: Path, validations: list[Any]
) -> None:
    _audit(tmp_path, lambda *args: run_audit_jobs(*args, jobs=1))
    assert validations == [{"model_seed": 0}]


def test_the_resolved_settings_carry_the_options_validated(validations: list[Any]) -> None:
    """The options are validated with the rest of the config and carried in the settings;
    every plan holds those same settings, so nothing validates them again."""
    resolved = resolve_audit({"engine": {"options": {"model_seed": 1}}, "scenarios": ["uptime"]})
    assert options_seed(resolved.engine) == 1
    assert all(p.base is resolved.engine for p in resolved.planned)
    assert all(
        plan.settings.options is resolved.engine.options
        for p in resolved.planned
        for plan in p.plans
    )
    assert validations == [{"model_seed": 1}]


def options_seed(settings: Any) -> int:
    assert isinstance(settings.options, ReferenceOptions)
    return settings.options.model_seed
