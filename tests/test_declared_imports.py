"""Every library the code imports is declared in pyproject.toml, and a provider module loads
only its own SDK (issue 13)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN = {"runtime", "tui", "themes", "tests", "bench"}


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def _imported_modules(folder: str) -> dict[str, str]:
    """Top-level module name → a file importing it, for every import in ``folder``."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def test_every_library_the_runtime_and_the_ui_import_is_declared() -> None:
    declared = _declared()
    distributions = importlib.metadata.packages_distributions()
    undeclared = []
    for folder in ("runtime", "tui", "themes"):
        for module, where in _imported_modules(folder).items():
            if module in OWN or module in sys.stdlib_module_names or module == "__future__":
                continue
            owners = {d.lower() for d in distributions.get(module, [module])}
            if not owners & declared:
                undeclared.append(f"{module} ({where}; from {', '.join(sorted(owners))})")
    assert undeclared == []


def test_the_openai_compatible_provider_does_not_load_the_anthropic_sdk() -> None:
    code = (
        "import sys, runtime.providers.openai\n"
        "print(sorted(m for m in ('anthropic', 'runtime.providers.anthropic', 'httpx2')"
        " if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


def test_the_runtime_and_the_ui_use_no_private_module_or_name_of_a_library() -> None:
    """A library's ``_private`` modules and names may change in any release (issue 13)."""
    from tests.module_graph import imports

    private = []
    for folder in ("runtime", "tui", "themes"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in sorted(imports(path)):
                parts = name.split(".")
                if parts[0] in OWN or parts[0] == "__future__":
                    continue
                if any(p.startswith("_") and not p.endswith("__") for p in parts):
                    private.append(f"{path.relative_to(ROOT)}: {name}")
    assert private == []
