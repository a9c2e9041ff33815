"""The layers of ARCHITECTURE.md, checked on the code.

The layer table in ARCHITECTURE.md is the one list: every package under ``src/specseed`` must
appear in it (and nothing else may sit loose at the top of the package), and a module imports
only from its own layer or the layers above it (function-level imports included).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import specseed

PACKAGE = Path(specseed.__file__).parent
ARCHITECTURE = PACKAGE.parent.parent / "ARCHITECTURE.md"
TOP_LEVEL_FILES = {"__init__.py", "__main__.py", "py.typed"}


def _layers() -> list[tuple[str, ...]]:
    """The packages of each row of ARCHITECTURE.md's layer table, top row first."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    layers = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[1].startswith("`"):
            continue
        names = re.findall(r"`([a-z_]+)/`", cells[1])
        if names:
            layers.append(tuple(f"specseed.{n}" for n in names))
    return layers


LAYERS = [("specseed",), *_layers(), ("specseed.__main__",)]


def _layer(module: str) -> int:
    best, depth = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > depth:
                best, depth = index, len(prefix)
    assert best >= 0, module
    return best


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("specseed"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("specseed"))
    return found


def test_every_package_is_a_layer_and_nothing_sits_loose() -> None:
    on_disk = {
        f"specseed.{p.name}"
        for p in PACKAGE.iterdir()
        if p.is_dir() and (p / "__init__.py").exists()
    }
    listed = {name for row in LAYERS[1:-1] for name in row}
    assert on_disk == listed, (
        f"packages missing from ARCHITECTURE.md's layer table: {sorted(on_disk - listed)}; "
        f"listed but absent: {sorted(listed - on_disk)}"
    )
    loose = sorted(
        p.name for p in PACKAGE.iterdir() if p.is_file() and p.name not in TOP_LEVEL_FILES
    )
    assert not loose, f"modules loose at the top of src/specseed: {loose}"


def test_imports_go_one_way() -> None:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        own = _layer(module)
        for imported in _imports(path):
            if _layer(imported) > own:
                wrong.append(
                    f"{module} (layer {own}) imports {imported} (layer {_layer(imported)})"
                )
    assert not wrong, "\n".join(wrong)


def test_nothing_imports_the_cli() -> None:
    wrong = [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if "cli" not in path.relative_to(PACKAGE).parts[:1]
        and path.name != "__main__.py"
        and any(m == "specseed.cli" or m.startswith("specseed.cli.") for m in _imports(path))
    ]
    assert not wrong, wrong
