"""The shape of the TUI (issue 13 point 6): typed against the runtime and checked by mypy like
the runtime, its modules import each other without a cycle, and the main screen's worker
messages live in their own module."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from textual.message import Message

import tui.messages
from tests.module_graph import assert_no_cycle, import_graph
from tui.screens import main

ROOT = Path(__file__).resolve().parents[2]
TUI = sorted((ROOT / "tui").rglob("*.py"))


def test_make_typecheck_runs_strict_mypy_over_the_tui_and_the_themes_too() -> None:
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert mypy["strict"] is True
    assert {"runtime", "tui", "themes"} <= set(mypy["packages"])


def test_the_tui_modules_import_each_other_without_a_cycle() -> None:
    graph = import_graph(TUI, typing_too=False)
    assert_no_cycle(graph)
    assert "tui.screens.main" in graph["tui.app"]  # the walk saw the app import its screen


def test_no_tui_module_types_the_runtime_as_any() -> None:
    offenders = []
    for path in TUI:
        for node in ast.walk(ast.parse(path.read_text())):
            annotated: list[tuple[str, ast.expr | None]] = []
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                annotated += [(argument.arg, argument.annotation) for argument in arguments]
                annotated.append((node.name, node.returns))
            elif isinstance(node, ast.AnnAssign):
                annotated.append((ast.unparse(node.target).split(".")[-1], node.annotation))
            for name, annotation in annotated:
                if name.lstrip("_") not in ("runtime", "store", "manager", "mcp", "config"):
                    continue
                if annotation is not None and "Any" in ast.unparse(annotation):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert offenders == []


def test_the_main_screen_defines_no_message_of_its_own_and_uses_those_of_tui_messages() -> None:
    defined_in_main = [
        name
        for name, value in vars(main).items()
        if isinstance(value, type)
        and issubclass(value, Message)
        and value.__module__ == main.__name__
    ]
    assert defined_in_main == []
    for name in ("RunLoaded", "RunsLoaded", "JobsLoaded", "CheckpointsLoaded", "RunStarted"):
        message = getattr(tui.messages, name)
        assert issubclass(message, Message)
        assert getattr(main, name) is message  # the screen handles the moved class
