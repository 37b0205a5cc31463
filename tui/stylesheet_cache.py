"""The app's stylesheets, parsed at an earlier launch and kept in the user's cache folder.

Before its first frame the app parses its stylesheets: the main screen's and every widget's
``DEFAULT_CSS``, about 160 rules, 12-13 ms of Textual's tokenizer on this project's machine, where
a bare Textual app parses a fifth of that. The rules come out the same at every launch until the
CSS, the theme's colours (substituted as they are parsed) or Textual change, so a launch keeps
what it parsed (``StoredStylesheet``) and the next one loads it (2 ms) instead of parsing again,
as Python keeps compiled bytecode.

The file (``$XDG_CACHE_HOME/agent-tui/stylesheets.pickle``) holds one theme's rules, keyed by
the exact source text and where it was read from: a changed source misses and is parsed as
before. It is a cache and nothing more: a file that is missing, unreadable, damaged or made by
another Textual or Python is ignored (and written again at the end of the launch), and each
launch writes a whole new file over the old one (``os.replace``), so two apps starting at once
never read half of one. Pickle runs code as it loads: the file is loaded only when it and its
folder are the user's own and nobody else can write them, as the user's bytecode caches are.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import stat
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

import textual
import textual.css.model
import textual.css.styles
from textual.css.model import RuleSet
from textual.css.stylesheet import Stylesheet
from textual.css.types import CSSLocation

log = logging.getLogger(__name__)

FILE_NAME = "stylesheets.pickle"
FORMAT = 1
"""Bumped when what the file holds changes shape."""

SourceKey = tuple[str, CSSLocation, bool, int, str]
"""What Textual parses a source by: its text, where it was read from, whether it is a widget's
default CSS, its tie breaker and its scope."""


def _textual_stamp() -> tuple[object, ...]:
    """What the stored rules are objects of: this Python, this version of Textual (the name of
    its ``textual-X.Y.Z.dist-info`` folder: reading the version through ``importlib.metadata``
    costs about as much as the cache saves) and this copy of its CSS model (a reinstall
    rewrites the files; an installer that keeps mtimes still changes the version)."""
    files = (textual.css.model.__file__, textual.css.styles.__file__)
    stats = [os.stat(path) for path in files if path is not None]
    package = Path(textual.__file__ or "").parent
    try:
        versions = sorted(
            entry.name
            for entry in os.scandir(package.parent)
            if entry.name.startswith("textual-") and entry.name.endswith(".dist-info")
        )
    except OSError:
        versions = []
    return (
        FORMAT,
        sys.version_info[:2],
        tuple(versions),
        *((s.st_size, s.st_mtime_ns) for s in stats),
    )


def _only_ours(file: BinaryIO, folder: Path) -> bool:
    """Whether the file and its folder belong to this user and nobody else can write them: a
    pickle runs code as it loads, so one that another user could have written (a cache folder
    in a shared place, ``sudo`` with the user's home) is not loaded."""
    me = os.geteuid()
    for status in (os.fstat(file.fileno()), os.stat(folder)):
        if status.st_uid != me or status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return False
    return True


class StoredRules:
    """The rules parsed at an earlier launch (for one set of theme variables), and those parsed
    at this one, written out for the next when this launch parsed anything new."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._stamp: tuple[object, ...] = ()
        self._variables: dict[str, str] | None = None
        self._stored: dict[SourceKey, list[RuleSet]] = {}
        self._used: dict[SourceKey, list[RuleSet]] = {}
        self._parsed = False
        """Whether a source was parsed (not found stored) since the last save."""

    @classmethod
    def load(cls, path: Path | None) -> StoredRules:
        """What ``path`` holds; an empty store when it holds nothing usable."""
        stored = cls(path)
        if path is None:
            return stored
        try:
            stored._stamp = _textual_stamp()
            with path.open("rb") as file:
                if not _only_ours(file, path.parent):
                    log.warning("stylesheet cache %s not used: others can write it", path)
                    return stored
                data = pickle.load(file)  # the user's own cache: see the module
            if not isinstance(data, dict) or data.get("stamp") != stored._stamp:
                return stored
            variables, entries = data["variables"], data["entries"]
            if isinstance(variables, dict) and isinstance(entries, dict):
                stored._variables = variables
                stored._stored = entries
        except FileNotFoundError:
            pass
        except Exception as error:  # a damaged or foreign file: parsed as if it were not there
            log.info("stylesheet cache %s not used: %r", path, error)
        return stored

    def get(self, key: SourceKey, variables: dict[str, str]) -> list[RuleSet] | None:
        if variables != self._variables:
            return None
        rules = self._stored.get(key)
        if rules is not None:
            self._used[key] = rules
        return rules

    def add(self, key: SourceKey, variables: dict[str, str], rules: list[RuleSet]) -> None:
        if variables != self._variables:
            # Another theme: its rules replace what was stored (one theme is kept).
            self._variables = dict(variables)
            self._stored = {}
            self._used = {}
        self._stored[key] = rules
        self._used[key] = rules
        self._parsed = True

    def unsaved(self) -> dict[str, Any] | None:
        """What to write (``write``), if this launch parsed anything since it last asked:
        the rules it used, with the theme's variables."""
        if self.path is None or not self._parsed or self._variables is None:
            return None
        self._parsed = False
        return {
            "stamp": self._stamp or _textual_stamp(),
            "variables": self._variables,
            "entries": dict(self._used),
        }

    def write(self, unsaved: dict[str, Any]) -> None:
        """Write ``unsaved`` as a whole new file, swapped in (any thread)."""
        assert self.path is not None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            _sweep(self.path.parent)
            descriptor, temporary = tempfile.mkstemp(prefix=f".{FILE_NAME}.", dir=self.path.parent)
            try:
                with os.fdopen(descriptor, "wb") as file:
                    pickle.dump(unsaved, file, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(temporary, self.path)
            except BaseException:
                os.unlink(temporary)
                raise
        except Exception as error:  # a read-only or full disk: the next launch parses again
            log.info("stylesheet cache %s not written: %r", self.path, error)

    def save(self) -> None:
        """``write`` what is ``unsaved``, if anything."""
        unsaved = self.unsaved()
        if unsaved is not None:
            self.write(unsaved)


STALE_SECONDS = 60.0
"""A temporary file this old was left by a launch killed as it wrote (a write takes
milliseconds)."""


def _sweep(folder: Path) -> None:
    """Remove the temporary files of writes that never finished."""
    now = time.time()
    for leftover in folder.glob(f".{FILE_NAME}.*"):
        with contextlib.suppress(OSError):  # gone meanwhile: another launch swept it
            if now - leftover.stat().st_mtime > STALE_SECONDS:
                leftover.unlink()


class StoredStylesheet(Stylesheet):
    """Textual's stylesheet, taking a source's rules from ``stored`` when it has them."""

    def __init__(self, *, variables: dict[str, str] | None, stored: StoredRules) -> None:
        super().__init__(variables=variables)
        self.stored = stored

    def _parse_rules(
        self,
        css: str,
        read_from: CSSLocation,
        is_default_rules: bool = False,
        tie_breaker: int = 0,
        scope: str = "",
    ) -> list[RuleSet]:
        key: SourceKey = (css, read_from, is_default_rules, tie_breaker, scope)
        rules = self.stored.get(key, self._variables)
        if rules is not None:
            return rules
        rules = super()._parse_rules(css, read_from, is_default_rules, tie_breaker, scope)
        if not any(rule.errors for rule in rules):  # an error is said at every launch
            self.stored.add(key, self._variables, rules)
        return rules

    def reparse(self) -> None:
        """Textual's ``reparse`` (a theme set, light or with other ANSI colours: every source
        again, with its variables), into a stylesheet that takes stored rules too: Textual's
        parses into a plain one."""
        fresh = StoredStylesheet(variables=self._variables, stored=self.stored)
        for read_from, (css, is_default_css, tie_breaker, scope) in self.source.items():
            fresh.add_source(
                css,
                read_from=read_from,
                is_default_css=is_default_css,
                tie_breaker=tie_breaker,
                scope=scope,
            )
        try:
            fresh.parse()
        except Exception:
            self._invalid_css.update(fresh._invalid_css)  # not parsed again (Textual's too)
            raise
        self._rules = fresh.rules
        self._rules_map = None
        self.source = fresh.source
        self._require_parse = False


def cache_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/agent-tui/stylesheets.pickle`` (``~/.cache/agent-tui/…``)."""
    from runtime.locations import user_cache_dir

    return user_cache_dir(env) / FILE_NAME
