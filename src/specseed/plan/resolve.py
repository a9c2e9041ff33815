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

from specseed.core.errors import InputError
from specseed.plan.planning import PlannedScenario, plan_scenarios, settings_from

if TYPE_CHECKING:
    from specseed.engine_adapters.base import EngineSettings
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


def resolve_audit(
    source: ConfigSource = None, *, base_dir: Path | None = None, scenarios: bool = True
) -> ResolvedAudit:
    """Read, validate and plan an audit once. ``ScenarioError`` (every problem found, in one
    error) for an invalid file or dict, ``InputError`` for something that is neither.

    A path is read and parsed once; whether it is a model.yaml or a scenario file is decided
    from that parse. The engine section, its options, its checkpoint directories and every
    scenario are validated in one pass (``scenarios.loader.validate_audit``), the engine
    settings built once from the validated options, and every scenario planned with them.
    ``scenarios=False``: the engine section only, nothing planned (``specseed serve``)."""
    from specseed.checks import CHECKS, registered_comparison_ids
    from specseed.scenarios import loader
    from specseed.scenarios.schema import AuditConfig

    ids: dict[str, Any] = {
        "check_ids": tuple(CHECKS),
        "comparison_ids": registered_comparison_ids(),
        "scenarios": scenarios,
    }
    model_yaml: Path | None = None
    scenario_file = False
    if source is None or isinstance(source, AuditConfig):
        given = AuditConfig() if source is None else source
        label = DEFAULT_SOURCE if source is None else PYTHON_SOURCE
        where = base_dir if base_dir is not None else Path.cwd()
        validated = loader.validate_audit(given.model_dump(), "", None, where, **ids)
        config = given
    elif isinstance(source, (str, Path)):
        path = Path(source)
        label = str(path)
        where = base_dir if base_dir is not None else path.parent
        data, node = loader.read_yaml(path)
        if loader.is_scenario_data(data):
            validated = loader.validate_scenario_audit(
                data, node, path.name, comparison_ids=registered_comparison_ids()
            )
            scenario_file = True
        else:
            validated = loader.validate_audit(data, label, node, where, **ids)
            model_yaml = path
        config = validated.config
    elif isinstance(source, Mapping):
        label = PYTHON_SOURCE
        where = base_dir if base_dir is not None else Path.cwd()
        validated = loader.validate_audit(dict(source), "", None, where, **ids)
        config = validated.config
    else:
        raise InputError(
            f"cannot audit a {type(source).__name__}: give a path, a dict or AuditConfig"
        )
    engine = settings_from(config.engine, validated.options, where)
    planned = tuple(plan_scenarios(validated.scenarios, engine))
    return ResolvedAudit(
        config=config,
        engine=engine,
        planned=planned,
        base_dir=where,
        source=label,
        inputs=_inputs(model_yaml, Path(label) if scenario_file else None, planned, where),
        model_yaml=model_yaml,
        scenario_file=scenario_file,
    )


def _inputs(
    model_yaml: Path | None,
    scenario_file: Path | None,
    planned: tuple[PlannedScenario, ...],
    where: Path,
) -> tuple[Path, ...]:
    """The files an audit read: model.yaml (or the scenario file given in its place) and
    every scenario file it names."""
    if scenario_file is not None:
        return (scenario_file,)
    inputs = [model_yaml] if model_yaml is not None else []
    for p in planned:
        name = p.loaded.source
        if not name.startswith("builtin:"):
            path = Path(name) if Path(name).is_absolute() else where / name
            if path not in inputs:
                inputs.append(path)
    return tuple(inputs)


__all__ = ["DEFAULT_SOURCE", "PYTHON_SOURCE", "ConfigSource", "ResolvedAudit", "resolve_audit"]
