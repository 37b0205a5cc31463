"""The project's own themes: TOML data files validated on load and turned into Textual themes.

``load_themes()`` never raises for a bad file: it returns the themes that loaded and one message
per file that did not (the app shows those as notifications).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from textual.color import Color, ColorParseError
from textual.theme import Theme

__all__ = ["THEMES_DIR", "ThemeFile", "load_theme_file", "load_themes"]

THEMES_DIR = Path(__file__).parent


class ThemeFile(BaseModel):
    """One theme file: a name and its colours (any colour Textual can parse)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9-]*$")
    dark: bool = True
    primary: str
    secondary: str | None = None
    accent: str | None = None
    warning: str | None = None
    error: str | None = None
    success: str | None = None
    foreground: str | None = None
    background: str | None = None
    surface: str | None = None
    panel: str | None = None
    boost: str | None = None
    luminosity_spread: float = Field(default=0.15, ge=0, le=1)
    text_alpha: float = Field(default=0.95, ge=0, le=1)
    variables: dict[str, str] = {}

    @field_validator(
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
    @classmethod
    def _is_colour(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                Color.parse(value)
            except ColorParseError:
                raise ValueError(f"{value!r} is not a colour") from None
        return value

    def to_theme(self) -> Theme:
        return Theme(**self.model_dump())


def load_theme_file(path: Path) -> Theme:
    """Load one file; raises ValueError with a message naming the file and the problem."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: cannot read: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path}: not valid TOML: {error}") from None
    try:
        return ThemeFile.model_validate(data).to_theme()
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in item['loc']) or 'file'}: {item['msg']}"
            for item in error.errors()
        )
        raise ValueError(f"{path}: {problems}") from None


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
