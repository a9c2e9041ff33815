"""Load and validate model.yaml and scenario files, with errors a user can act on.

Every problem names the file, the line, the field path and a fix; unknown keys get a
"did you mean" from the allowed names. Nothing is returned until every file validates, so an
audit never starts on half-valid input.
"""

from __future__ import annotations

import stat
from collections.abc import Collection
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from specseed.core.errors import ScenarioError
from specseed.core.wording import did_you_mean
from specseed.engine_adapters.registry import engine_names
from specseed.scenarios.schema import (
    CHECK_IDS_CONTEXT,
    COMPARISON_IDS_CONTEXT,
    AuditConfig,
    CrossReferenceError,
    Scenario,
    raw_cross_reference_problems,
)

BUILTIN = "builtin"
LIBRARY_PACKAGE = "specseed.scenarios.library"


@dataclass(frozen=True)
class LoadedScenario:
    """A validated scenario and where it came from."""

    scenario: Scenario
    source: str
    """``builtin:<name>`` or the file path as given."""
    text: str | None = None
    """The scenario's YAML, for one made in memory (``specseed search``): no file holds it."""


# -- reading files -----------------------------------------------------------------------

MAX_FILE_BYTES = 1 << 20
"""Largest model.yaml or scenario file read (1 MiB; the library's largest is under 2 KiB)."""
MAX_DEPTH = 64
"""Deepest YAML nesting accepted (a scenario nests 5 levels)."""
MAX_EXPANDED_NODES = MAX_FILE_BYTES // 2
"""Most YAML nodes a file may stand for once its aliases are expanded (524,288): as many as a
file under MAX_FILE_BYTES can write out without aliases (``[1,1,...]``, two bytes a node), so
no file is refused that could be written plainly, and aliases ("billion laughs") cannot make
validation do more work than the largest plain file."""
INT_TAG = "tag:yaml.org,2002:int"
MAX_INT_CHARS = 40
"""Longest integer literal accepted: 2**64 has 20 digits; 40 leaves room for a sign, ``_``
separators and ``0x``/``0b`` forms, and is far below where ``int()`` gets slow."""


def read_source(path: Path) -> str:
    """A model.yaml or scenario file's text: a regular file, at most 1 MiB, UTF-8."""
    try:
        # Refuse devices and pipes (/dev/zero, a FIFO) before opening them: opening a FIFO
        # blocks until something writes to it.
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError
        if not stat.S_ISREG(mode):
            raise ScenarioError(
                f"{path}: not a regular file",
                [f"{path}: not a regular file (a device, pipe or socket). Give a YAML file."],
            )
        with path.open("rb") as handle:
            # Read one byte past the limit: st_size is 0 for some files (/proc) that still
            # have content.
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ScenarioError(
            f"{path}: no such file", [f"{path}: no such file. Check the path."]
        ) from None
    except IsADirectoryError:
        raise ScenarioError(
            f"{path}: is a directory", [f"{path}: is a directory. Give a YAML file."]
        ) from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read", [f"{path}: {exc.strerror}."]) from None
    if len(data) > MAX_FILE_BYTES:
        raise ScenarioError(
            f"{path}: too large",
            [f"{path}: larger than {MAX_FILE_BYTES // (1 << 20)} MiB. Split it into scenarios."],
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ScenarioError(
            f"{path} is not UTF-8",
            [f"{path}:{line}: byte 0x{data[exc.start]:02x} is not UTF-8. Save the file as UTF-8."],
        ) from None


# -- YAML with line numbers --------------------------------------------------------------


def _expansion_problem(root: yaml.Node, source: str) -> str | None:
    """The first node whose aliases expand it past MAX_EXPANDED_NODES, as a problem.

    Counts on the composed node graph, where an alias is the node it names (shared, not
    copied): sizes are summed children first, each node once, so the count costs the size of
    the text, not of the expansion."""
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in size:
            continue
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        if not children_done:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in size)
            continue
        # Capped so the sums stay small integers however far a bomb would expand.
        total = min(MAX_EXPANDED_NODES + 1, 1 + sum(size[id(child)] for child in children))
        size[id(node)] = total
        if total > MAX_EXPANDED_NODES:
            return (
                f"{source}:{node.start_mark.line + 1}: its aliases (*name) expand this to "
                f"more than {MAX_EXPANDED_NODES:,} YAML nodes, more than a "
                f"{MAX_FILE_BYTES // (1 << 20)} MiB file holds written out. Use fewer aliases."
            )
    return None


