"""One resolved audit: a model.yaml path, a dict or an ``AuditConfig`` turned, once, into
everything an audit needs.

``resolve_audit`` is the only reader of model.yaml: the CLI, the Python API and the pytest
plugin call it, and the workflows take its ``ResolvedAudit``; nothing reads the file again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from specseed.core.errors import InputError, ScenarioError

if TYPE_CHECKING:
    from specseed.engine_adapters.base import EngineSettings
    from specseed.plan.planning import PlannedScenario
    from specseed.scenarios.schema import AuditConfig

DEFAULT_SOURCE = "(built-in default)"
"""The source of an audit with no model.yaml: the reference engine and the built-in library."""

PYTHON_SOURCE = "(python)"
"""The source of an audit of a config built in Python (a dict or an ``AuditConfig``)."""

ConfigSource = Union[str, Path, "AuditConfig", Mapping[str, Any], None]
"""What an audit is resolved from: a model.yaml (or scenario file) path, an ``AuditConfig``,
its dict form, or None (the reference engine on the built-in library)."""


@dataclass(frozen=True)
class ResolvedAudit:
    """An audit's input, read and validated once."""

    config: AuditConfig
    """model.yaml as validated."""
    engine: EngineSettings
    """The engine section, typed: shared keys as fields, the engine's own options as its
    options model (chosen by engine name), paths made absolute against ``base_dir``."""
    planned: tuple[PlannedScenario, ...]
    """Every scenario model.yaml names, validated, with its runs planned."""
    base_dir: Path
    """The folder relative paths are taken from (model.yaml's)."""
    source: str
    """The file it was read from, or ``DEFAULT_SOURCE`` / ``PYTHON_SOURCE``."""
    inputs: tuple[Path, ...]
    """The files read (model.yaml and every scenario file): no output may overwrite them."""
    model_yaml: Path | None
    """The model.yaml read, when the audit came from one."""
    scenario_file: bool = False
    """The path given was a scenario file, audited on the default engine."""


def resolve_audit(source: ConfigSource = None, *, base_dir: Path | None = None) -> ResolvedAudit:
    """Read, validate and plan an audit once. ``ScenarioError`` (every problem found) for an
    invalid file or dict, ``InputError`` for something that is neither."""
    from specseed.checks import CHECKS
    from specseed.plan.planning import engine_settings, plan_audit
    from specseed.scenarios.loader import load_audit_config, scenario_given_as_model
    from specseed.scenarios.schema import AuditConfig

    model_yaml: Path | None = None
    scenario_file = False
    if source is None:
        config, label = AuditConfig(), DEFAULT_SOURCE
        where = base_dir if base_dir is not None else Path.cwd()
    elif isinstance(source, AuditConfig):
        config, label = source, PYTHON_SOURCE
        where = base_dir if base_dir is not None else Path.cwd()
    elif isinstance(source, (str, Path)):
        path = Path(source)
        label = str(path)
        where = base_dir if base_dir is not None else path.parent
        scenario_only = scenario_given_as_model(path)
        if scenario_only is not None:
            config, scenario_file = scenario_only, True
        else:
            config, model_yaml = load_audit_config(path, check_ids=CHECKS), path
    elif isinstance(source, Mapping):
        from pydantic import ValidationError

        try:
            config = AuditConfig.model_validate(dict(source))
        except ValidationError as exc:
            problems = [
                f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in exc.errors()
            ]
            raise ScenarioError("the audit config does not validate", problems=problems) from None
        label = PYTHON_SOURCE
        where = base_dir if base_dir is not None else Path.cwd()
    else:
        raise InputError(
            f"cannot audit a {type(source).__name__}: give a path, a dict or AuditConfig"
        )
    planned = tuple(plan_audit(config, where, label))
    inputs = [model_yaml] if model_yaml is not None else []
    if scenario_file:
        inputs.append(Path(label))
    for p in planned:
        name = p.loaded.source
        if not name.startswith("builtin:"):
            path = Path(name) if Path(name).is_absolute() else where / name
            if path not in inputs:
                inputs.append(path)
    return ResolvedAudit(
        config=config,
        engine=engine_settings(list(planned), config, where),
        planned=planned,
        base_dir=where,
        source=label,
        inputs=tuple(inputs),
        model_yaml=model_yaml,
        scenario_file=scenario_file,
    )


__all__ = ["DEFAULT_SOURCE", "PYTHON_SOURCE", "ConfigSource", "ResolvedAudit", "resolve_audit"]
