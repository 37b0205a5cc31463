"""The project's own themes: TOML data files validated on load and turned into Textual themes.

``load_themes()`` never raises for a bad file: it returns the themes that loaded and one message
per file that did not (the app shows those as notifications).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from pathlib import Path

from textual.color import Color, ColorParseError
from textual.theme import Theme

__all__ = ["THEMES_DIR", "load_theme_file", "load_themes", "theme_names"]

THEMES_DIR = Path(__file__).parent

NAME = re.compile(r"[a-z0-9][a-z0-9-]*")
COLOURS = (
    "primary",
    "secondary",
    "accent",
    "warning",
    "error",
    "success",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)
"""A theme file's colour keys (any colour Textual can parse); only ``primary`` is required."""
FRACTIONS = {"luminosity_spread": 0.15, "text_alpha": 0.95}
"""Its numbers between 0 and 1, with their defaults."""


def _theme_of(data: dict[str, object]) -> Theme:
    """The Theme a file's table describes; ValueError naming every key that is wrong.

    Checked by hand rather than with a pydantic model: this runs before the first frame, and
    pydantic is a tenth of a second of imports that the first frame has no other need of."""
    problems: list[str] = []
    fields: dict[str, object] = {}
    known = {"name", "dark", "variables", *COLOURS, *FRACTIONS}
    for key in sorted(set(data) - known):
        problems.append(f"{key}: not a theme setting")
    name = data.get("name")
    if not isinstance(name, str) or NAME.fullmatch(name) is None:
        problems.append("name: lower-case letters, digits and dashes are required")
    fields["name"] = name
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        problems.append("dark: true or false")
    fields["dark"] = dark
    if "primary" not in data:
        problems.append("primary: required")
    for key in COLOURS:
        value = data.get(key)
        if value is None:
            continue
        try:
            if not isinstance(value, str):
                raise ColorParseError(key)
            Color.parse(value)
        except ColorParseError:
            problems.append(f"{key}: {value!r} is not a colour")
        fields[key] = value
    for key, default in FRACTIONS.items():
        number = data.get(key, default)
        if isinstance(number, bool) or not isinstance(number, int | float) or not 0 <= number <= 1:
            problems.append(f"{key}: a number from 0 to 1")
        fields[key] = number
    variables = data.get("variables", {})
    if not isinstance(variables, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in variables.items()
    ):
        problems.append("variables: a table of strings")
    fields["variables"] = variables
    if problems:
        raise ValueError("; ".join(problems))
    return Theme(**fields)  # type: ignore[arg-type]  # each field checked above


def load_theme_file(path: Path) -> Theme:
    """Load one file; raises ValueError with a message naming the file and the problem."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: cannot read: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path}: not valid TOML: {error}") from None
    try:
        return _theme_of(data)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


def load_themes(directories: Iterable[Path] = (THEMES_DIR,)) -> tuple[list[Theme], list[str]]:
    """Every ``*.toml`` theme in ``directories``: (themes that loaded, messages for the rest)."""
    themes: list[Theme] = []
    problems: list[str] = []
    for directory in directories:
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.toml")):
            try:
                themes.append(load_theme_file(path))
            except ValueError as error:
                problems.append(str(error))
    return themes, problems


def theme_names(directories: Iterable[Path] = (THEMES_DIR,)) -> set[str]:
    """The names of the themes the app can start in: Textual's own and those of
    ``directories`` that load (what ``tui.app`` registers)."""
    from textual.theme import BUILTIN_THEMES

    themes, _ = load_themes(directories)
    return {*BUILTIN_THEMES, *(theme.name for theme in themes)}