def _structure_problems(root: yaml.Node, source: str) -> list[str]:
    """Nesting deeper than MAX_DEPTH and duplicate mapping keys, at any depth.

    Iterative and visiting each node once: anchors make the node graph a DAG, and a recursive
    or per-path walk would be exponential on an alias bomb.
    """
    expansion = _expansion_problem(root, source)
    if expansion is not None:
        return [expansion]
    problems: list[str] = []
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if depth > MAX_DEPTH:
            return [
                f"{source}:{node.start_mark.line + 1}: nested more than {MAX_DEPTH} levels deep. "
                "Flatten the YAML."
            ]
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    line = key.start_mark.line + 1
                    if key.value in first:
                        problems.append(
                            f"{source}:{line}: duplicate key '{key.value}' (first at line "
                            f"{first[key.value]}). Remove or merge one of them."
                        )
                    else:
                        first[key.value] = line
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, depth + 1) for item in node.value)
        elif node.tag == INT_TAG and len(node.value) > MAX_INT_CHARS:
            # Checked on the node, before construction: int() of a long digit string is
            # slow, and past 4300 digits Python refuses it with a ValueError traceback.
            digits = sum(c.isdigit() for c in node.value)
            problems.append(
                f"{source}:{node.start_mark.line + 1}: an integer of {digits} digits; no field "
                f"takes one that long (seeds are uint64: 0 <= seed < 2**64, at most 20 "
                "digits). Write a smaller number."
            )
    return problems


def _parse_yaml(text: str, source: str) -> tuple[Any, yaml.Node | None]:
    try:
        # The reader checks every character when it is built: a raw control byte (ESC, NUL)
        # is refused here, before any parsing.
        loader = yaml.SafeLoader(text)
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise ScenarioError(
            f"{source} is not valid YAML",
            [
                f"{source}:{line}: the character {exc.character:#06x} is not allowed in YAML "
                "(a control or non-printable character). Remove it, or write it as an "
                'escape in a double-quoted string ("\\x07").'
            ],
        ) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        problems = _structure_problems(node, source)
        if problems:
            raise ScenarioError(f"{source} does not validate", problems)
        return loader.construct_document(node), node
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(
            f"{source} is not valid YAML",
            [f"{where}: {problem}. Fix the YAML syntax there."],
        ) from None
    except RecursionError:
        # The composer recurses once per level: nesting deep enough to exhaust the stack
        # never reaches _structure_problems.
        raise ScenarioError(
            f"{source} does not validate",
            [
                f"{source}:{loader.line + 1}: nested more than {MAX_DEPTH} levels deep. "
                "Flatten the YAML."
            ],
        ) from None
    finally:
        loader.dispose()


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


