"""Command-line checks made before an audit runs: flags read as files, outputs onto inputs
(``check_output_paths`` lives with the audit, ``specseed.workflows.outputs``, and is re-exported).

Each raises ``InputError`` (exit 2) with one line naming the path and the fix, so that no
engine time is spent and no input file is overwritten.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from specseed.core.errors import InputError
from specseed.workflows.outputs import check_output_paths

__all__ = [
    "ENGINE_LOG",
    "FLAG",
    "check_model_yaml_argument",
    "check_output_paths",
    "engine_log_option",
]

FLAG = ""
"""Metavar of on/off flags: typer shows ``<bool>`` otherwise, as if the flag took a value."""


def engine_log_option(*, bundle: bool = True) -> Any:
    """``--engine-log``, for the commands that run an engine (``bundle``: the command has
    ``--bundle``, whose folder holds the log by default)."""
    default = (
        "DIR/engine.log with --bundle, else a temporary file" if bundle else ("a temporary file")
    )
    return typer.Option(
        "--engine-log",
        help="Where the engine's own log (vLLM, stderr) goes during the runs; '-' shows it "
        f"live on the terminal. Default: {default}, named at the end when the engine wrote "
        "to it.",
        metavar="PATH|-",
    )


ENGINE_LOG = engine_log_option()
"""``--engine-log`` of the commands with ``--bundle``."""

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
