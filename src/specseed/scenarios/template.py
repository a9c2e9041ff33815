"""The commented model.yaml that ``specseed init`` writes, generated from the schema.

Values are the defaults of ``AuditConfig`` and comments are the fields' descriptions, so the
template can never disagree with what the loader accepts.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from specseed.scenarios.schema import AuditConfig


def _yaml_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    return json.dumps(str(value)) if any(c in str(value) for c in ":#[]{},") else str(value)


def _section(model: BaseModel, indent: str) -> list[str]:
    lines = []
    data = model.model_dump(mode="json")
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            lines.append(f"{indent}{name}:")
            lines.extend(_section(value, indent + "  "))
            continue
        comment = f"  # {field.description}" if field.description else ""
        lines.append(f"{indent}{name}: {_yaml_value(data[name])}{comment}")
    return lines


def model_yaml_template() -> str:
    """The default audit configuration as commented YAML."""
    header = [
        "# specseed model.yaml: the engine to audit and the scenarios to replay.",
        "# Run it with: specseed audit model.yaml",
        "# Every key is optional; these are the defaults (the embedded reference engine on",
        "# the CPU with the whole built-in scenario library). JSON Schema: specseed schema",
        "",
    ]
    return "\n".join(header + _section(AuditConfig(), "")) + "\n"