def _literal_values(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The allowed values of the ``Literal`` field at ``loc`` (empty if it is not one)."""
    owner = _model_at(model, loc[:-1]) if loc else None
    field = owner.model_fields.get(str(loc[-1])) if owner is not None else None
    pending = [field.annotation] if field is not None else []
    while pending:
        annotation = pending.pop()
        if get_origin(annotation) is Literal:
            return [str(v) for v in get_args(annotation)]
        pending.extend(get_args(annotation))
    return []


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
        moved_to = _moved_to_options(key) if loc[:-1] == ("engine",) else None
        if moved_to is not None:
            return (
                f"unknown key '{key}': it is an option of the {moved_to} engine. Write it "
                f"under engine.options ({key}: ...)."
            )
        allowed = sorted(owner.model_fields) if owner is not None else []
        fix = did_you_mean(key, allowed, f"Allowed keys: {', '.join(allowed)}.")
        return f"unknown key '{key}'. {fix}"
    if kind == "missing":
        return "required field is missing. Add it."
    if kind == "literal_error":
        allowed = _literal_values(model, loc)
        if allowed:
            value = error.get("input")
            fix = did_you_mean(str(value), allowed, f"Expected one of: {', '.join(allowed)}.")
            return f"unknown {loc[-1]} {value!r}. {fix}"
    message = str(error["msg"])
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    value = error.get("input")
    if (
        kind not in {"model_type", "dict_type"}
        and not isinstance(value, (dict, list))
        and repr(value) not in message
    ):
        message += f" (got {value!r})"
    return message


def _validate(
    model: type[BaseModel],
    data: Any,
    source: str,
    node: yaml.Node | None,
    prefix: tuple[int | str, ...] = (),
    context: dict[str, Any] | None = None,
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
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        problems = []
        index = _NodeIndex(node)

        def add(loc: tuple[int | str, ...], message: str) -> None:
            problems.append(_problem(source, index.line_of(prefix + loc), prefix + loc, message))

        crossed = False
        for error in exc.errors():
            loc = _clean_loc(tuple(error["loc"]))
            cause = error.get("ctx", {}).get("error")
            if isinstance(cause, CrossReferenceError):
                crossed = True
                for item_loc, message in cause.problems:
                    add(loc + item_loc, message)
            else:
                add(loc, _describe(dict(error), model))
        if model is Scenario and not crossed:
            # A field error stops pydantic before the cross-references: find those in the
            # raw YAML, so that one pass reports everything.
            for item_loc, message in raw_cross_reference_problems(data):
                add(item_loc, message)
        raise ScenarioError(f"{source} does not validate", problems) from None


def _moved_to_options(key: str) -> str | None:
    """The engine whose option ``key`` became when engines declared their own options
    (``EngineInfo.moved_options``), or None."""
    from specseed.engine_adapters.registry import engines

    return next((name for name, info in engines().items() if key in info.moved_options), None)


def _options_model(name: str) -> type[BaseModel]:
    from specseed.engine_adapters.base import NoOptions
    from specseed.engine_adapters.registry import get_engine

    return get_engine(name).options_model() or NoOptions


def _options_problems(
    name: str, raw: Any, source: str, node: yaml.Node | None
) -> tuple[BaseModel | None, list[str]]:
    """``engine.options`` validated against the options model of engine ``name``: the options,
    or every problem with them."""
    from specseed.engine_adapters.base import NoOptions

    model = _options_model(name)
    if model is NoOptions and raw:
        line = _line_of(node, ("engine", "options"))
        where = f"{source}:{line}: " if line else (f"{source}: " if source else "")
        return None, [f"{where}engine.options: engine {name} takes no options. Remove them."]
    try:
        return _validate(model, dict(raw), source, node, prefix=("engine", "options")), []
    except ScenarioError as exc:
        return None, exc.problems or [exc.message]


def engine_options(config: AuditConfig, source: str, node: yaml.Node | None = None) -> BaseModel:
    """``engine.options`` validated against the options model of ``engine.name``.

    ``resolve_audit`` validates them once and carries them in ``EngineSettings.options``;
    this is for a caller that holds only an ``AuditConfig``."""
    options, problems = _options_problems(config.engine.name, config.engine.options, source, node)
    if problems:
        raise ScenarioError(f"{source} does not validate", problems)
    assert options is not None
    return options


CHECKPOINT_KEYS = ("checkpoint", "draft_checkpoint")
CHECKPOINT_CONFIG = "config.json"
"""What every engine reads first from a checkpoint directory (the reference engine's
``read_config``, vLLM's and TensorRT-LLM's model config)."""


def checkpoint_problem(value: str | Path, base_dir: Path) -> str | None:
    """What is wrong with a checkpoint directory named in model.yaml (relative to
    ``base_dir``), checked before any engine loads; None when it looks usable."""
    path = Path(value)
    path = path if path.is_absolute() else base_dir / path
    fix = (
        "Point it at a local Hugging Face checkpoint directory (config.json + safetensors); "
        "a relative path is taken from model.yaml's folder (`specseed make-checkpoint DIR` "
        "writes one)."
    )
    try:
        if not path.exists():
            return f"{path}: no such directory. {fix}"
        if not path.is_dir():
            return f"{path}: not a directory. {fix}"
        config = path / CHECKPOINT_CONFIG
        if not config.is_file():
            return f"{path}: no {CHECKPOINT_CONFIG} in it. {fix}"
        with config.open("rb"):
            pass
    except OSError as exc:
        return f"{path}: cannot read it ({exc.strerror}). {fix}"
    return None


def _checkpoint_problems(
    engine: Any, source: str, node: yaml.Node | None, base_dir: Path
) -> list[str]:
    problems = []
    index = _NodeIndex(node)
    for key in CHECKPOINT_KEYS:
        value = engine.get(key) if isinstance(engine, dict) else None
        if not isinstance(value, (str, Path)) or not str(value):
            continue  # null, or a wrong type the schema reports
        problem = checkpoint_problem(value, base_dir)
        if problem is not None:
            problems.append(
                _problem(source, index.line_of(("engine", key)), ("engine", key), problem)
            )
    return problems


def _problem(source: str, line: int | None, loc: tuple[int | str, ...], message: str) -> str:
    """One problem line: ``file:line: field.path: message`` (no file for a dict config)."""
    where = f"{source}:{line}: " if source and line else (f"{source}: " if source else "")
    return f"{where}{_format_loc(loc)}: {message}"


@dataclass(frozen=True)
class ValidatedConfig:
    """model.yaml's own sections validated: the config and its engine's options."""

    config: AuditConfig
    options: BaseModel
    """``engine.options`` as the options model of ``engine.name``."""


def _config_problems(
    data: Any,
    source: str,
    node: yaml.Node | None,
    base_dir: Path | None,
    check_ids: Collection[str],
) -> tuple[ValidatedConfig | None, list[str]]:
    """model.yaml's data validated in one pass: the top level and engine keys, the engine's
    options (when its name is known) and the checkpoint directories (when ``base_dir`` is
    given). Either the result or every problem."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ScenarioError(
            f"{source} is not a YAML mapping",
            [
                f"{source or '(the config)'}:1: the file must be a mapping of keys to values "
                f"(got {type(data).__name__})."
            ],
        )
    context = {CHECK_IDS_CONTEXT: tuple(check_ids)} if check_ids else None
    problems: list[str] = []
    config: AuditConfig | None = None
    try:
        validated = _validate(AuditConfig, data, source, node, context=context)
        assert isinstance(validated, AuditConfig)
        config = validated
    except ScenarioError as exc:
        problems.extend(exc.problems or [exc.message])
    engine = data.get("engine")
    engine = engine if isinstance(engine, dict) else {}
    name = engine.get("name", "reference")
    raw_options = engine.get("options") or {}
    options: BaseModel | None = None
    if isinstance(name, str) and name in engine_names() and isinstance(raw_options, dict):
        options, more = _options_problems(name, raw_options, source, node)
        problems.extend(more)
    if base_dir is not None:
        problems.extend(_checkpoint_problems(engine, source, node, base_dir))
    if problems or config is None or options is None:
        raise_problems = problems or [f"{source}: engine: does not validate."]
        return None, raise_problems
    return ValidatedConfig(config, options), []


