"""Load and validate model.yaml and scenario files, with errors a user can act on.

Every problem names the file, the line, the field path and a fix; unknown keys get a
"did you mean" from the allowed names. Nothing is returned until every file validates, so an
audit never starts on half-valid input.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from specseed.errors import ScenarioError
from specseed.scenarios.schema import AuditConfig, Scenario

BUILTIN = "builtin"
LIBRARY_PACKAGE = "specseed.scenarios.library"


@dataclass(frozen=True)
class LoadedScenario:
    """A validated scenario and where it came from."""

    scenario: Scenario
    source: str
    """``builtin:<name>`` or the file path as given."""


# -- YAML with line numbers --------------------------------------------------------------


def _parse_yaml(text: str, source: str) -> tuple[Any, yaml.Node | None]:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(
            f"{source} is not valid YAML",
            [f"{where}: {problem}. Fix the YAML syntax there."],
        ) from None
    return data, node


class _NodeIndex:
    """Finds the line of a field path in a YAML node tree; each mapping's keys are indexed
    the first time a path goes through it. Walking a mapping's keys once per error made error
    reporting quadratic (38k unknown keys took minutes)."""

    def __init__(self, root: yaml.Node | None) -> None:
        self.root = root
        self._keys: dict[int, dict[str, yaml.Node]] = {}

    def _child(self, node: yaml.MappingNode, key: str) -> yaml.Node | None:
        keys = self._keys.get(id(node))
        if keys is None:
            keys = {}
            for key_node, value in node.value:
                keys.setdefault(str(key_node.value), value)  # the first, as YAML reads it
            self._keys[id(node)] = keys
        return keys.get(key)

    def line_of(self, loc: tuple[int | str, ...]) -> int | None:
        """1-based line of the YAML node at a field path (the deepest node that exists)."""
        node = self.root
        best = node.start_mark.line + 1 if node is not None else None
        for part in loc:
            child: yaml.Node | None = None
            if isinstance(node, yaml.MappingNode):
                child = self._child(node, str(part))
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
                child = node.value[part] if 0 <= part < len(node.value) else None
            if child is None:
                return best
            node = child
            best = node.start_mark.line + 1
        return best


def _line_of(node: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """1-based line of the YAML node at a field path (the deepest node that exists)."""
    return _NodeIndex(node).line_of(loc)


# -- pydantic errors to user messages -----------------------------------------------------


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The pydantic model class that holds the field at ``loc`` (walks nested models)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = current.model_fields.get(str(part))
        if field is None:
            return current
        current = _unwrap_model(field.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap_model(annotation: Any) -> Any:
    """The model class inside ``X | None``, ``list[X]`` or ``dict[str, X]`` annotations."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _unwrap_model(arg)
        if found is not None:
            return found
    return None


