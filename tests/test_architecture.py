"""The layers of ARCHITECTURE.md, checked on the imports: a module imports only from its own
layer or the layers above it in the table (function-level imports included)."""

from __future__ import annotations

import ast
from pathlib import Path

import specseed

PACKAGE = Path(specseed.__file__).parent

LAYERS: list[tuple[str, ...]] = [
    ("specseed", "specseed.defects", "specseed.contracts", "specseed.errors"),
    ("specseed.rng",),
    ("specseed.sampling", "specseed.taps"),
    ("specseed.trace",),
    ("specseed.engine_adapters",),
    ("specseed.scenarios",),
    ("specseed.distribution",),
    ("specseed.checks",),
    ("specseed.results",),
    ("specseed.runner", "specseed.matrix", "specseed.scope"),
    ("specseed.reporting",),
    ("specseed.server",),
    ("specseed.cli", "specseed.__main__"),
]


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