# -- public API ---------------------------------------------------------------------------


def _comparison_context(comparison_ids: Collection[str]) -> dict[str, Any] | None:
    return {COMPARISON_IDS_CONTEXT: tuple(comparison_ids)} if comparison_ids else None


def parse_audit_config(
    text: str, source: str, check_ids: Collection[str] = (), *, base_dir: Path | None = None
) -> AuditConfig:
    """Validate model.yaml text (not the scenarios it names); ``check_ids``, when given, are
    the ids checks.skip may name; with ``base_dir`` (model.yaml's folder) the checkpoint
    directories are checked too. Every problem of the engine section and its options comes in
    one ``ScenarioError``."""
    data, node = _parse_yaml(text, source)
    validated, problems = _config_problems(data, source, node, base_dir, check_ids)
    if validated is None:
        raise ScenarioError(f"{source} does not validate", problems)
    return validated.config


def parse_scenario(text: str, source: str, comparison_ids: Collection[str] = ()) -> Scenario:
    """Validate a scenario file's text; ``comparison_ids``, when given, are the ids ``expect``
    may name (the registered ones; default: ``COMPARISON_CHECK_IDS``)."""
    data, node = _parse_yaml(text, source)
    return _scenario(data, source, node, comparison_ids)


def _scenario(
    data: Any, source: str, node: yaml.Node | None, comparison_ids: Collection[str]
) -> Scenario:
    result = _validate(Scenario, data, source, node, context=_comparison_context(comparison_ids))
    assert isinstance(result, Scenario)
    return result


def is_audit_config(text: str, source: str) -> bool:
    """Whether a file's text is a model.yaml (it has a top-level model.yaml section) rather
    than a scenario. Raises ``ScenarioError`` when it is not valid YAML."""
    data, _ = _parse_yaml(text, source)
    return isinstance(data, dict) and is_model_keys(data)


SCENARIO_KEYS = frozenset({"name", "requests", "runs"})
"""Top-level keys that only a scenario file has (model.yaml has engine, scenarios, checks)."""


def is_scenario_data(data: Any) -> bool:
    """Whether a parsed file is a scenario rather than a model.yaml: it has a key only a
    scenario has and none of model.yaml's."""
    return isinstance(data, dict) and bool(SCENARIO_KEYS & set(data)) and not is_model_keys(data)


def is_model_keys(data: dict[Any, Any]) -> bool:
    return bool({"engine", "scenarios", "checks"} & set(data))


