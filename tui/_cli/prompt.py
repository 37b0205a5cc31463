"""Answering input requests at a terminal prompt (DESIGN §11: `run` prompts when stdin is a TTY).

Prompts go to stderr and answers are read from stdin through the event loop (``add_reader``), so a
Ctrl+C while waiting for a line never leaves a thread blocked in ``read``.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Protocol, TextIO

from runtime.answers import field_problem, parse_cli_answer, validate_answer
from runtime.errors import InvalidResponse
from runtime.form_fields import Choice, FieldKind, form_fields
from runtime.models import InputKind, InputRequest
from tui._cli.render import choice_text, describe_request, field_type, schema_fields

APPROVAL_KEYS = "[y] once  [a] this run  [A] always here  [n] deny  [r] deny with reason"
_APPROVAL_BY_KEY = {"y": "allow_once", "a": "allow_run", "A": "allow_always", "n": "deny"}


class LineSource(Protocol):
    async def readline(self) -> str | None:
        """The next line without its newline, or None at end of input."""
        ...


class StdinLines:
    """Lines of a file descriptor read through the running event loop."""

    def __init__(self, fd: int = 0) -> None:
        self._fd = fd
        self._buffer = b""
        self._eof = False

    async def readline(self) -> str | None:
        while b"\n" not in self._buffer and not self._eof:
            await self._wait_readable()
            try:
                chunk = os.read(self._fd, 4096)
            except BlockingIOError:
                continue
            if not chunk:
                self._eof = True
            self._buffer += chunk
        if not self._buffer and self._eof:
            return None
        line, sep, rest = self._buffer.partition(b"\n")
        self._buffer = rest
        if not sep:
            self._eof = True
        return line.decode("utf-8", errors="replace").rstrip("\r")

    async def _wait_readable(self) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def on_readable() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(self._fd, on_readable)
        try:
            await ready
        finally:
            loop.remove_reader(self._fd)


class GaveUp(Exception):
    """Input ended before an answer was given."""


class Prompter:
    def __init__(self, lines: LineSource, err: TextIO) -> None:
        self._lines = lines
        self._err = err
        self._line_open = False
        """A prompt is written and nothing has ended its line yet (no Enter typed)."""

    def say(self, text: str = "") -> None:
        self._line_open = False
        self._err.write(text + "\n")
        self._err.flush()

    def end_line(self) -> None:
        """End the line of a prompt left waiting, so that what follows starts a line."""
        if self._line_open:
            self.say()

    async def ask(self, prompt: str) -> str:
        self._err.write(prompt)
        self._err.flush()
        self._line_open = True
        line = await self._lines.readline()
        self._line_open = False  # the Enter typed ended it (a cancelled read leaves it open)
        if line is None:
            self.say()
            raise GaveUp
        return line

    async def answer(self, request: InputRequest) -> Any:
        """A validated answer for ``request``; raises ``GaveUp`` at end of input."""
        for line in describe_request(request):
            self.say(line)
        match request.kind:
            case InputKind.APPROVAL:
                return await self._approval(request)
            case InputKind.QUESTION:
                return await self._question(request)
            case InputKind.ELICITATION:
                return await self._elicitation(request)

    async def _approval(self, request: InputRequest) -> Any:
        while True:
            text = (await self.ask(APPROVAL_KEYS + "\n> ")).strip()
            if text in _APPROVAL_BY_KEY:
                return validate_answer(request, {"decision": _APPROVAL_BY_KEY[text]})
            if text == "r":
                reason = (await self.ask("Reason (the agent sees it): ")).strip()
                return validate_answer(request, {"decision": "deny", "reason": reason or None})
            try:
                return validate_answer(request, parse_cli_answer(request, text))
            except InvalidResponse:
                self.say("Please answer y, a, A, n or r.")

    async def _question(self, request: InputRequest) -> Any:
        count = len(request.options)
        prompt = f"Answer (1-{count} or text): " if count else "Answer: "
        while True:
            text = (await self.ask(prompt)).strip()
            if not text:
                self.say("An answer is needed.")
                continue
            try:
                return validate_answer(request, parse_cli_answer(request, text))
            except InvalidResponse as exc:
                self.say(f"{exc.message} — try again.")

    async def _elicitation(self, request: InputRequest) -> Any:
        fields = schema_fields(request.answer_schema)
        while True:
            first = (
                await self.ask(
                    "Press Enter to fill in the form, or type a JSON object, decline or cancel: "
                    if fields
                    else "Type a JSON object, decline or cancel: "
                )
            ).strip()
            if not first and fields:
                content = await self._form(fields)
                value: Any = {"action": "accept", "content": content}
            else:
                try:
                    value = parse_cli_answer(request, first)
                except InvalidResponse as exc:
                    self.say(f"{exc.message} — try again.")
                    continue
            try:
                return validate_answer(request, value)
            except InvalidResponse as exc:
                self.say(f"{exc.message} — try again.")

    async def _form(self, fields: list[tuple[str, dict[str, Any], bool]]) -> dict[str, Any]:
        content: dict[str, Any] = {}
        for name, prop, required in fields:
            while True:
                default = prop.get("default")
                hint = field_type(prop)
                if not required:
                    hint += ", optional"
                if default is not None:
                    hint += f", default {json.dumps(default)}"
                text = (await self.ask(f"{name} ({hint}): ")).strip()
                if not text:
                    if default is not None:
                        content[name] = default
                        break
                    if not required:
                        break
                    self.say(f"{name} is required.")
                    continue
                try:
                    value = coerce_field(prop, text)
                except ValueError as exc:
                    self.say(f"{name}: {exc} — try again.")
                    continue
                problem = field_problem(prop, value)
                if problem is not None:
                    self.say(f"{name}: {problem} — try again.")
                    continue
                content[name] = value
                break
        return content


_TRUE = {"y", "yes", "true", "1", "on"}
_FALSE = {"n", "no", "false", "0", "off"}


def _chosen(choices: tuple[Choice, ...], text: str) -> Any:
    """The value of the choice ``text`` names: its value, its title (in any case) or its
    number, counted from 1."""
    for choice in choices:
        if str(choice.value) == text:
            return choice.value
    for choice in choices:
        if choice.title.casefold() == text.casefold():
            return choice.value
    if text.isdigit() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1].value
    raise ValueError("choose one of " + ", ".join(choice_text(c) for c in choices))


def coerce_field(prop: dict[str, Any], text: str) -> Any:
    """A typed value for one form field from what a person typed. A choice is named by its
    value, its title or its number; several choices are separated by commas."""
    [field] = form_fields({"properties": {"field": prop}})
    if field.kind is FieldKind.ONE_OF:
        return _chosen(field.choices, text)
    if field.kind is FieldKind.MANY_OF:
        return [_chosen(field.choices, item.strip()) for item in text.split(",") if item.strip()]
    kind = prop.get("type", "string")
    kinds = kind if isinstance(kind, list) else [kind]
    if "integer" in kinds:
        try:
            return int(text)
        except ValueError:
            if kinds == ["integer"]:
                raise ValueError(f"{text!r} is not a whole number") from None
    if "number" in kinds:
        try:
            return float(text) if not text.lstrip("-").isdigit() else int(text)
        except ValueError:
            if kinds == ["number"]:
                raise ValueError(f"{text!r} is not a number") from None
    if "boolean" in kinds:
        lowered = text.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        if kinds == ["boolean"]:
            raise ValueError("answer yes or no")
    if "array" in kinds or "object" in kinds:
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            if "array" in kinds and "string" not in kinds:
                return [item.strip() for item in text.split(",") if item.strip()]
            if "string" not in kinds:
                raise ValueError("give a JSON value") from None
    return text
