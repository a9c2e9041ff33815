"""Command-line checks made before an audit runs: flags read as files, outputs onto inputs.

Each raises ``InputError`` (exit 2) with one line naming the path and the fix, so that no
engine time is spent and no input file is overwritten.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from specseed.core.errors import InputError

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


def _same_file(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def check_output_paths(outputs: dict[str, Path | None], inputs: Iterable[Path]) -> None:
    """Refuse two reports on one path, or a report onto model.yaml or a scenario file.

    ``outputs`` maps an option name (``--json``) to its path; ``-`` is stdout, which only one
    report can have.
    """
    to_stdout = [option for option, path in outputs.items() if path and str(path) == "-"]
    if len(to_stdout) > 1:
        raise InputError(
            f"{' and '.join(to_stdout)} both write to stdout ('-')",
            hint="send at most one report to stdout",
        )
    given = [(option, path) for option, path in outputs.items() if path and str(path) != "-"]
    for index, (option, path) in enumerate(given):
        for other_option, other in given[:index]:
            if _same_file(path, other):
                raise InputError(
                    f"{other_option} and {option} both write {path}",
                    hint="give each report its own file",
                )
        for source in inputs:
            if _same_file(path, source):
                raise InputError(
                    f"{option} {path} would overwrite an input of this audit ({source})",
                    hint="write the report to another file",
                )
