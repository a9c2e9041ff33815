"""The layers of ARCHITECTURE.md, checked on the code.

The layer table in ARCHITECTURE.md is the one list: every package under ``src/specseed`` must
appear in it (and nothing else may sit loose at the top of the package), and a module imports
only from its own layer or the layers above it (function-level imports included, and imports
by name: ``importlib.import_module("specseed...")`` or ``__import__`` with a literal). No two
files import each other, directly or round a circle.
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


LAYERS = [*_layers(), ("specseed", "specseed.__main__")]
"""The table's rows, then the top of the house: the package's own ``__init__`` (a facade over
the public API, which no module of specseed imports) and ``__main__``."""


def _layer(module: str) -> int:
    best, depth = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > depth:
                best, depth = index, len(prefix)
    assert best >= 0, module
    return best


BY_NAME = {"import_module", "__import__"}


def _by_name(node: ast.AST) -> str | None:
    """The module a call imports by name: ``importlib.import_module("specseed...")`` or
    ``__import__("specseed...")`` with a literal."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    first = node.args[0]
    if name in BY_NAME and isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value if first.value.startswith("specseed") else None
    return None


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Nodes under ``if TYPE_CHECKING:``: imports that never run."""
    nodes: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            nodes.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return nodes


def _import_nodes(path: Path, *, running: bool = False) -> list[tuple[str, ast.AST]]:
    """Every specseed module a file imports (statements, function-level ones and imports by
    name), with the node; ``running``: only those that run (not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_only(tree) if running else set()
    found: list[tuple[str, ast.AST]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("specseed"):
            found.append((node.module, node))
        elif isinstance(node, ast.Import):
            found.extend((a.name, node) for a in node.names if a.name.startswith("specseed"))
        elif (module := _by_name(node)) is not None:
            found.append((module, node))
    return found


def _imports(path: Path) -> set[str]:
    return {module for module, _ in _import_nodes(path)}


def _module_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """File-level imports that run: each module to the package modules it imports (``from
    pkg import mod`` imports the file of ``mod``)."""
    files = {_module_of(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        targets: set[str] = set()
        for imported, node in _import_nodes(path, running=True):
            if imported in files:
                targets.add(imported)
            if isinstance(node, ast.ImportFrom):
                targets.update(
                    f"{imported}.{a.name}" for a in node.names if f"{imported}.{a.name}" in files
                )
        graph[module] = targets - {module}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[tuple[str, ...]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(tuple(sorted(component)))
    return circles


def test_every_package_is_a_layer_and_nothing_sits_loose() -> None:
    on_disk = {
        f"specseed.{p.name}"
        for p in PACKAGE.iterdir()
        if p.is_dir() and (p / "__init__.py").exists()
    }
    listed = {name for row in LAYERS[:-1] for name in row}
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
        module = _module_of(path)
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


def test_an_import_by_name_is_an_import() -> None:
    """``importlib.import_module`` with a literal name is seen by the layer check."""
    tree = ast.parse('import importlib\nimportlib.import_module("specseed.checks")\n')
    assert [_by_name(n) for n in ast.walk(tree) if _by_name(n)] == ["specseed.checks"]
    tree = ast.parse('__import__("specseed.cli.app")\n')
    assert [_by_name(n) for n in ast.walk(tree) if _by_name(n)] == ["specseed.cli.app"]


def test_no_import_circle_between_files() -> None:
    circles = _circles(_import_graph())
    assert not circles, "import circles between files:\n" + "\n".join(
        " <-> ".join(c) for c in circles
    )


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [("a", "b", "c")]
