"""The commented model.yaml that ``specseed init`` writes, generated from the schema.

Values are the defaults of ``AuditConfig`` and comments are the fields' descriptions, so the
template can never disagree with what the loader accepts.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

from pydantic import BaseModel

from specseed.scenarios.schema import AuditConfig, EngineConfig

WIDTH = 80
"""The template's lines fit an 80-column editor or terminal."""


def _yaml_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # flow style, so an empty mapping stays a mapping
        return "{" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value)) if any(c in str(value) for c in ":#[]{},") else str(value)


def _section(model: BaseModel, indent: str, options: BaseModel | None = None) -> list[str]:
    lines = []
    data = model.model_dump(mode="json")
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            lines.append(f"{indent}{name}:")
            lines.extend(_section(value, indent + "  ", options))
            continue
        if name == "options" and options is not None:
            doc = type(options).__doc__ or "engine options"
            lines.extend(_commented(f"{indent}options:", doc, indent))
            lines.extend(_section(options, indent + "  "))
            continue
        lines.extend(
            _commented(f"{indent}{name}: {_yaml_value(data[name])}", field.description, indent)
        )
    return lines


def _commented(line: str, comment: str | None, indent: str) -> list[str]:
    """``line`` with its comment after it when both fit in :data:`WIDTH` columns; else the
    comment above it, wrapped at spaces (a value or a name in it is never split)."""
    if not comment:
        return [line]
    if len(line) + 4 + len(comment) <= WIDTH:
        return [f"{line}  # {comment}"]
    wrapped = textwrap.wrap(
        comment,
        WIDTH - len(indent) - 2,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [*(f"{indent}# {part}" for part in wrapped), line]


def model_yaml_template(engine: str = "reference") -> str:
    """The default audit configuration for ``engine`` as commented YAML (its options with
    their defaults; required options, which have none, are left for the user)."""
    from specseed.engine_adapters.registry import get_engine

    model = get_engine(engine).options_model()
    options: BaseModel | None = None
    if model is not None:
        required = [n for n, f in model.model_fields.items() if f.is_required()]
        placeholders: dict[str, Any] = {n: f"<{n}>" for n in required}
        options = model.model_construct(None, **placeholders)
    header = [
        "# specseed model.yaml: the engine to audit and the scenarios to replay.",
        "# Run it with: specseed audit model.yaml",
        "# Keys with a value are the defaults (for the reference engine: the built-in",
        "# tiny model on the CPU with the whole built-in scenario library).",
        "# JSON Schema: specseed schema",
        "",
    ]
    config = AuditConfig(engine=EngineConfig.model_validate({"name": engine}))
    return "\n".join(header + _section(config, "", options)) + "\n"
