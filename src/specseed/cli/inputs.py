"""Command-line checks made before an audit runs: flags read as files, outputs onto inputs
(``check_output_paths`` lives with the audit, ``specseed.workflows.outputs``, and is re-exported).

Each raises ``InputError`` (exit 2) with one line naming the path and the fix, so that no
engine time is spent and no input file is overwritten.
"""

from __future__ import annotations

from pathlib import Path

from specseed.core.errors import InputError
from specseed.workflows.outputs import check_output_paths

__all__ = ["FLAG", "check_model_yaml_argument", "check_output_paths"]

FLAG = ""
"""Metavar of on/off flags: typer shows ``<bool>`` otherwise, as if the flag took a value."""

_BOOLEAN_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "1", "0"})


def check_model_yaml_argument(model_yaml: Path | None) -> None:
    """``--matrix true`` makes ``true`` the MODEL_YAML argument: say that flags take no value."""
    if model_yaml is None or model_yaml.exists():
        return
    if str(model_yaml).lower() in _BOOLEAN_WORDS:
        raise InputError(
            f"{model_yaml}: no such model.yaml (flags such as --matrix take no value)",
            hint="write `--matrix`, not `--matrix true`",
        )
