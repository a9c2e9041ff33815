"""The scripts under ``tools/`` and ``benchmarks/`` still run against the current interface.

They are not part of the package and no other test runs them (most need a GPU, an engine or
minutes), so they rot silently when a module moves or a name is renamed. Running each with
``--help`` would import torch a dozen times; instead every Python script is compiled and each
name it imports from ``specseed`` (or from a sibling script, as ``tools/groundtruth`` does) is
resolved against the package, attributes of imported specseed modules included. Shell scripts
get ``bash -n``.
"""

from __future__ import annotations

import ast
import importlib
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("tools", "benchmarks")
PYTHON = sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))
SHELL = sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.sh"))


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _module(name: str) -> ModuleType | None:
    """The specseed module ``name``, or ``None`` if no such module exists."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (exc.name == name or name.startswith(exc.name + ".")):
            return None
        raise  # a module that exists but needs a package missing here: say so


def _top_level_names(path: Path) -> set[str]:
    """What a sibling script defines at its top level (functions, classes, assignments)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def unresolved(path: Path) -> list[str]:
    """Each ``specseed`` (or sibling) name the script uses that does not exist, with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    problems: list[str] = []
    modules: dict[str, ModuleType] = {}  # local name -> imported specseed module
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not alias.name.startswith("specseed"):
                    continue
                module = _module(alias.name)
                if module is None:
                    problems.append(f"line {node.lineno}: no module {alias.name}")
                elif alias.asname:
                    modules[alias.asname] = module
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            sibling = path.parent / f"{node.module}.py"
            if node.module.startswith("specseed"):
                module = _module(node.module)
                if module is None:
                    problems.append(f"line {node.lineno}: no module {node.module}")
                    continue
                for alias in node.names:
                    value = getattr(module, alias.name, None)
                    if value is None:
                        value = _module(f"{node.module}.{alias.name}")
                    if value is None:
                        problems.append(
                            f"line {node.lineno}: {node.module} has no name {alias.name}"
                        )
                    elif isinstance(value, ModuleType):
                        modules[alias.asname or alias.name] = value
            elif sibling.is_file():
                defined = _top_level_names(sibling)
                problems += [
                    f"line {node.lineno}: {sibling.name} defines no {alias.name}"
                    for alias in node.names
                    if alias.name not in defined
                ]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and not hasattr(modules[node.value.id], node.attr)
        ):
            module = modules[node.value.id].__name__
            problems.append(f"line {node.lineno}: {module} has no name {node.attr}")
    return problems


def test_every_script_is_found() -> None:
    assert len(PYTHON) >= 10 and len(SHELL) >= 3


@pytest.mark.parametrize("path", PYTHON, ids=_rel)
def test_python_script_compiles_and_its_imports_exist(path: Path) -> None:
    compile(path.read_text(encoding="utf-8"), str(path), "exec")
    assert unresolved(path) == []


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("path", SHELL, ids=_rel)
def test_shell_script_parses(path: Path) -> None:
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr


def test_the_check_catches_a_name_that_moved(tmp_path: Path) -> None:
    script = tmp_path / "old.py"
    script.write_text(
        "from specseed.plan.planning import plan_audit, no_such_function\n"
        "from specseed.runner import run_audit\n"
        "from specseed.scenarios import loader\n"
        "loader.load_audit_config, loader.gone\n"
        "from helper import here, missing\n"
    )
    (tmp_path / "helper.py").write_text("here = 1\n")
    assert unresolved(script) == [
        "line 1: specseed.plan.planning has no name no_such_function",
        "line 2: no module specseed.runner",
        "line 5: helper.py defines no missing",
        "line 4: specseed.scenarios.loader has no name gone",
    ]