def load_audit_config(path: Path, check_ids: Collection[str] = ()) -> AuditConfig:
    """Read and validate a model.yaml file, its checkpoint directories included (see
    ``parse_audit_config``); its scenarios are validated when planned."""
    return parse_audit_config(read_source(path), str(path), check_ids, base_dir=path.parent)


def read_yaml(path: Path, source: str | None = None) -> tuple[Any, yaml.Node | None]:
    """A model.yaml or scenario file read and parsed once: its data and its node tree (for
    the line numbers of problems)."""
    label = str(path) if source is None else source
    return _parse_yaml(read_source(path), label)


@dataclass(frozen=True)
class ValidatedAudit:
    """An audit's input validated in one pass: model.yaml's sections, the engine's options and
    every scenario it names."""

    config: AuditConfig
    options: BaseModel
    """``engine.options`` as the options model of ``engine.name``."""
    scenarios: tuple[LoadedScenario, ...]


def validate_audit(
    data: Any,
    source: str,
    node: yaml.Node | None,
    base_dir: Path,
    *,
    check_ids: Collection[str] = (),
    comparison_ids: Collection[str] = (),
    scenarios: bool = True,
) -> ValidatedAudit:
    """model.yaml's parsed ``data`` validated with everything it names, in one pass: the top
    level, the engine section, its options, its checkpoint directories (relative to
    ``base_dir``) and every scenario. One ``ScenarioError`` holds every problem found, each
    with its file:line (none for a config given as a dict: ``source`` empty), field path and
    fix. ``scenarios=False``: model.yaml's own sections only (no scenario is read)."""
    validated, problems = _config_problems(data, source, node, base_dir, check_ids)
    entries = data.get("scenarios", ["builtin"]) if isinstance(data, dict) else ["builtin"]
    entries = entries if scenarios else []
    names = [e for e in entries if isinstance(e, str)] if isinstance(entries, list) else []
    loaded: list[LoadedScenario] = []
    try:
        loaded = resolve_scenarios(names, base_dir, comparison_ids)
    except ScenarioError as exc:
        problems.extend(exc.problems or [exc.message])
    if validated is None or problems:
        label = source or "the audit config"
        raise ScenarioError(f"{label} does not validate", problems)
    return ValidatedAudit(validated.config, validated.options, tuple(loaded))


def validate_scenario_audit(
    data: Any,
    node: yaml.Node | None,
    entry: str,
    *,
    comparison_ids: Collection[str] = (),
) -> ValidatedAudit:
    """A scenario file given where a model.yaml is expected, already parsed: the audit of
    that one scenario on the default engine (``entry``: its name as model.yaml would list it,
    relative to its folder)."""
    try:
        scenario = _scenario(data, entry, node, comparison_ids)
    except ScenarioError as exc:
        raise ScenarioError(
            "the scenarios do not validate", exc.problems or [exc.message]
        ) from None
    config = AuditConfig(scenarios=[entry])
    options = _options_model(config.engine.name)()
    return ValidatedAudit(config, options, (LoadedScenario(scenario, entry),))


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


def load_library_scenario(name: str, comparison_ids: Collection[str] = ()) -> LoadedScenario:
    source = f"builtin:{name}"
    if name not in library_names():
        fix = did_you_mean(name, library_names(), "See `specseed scenarios list`.")
        raise ScenarioError(
            f"no built-in scenario {name!r}", [f"{source}: unknown scenario. {fix}"]
        )
    return LoadedScenario(parse_scenario(library_text(name), source, comparison_ids), source)


def _looks_like_path(entry: str) -> bool:
    return entry.endswith((".yaml", ".yml")) or "/" in entry or "\\" in entry


def resolve_scenarios(
    entries: list[str], base_dir: Path, comparison_ids: Collection[str] = ()
) -> list[LoadedScenario]:
    """Load every scenario model.yaml names; collect all problems before raising.
    ``comparison_ids``: as for ``parse_scenario``."""
    loaded: list[LoadedScenario] = []
    problems: list[str] = []
    for entry in entries:
        try:
            if entry == BUILTIN:
                library = (load_library_scenario(name, comparison_ids) for name in library_names())
                loaded.extend(item for item in library if item.scenario.default_audit)
            elif _looks_like_path(entry):
                path = Path(entry) if Path(entry).is_absolute() else base_dir / entry
                scenario = parse_scenario(read_source(path), entry, comparison_ids)
                loaded.append(LoadedScenario(scenario, entry))
            else:
                loaded.append(load_library_scenario(entry, comparison_ids))
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
