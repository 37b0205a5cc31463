"""Careful edits of TOML config files with ``tomlkit``: a value set, a list element added or
removed, and everything else (comments, order, layout, quoting) kept as it was.

Each function takes and returns the text; the caller writes it atomically. An edit that would
not give valid TOML again (it never should) is refused with a ``ConfigError`` and nothing is
written.
"""

from __future__ import annotations

import copy
import math
import tomllib
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import AoT, Array

from runtime.errors import ConfigError

__all__ = ["add_to_toml_array", "remove_from_toml_array", "set_toml_value"]


def _where(path: Path | None) -> str | None:
    return str(path) if path is not None else None


def _parse(text: str, path: Path | None) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(text)
    except TOMLKitError as exc:
        raise ConfigError(f"invalid TOML: {exc}", file=_where(path)) from None


def _dump(document: tomlkit.TOMLDocument, path: Path | None, what: str) -> str:
    edited = tomlkit.dumps(document)
    try:
        tomllib.loads(edited)
    except tomllib.TOMLDecodeError:
        raise ConfigError(
            f"cannot update this file automatically ({what}); please edit it by hand",
            file=_where(path),
        ) from None
    return edited


def _checked(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"cannot store {value!r} in a config file")
    if isinstance(value, list | tuple):
        return [_checked(v) for v in value]
    if not isinstance(value, bool | int | float | str):
        raise ConfigError(f"cannot store a {type(value).__name__} in a config file")
    return value


def _table(
    document: tomlkit.TOMLDocument, table: tuple[str, ...], path: Path | None, *, create: bool
) -> MutableMapping[str, Any] | None:
    """The table at ``table`` (created, as a ``[header]`` table, when asked and missing)."""
    node: MutableMapping[str, Any] = document
    for depth, part in enumerate(table):
        child = node.get(part)
        if child is None:
            if not create:
                return None
            child = tomlkit.table()
            node[part] = child
            child = node[part]
        if isinstance(child, AoT) or not isinstance(child, MutableMapping):
            raise ConfigError("is not a table", file=_where(path), key=".".join(table[: depth + 1]))
        node = child
    return node


def set_toml_value(
    text: str, table: tuple[str, ...], key: str, value: Any, *, path: Path | None = None
) -> str:
    """``text`` with ``key = value`` in ``[table]``: the old value replaced in place, or the key
    added at the end of the table (the table appended when missing)."""
    document = _parse(text, path)
    target = _table(document, table, path, create=True)
    assert target is not None
    target[key] = _checked(value)
    return _dump(document, path, f"set {'.'.join((*table, key))}")


def _array(
    document: tomlkit.TOMLDocument, table: tuple[str, ...], key: str, path: Path | None
) -> Array | None:
    target = _table(document, table, path, create=False)
    if target is None or key not in target:
        return None
    value = target[key]
    if not isinstance(value, Array):
        raise ConfigError("is not a list", file=_where(path), key=".".join((*table, key)))
    return value


def _insert(array: Array, index: int, value: str) -> None:
    """``value`` put at ``index`` of ``array``. At the front of a one-line array tomlkit glues
    the new element to the next (``["new","old"]``), so there the first element is copied one
    along and the front replaced instead (a one-line array has no comment to carry with it)."""
    if index == 0 and len(array) and "\n" not in array.as_string():
        array.insert(1, copy.copy(array[0]))
        array[0] = value
    else:
        array.insert(index, value)


def add_to_toml_array(
    text: str,
    table: tuple[str, ...],
    key: str,
    value: str,
    *,
    path: Path | None = None,
    at: int | None = None,
) -> str:
    """``text`` with ``value`` in the list ``[table] key``: at index ``at``, or appended when
    it is None or past the end (one element per line stays one per line); the key and table
    are created when missing. Unchanged if already there."""
    document = _parse(text, path)
    array = _array(document, table, key, path)
    if array is None:
        return set_toml_value(text, table, key, [value], path=path)
    if value in list(array):
        return text
    if at is None or at >= len(array):
        array.append(value)
    else:
        _insert(array, max(at, 0), value)
    return _dump(document, path, f"add to {'.'.join((*table, key))}")


def remove_from_toml_array(
    text: str, table: tuple[str, ...], key: str, value: str, *, path: Path | None = None
) -> str:
    """``text`` without the elements equal to ``value`` in the list ``[table] key``."""
    document = _parse(text, path)
    array = _array(document, table, key, path)
    if array is None or value not in list(array):
        return text
    while value in list(array):
        array.remove(value)
    return _dump(document, path, f"remove from {'.'.join((*table, key))}")