def _format_loc(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _clean_loc(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    # pydantic puts union branch names ("list[int]", "str", "function-after[...]") in loc.
    return tuple(
        p
        for p in loc
        if not (isinstance(p, str) and ("[" in p or p in {"str", "int", "float", "bool"}))
    )


def _describe(error: dict[str, Any], model: type[BaseModel]) -> str:
    loc = _clean_loc(tuple(error["loc"]))
    kind = error["type"]
    if kind == "extra_forbidden":
        key = str(loc[-1]) if loc else "?"
        owner = _model_at(model, loc[:-1])
        if key in MOVED_TO_OPTIONS and loc[:-1] == ("engine",):
            return (
                f"unknown key '{key}': it is an option of the reference engine. Write it "
                f"under engine.options ({key}: ...)."
            )
        allowed = sorted(owner.model_fields) if owner is not None else []
        close = difflib.get_close_matches(key, allowed, n=1)
        fix = f"Did you mean '{close[0]}'?" if close else f"Allowed keys: {', '.join(allowed)}."
        return f"unknown key '{key}'. {fix}"
    if kind == "missing":
        return "required field is missing. Add it."
    message = str(error["msg"])
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    value = error.get("input")
    if kind not in {"model_type", "dict_type"} and not isinstance(value, (dict, list)):
        message += f" (got {value!r})"
    return message


def _validate(
    model: type[BaseModel],
    data: Any,
    source: str,
    node: yaml.Node | None,
    prefix: tuple[int | str, ...] = (),
) -> BaseModel:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ScenarioError(
            f"{source} is not a YAML mapping",
            [
                f"{source}:1: the file must be a mapping of keys to values (got {type(data).__name__})."
            ],
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = []
        index = _NodeIndex(node)
        for error in exc.errors():
            loc = _clean_loc(tuple(error["loc"]))
            line = index.line_of(prefix + loc)
            where = f"{source}:{line}" if line else source
            problems.append(
                f"{where}: {_format_loc(prefix + loc)}: {_describe(dict(error), model)}"
            )
        raise ScenarioError(f"{source} does not validate", problems) from None


MOVED_TO_OPTIONS = frozenset({"defects", "rng_profile", "model_seed"})
"""Keys that were shared engine keys before engines declared their own options."""


def engine_options(config: AuditConfig, source: str, node: yaml.Node | None = None) -> BaseModel:
    """``engine.options`` validated against the options model of ``engine.name``."""
    from specseed.engine_adapters.base import NoOptions
    from specseed.engine_adapters.registry import get_engine

    engine = config.engine
    model = get_engine(engine.name).options_model() or NoOptions
    if model is NoOptions and engine.options:
        line = _line_of(node, ("engine", "options"))
        where = f"{source}:{line}" if line else source
        raise ScenarioError(
            f"{source} does not validate",
            [f"{where}: engine.options: engine {engine.name} takes no options. Remove them."],
        )
    return _validate(model, dict(engine.options), source, node, prefix=("engine", "options"))


# -- public API ---------------------------------------------------------------------------


def parse_audit_config(text: str, source: str) -> AuditConfig:
    """Validate model.yaml text."""
    data, node = _parse_yaml(text, source)
    result = _validate(AuditConfig, data, source, node)
    assert isinstance(result, AuditConfig)
    engine_options(result, source, node)
    return result


def parse_scenario(text: str, source: str) -> Scenario:
    """Validate a scenario file's text."""
    data, node = _parse_yaml(text, source)
    result = _validate(Scenario, data, source, node)
    assert isinstance(result, Scenario)
    return result


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(
            f"{path}: no such file", [f"{path}: no such file. Check the path."]
        ) from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read", [f"{path}: {exc.strerror}."]) from None


def load_audit_config(path: Path) -> AuditConfig:
    """Read and validate a model.yaml file."""
    return parse_audit_config(_read(path), str(path))


def library_names() -> list[str]:
    """Names of the built-in scenarios, sorted."""
    folder = resources.files(LIBRARY_PACKAGE)
    return sorted(
        entry.name[: -len(".yaml")] for entry in folder.iterdir() if entry.name.endswith(".yaml")
    )


def library_text(name: str) -> str:
    """The YAML text of a built-in scenario."""
    entry = resources.files(LIBRARY_PACKAGE) / f"{name}.yaml"
    return entry.read_text(encoding="utf-8")


def load_library_scenario(name: str) -> LoadedScenario:
    source = f"builtin:{name}"
    if name not in library_names():
        close = difflib.get_close_matches(name, library_names(), n=1)
        fix = f"Did you mean '{close[0]}'?" if close else "See `specseed scenarios list`."
        raise ScenarioError(
            f"no built-in scenario {name!r}", [f"{source}: unknown scenario. {fix}"]
        )
    return LoadedScenario(parse_scenario(library_text(name), source), source)


def _looks_like_path(entry: str) -> bool:
    return entry.endswith((".yaml", ".yml")) or "/" in entry or "\\" in entry


def resolve_scenarios(entries: list[str], base_dir: Path) -> list[LoadedScenario]:
    """Load every scenario model.yaml names; collect all problems before raising."""
    loaded: list[LoadedScenario] = []
    problems: list[str] = []
    for entry in entries:
        try:
            if entry == BUILTIN:
                loaded.extend(load_library_scenario(name) for name in library_names())
            elif _looks_like_path(entry):
                path = Path(entry) if Path(entry).is_absolute() else base_dir / entry
                loaded.append(LoadedScenario(parse_scenario(_read(path), entry), entry))
            else:
                loaded.append(load_library_scenario(entry))
        except ScenarioError as exc:
            problems.extend(exc.problems or [exc.message])
    seen: dict[str, str] = {}
    for item in loaded:
        name = item.scenario.name
        if name in seen and seen[name] != item.source:
            problems.append(
                f"{item.source}: scenario name {name!r} is also used by {seen[name]}. "
                "Rename one of them."
            )
        seen.setdefault(name, item.source)
    if problems:
        raise ScenarioError("the scenarios do not validate", problems)
    # "builtin" plus a library name must not run a scenario twice.
    unique: dict[str, LoadedScenario] = {}
    for item in loaded:
        unique.setdefault(item.scenario.name, item)
    return list(unique.values())
