"""The shape of the engine (issue 13 point 3): a facade over an ``engine/`` package whose pieces
never import the facade or the composition root, with no import cycles, no SQL, and no function
over ~80 lines anywhere in ``runtime/`` and ``tui/``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.module_graph import assert_no_cycle, import_graph, imports, module_name

ROOT = Path(__file__).resolve().parents[2]
ENGINE = sorted((ROOT / "runtime" / "engine").glob("*.py"))
FACADE = ROOT / "runtime" / "runtime.py"
COMPOSE = ROOT / "runtime" / "compose.py"
SQL = re.compile(r"\b(SELECT\s+.+\s+FROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b", re.I)


def test_no_engine_module_imports_the_facade_or_the_composition_root() -> None:
    offenders = {
        f"{module_name(path)} imports {name}"
        for path in ENGINE
        for name in imports(path)
        if name in ("runtime.runtime", "runtime.compose", "runtime.api")
    }
    assert offenders == set()


def test_the_engine_modules_import_each_other_without_a_cycle() -> None:
    graph = import_graph(ENGINE)
    assert_no_cycle(graph)
    assert "runtime.engine.tool_calls" in graph["runtime.engine.executor"]  # the walk saw it


def test_the_facade_imports_the_composition_root_only_when_opening() -> None:
    top_level = {
        node.module
        for node in ast.parse(FACADE.read_text()).body
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "runtime.compose" not in top_level
    compose_top = {
        node.module
        for node in ast.parse(COMPOSE.read_text()).body
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "runtime.runtime" not in compose_top


def test_the_engine_and_the_facade_contain_no_sql() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in [*ENGINE, FACADE, COMPOSE]
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if SQL.search(line)
    ]
    assert offenders == []


def test_no_function_of_the_runtime_or_the_tui_is_longer_than_80_lines() -> None:
    """The engine and the facade first; since, the store (its rules, both backends), the
    providers, MCP and the command line too."""
    long_ones = []
    for path in sorted([*(ROOT / "runtime").rglob("*.py"), *(ROOT / "tui").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 80:
                    long_ones.append(f"{path.name}:{node.name} ({length} lines)")
    assert long_ones == []


def test_the_facade_stays_thin() -> None:
    assert len(FACADE.read_text().splitlines()) <= 640
