"""The import graph of a package, read from its source with ``ast``, for the structure tests
(tests/engine/test_structure.py, tests/tui/test_structure.py)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(path: Path, *, typing_too: bool = True) -> set[str]:
    """Every module ``path`` imports, at import time or inside functions, and every
    ``module.name`` it imports from one (which may be a module too). Without ``typing_too``,
    what it imports for typing only (``if TYPE_CHECKING:``) is left out."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if not typing_too and isinstance(child, ast.If) and _type_checking(child.test):
                for other in child.orelse:
                    visit_one(other)
                continue
            visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        visit(node)

    visit(ast.parse(path.read_text()))
    return found


def import_graph(paths: Iterable[Path], *, typing_too: bool = True) -> dict[str, set[str]]:
    """Module → the modules among ``paths`` it imports."""
    paths = list(paths)
    modules = {module_name(path) for path in paths}
    return {
        module_name(path): (imports(path, typing_too=typing_too) & modules) - {module_name(path)}
        for path in paths
    }


def assert_no_cycle(graph: dict[str, set[str]]) -> None:
    """Fails naming the first import cycle found, as ``a -> b -> a``."""
    done: set[str] = set()

    def visit(module: str, trail: tuple[str, ...]) -> None:
        assert module not in trail, " -> ".join((*trail, module))
        if module in done:
            return
        for target in sorted(graph.get(module, ())):
            visit(target, (*trail, module))
        done.add(module)

    for module in sorted(graph):
        visit(module, ())
