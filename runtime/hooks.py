"""Hooks (DESIGN §16): commands that run before and after tool calls, and on notifications.

Configured in ``[hooks]`` of ``agent-tui.toml`` (or the user's ``config.toml``)::

    [[hooks.before_tool]]
    matcher = "write_file"        # fnmatch patterns over tool names, "|"-separated; "*" = all
    command = "./hooks/no-lock-files.sh"
    timeout = 10                  # seconds; the hook is killed then, and that is a failure

    [[hooks.after_tool]]
    matcher = "read_file"
    command = "./hooks/redact.py"

    [[hooks.on_input_required]]   # fire and forget
    command = "notify-send 'agent-tui needs you'"

The command runs through the shell in the workspace with the event as one JSON object on stdin
(``event``, ``tool_name``, ``arguments``, ``workspace``, ``run_id``, ``job_id``; ``result`` and
``is_error`` after a tool). It answers on stdout with nothing (allow, result unchanged) or one
JSON object: ``{"decision": "deny", "reason": "…"}``, ``{"decision": "allow"}``, or after a tool
``{"result": "…"}`` to rewrite what the model sees. Exit status 2 denies with stderr as the reason
(Claude Code's convention); any other failure — non-zero exit, bad JSON, the timeout — is a
failure that stops the call (before) or is reported beside the result (after). A hook runs
under ``runtime.supervisor``, in a process group of its own: the timeout kills that group, and so
does agent-tui's death, even by ``kill -9``.

Claude Code's ``.claude/settings.json`` (and ``settings.local.json``, and ``~/.claude/``)
``hooks.PreToolUse`` / ``PostToolUse`` entries are read the same way where they map: a
``command`` hook whose matcher names tools agent-tui has (``Write`` → ``write_file``, ``Edit`` →
``edit_file``, ``Bash`` → ``shell``, ``Read`` → ``read_file``, ``Grep`` → ``search``, ``LS`` /
``Glob`` → ``list_dir``, ``mcp__server__tool`` → ``server__tool``); its stdin gets Claude Code's
field names too (``hook_event_name``, ``tool_name``, ``tool_input`` with ``file_path``), and its
``hookSpecificOutput.permissionDecision`` is understood. Entries that do not map are skipped and
listed by ``doctor``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import functools
import json
import logging
import os
import re
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runtime.supervisor import group_alive, parent_death_signal, supervised_shell

__all__ = [
    "ClaudeHookReport",
    "HookEntry",
    "HookOutcome",
    "HooksConfig",
    "fire_and_forget",
    "load_claude_hooks",
    "matching_hooks",
    "run_after_tool",
    "run_before_tool",
]

log = logging.getLogger(__name__)

HookEvent = Literal["before_tool", "after_tool", "on_input_required", "on_run_finished"]
MAX_HOOK_OUTPUT = 1_000_000
KILL_WAIT = 5.0
"""Seconds a killed hook's processes get to disappear (they always do, promptly)."""


class HookEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str = Field(min_length=1)
    matcher: str = "*"
    timeout: float = Field(default=30.0, gt=0, le=3600)
    source: str = ""
    """Where the entry came from (a file), for denial records and ``doctor``."""
    claude: bool = False
    """Read from Claude Code's settings: stdin and stdout use its field names."""

    def shown_command(self) -> str:
        """The command as records and reports name it (``shown_command``)."""
        return shown_command(self.command)

    def label(self) -> str:
        where = f" ({self.source})" if self.source else ""
        return f"hook `{self.shown_command()}`{where}"


_ASSIGNMENT_WORD = r"[A-Za-z_][A-Za-z0-9_]*=(?:'[^']*'|\"(?:[^\"\\]|\\.)*\"|\\.|[^\s'\"\\])*"
_LEADING_ASSIGNMENTS = re.compile(rf"^(\s*)(?:(?:env|export)\s+)?(?:{_ASSIGNMENT_WORD}(?:\s+|$))+")
_SEPARATORS = ("&&", "||", ";", "&", "|", "(", ")", "\n")
_ANY_ASSIGNMENT = re.compile(
    r"(?<![^\s;&|(){}])([A-Za-z_][A-Za-z0-9_]*)="
    r"(?:'[^']*'|\"(?:[^\"\\]|\\.)*\"|\\.|[^\s'\"\\;&|(){}])*"
)
"""An assignment word anywhere else (``env -i TOKEN=…``, ``sudo TOKEN=…``, ``{ T=… cmd; }``):
its value is masked."""


_WORD_VALUE = r"(?:'[^']*'|\"(?:[^\"\\]|\\.)*\"|\\.|[^\s'\"\\;&|(){}])+"
_SECRET_OPTION = re.compile(
    r"(?<![^\s;&|(){}])(-{1,2}[A-Za-z0-9_-]*"
    r"(?:token|api[-_]?key|access[-_]?key|password|passwd|secret|auth|credential)"
    rf"[A-Za-z0-9_-]*)(=|\s+(?!-)){_WORD_VALUE}",
    re.IGNORECASE,
)
"""An option whose name says it carries a secret (``--token=…``, ``--api-key …``,
``--auth-header=…``): its value is masked, in both the ``=`` and the two-word forms."""
_KEY_FORMAT = re.compile(
    r"(?<![A-Za-z0-9])(?:sk-[A-Za-z0-9_-]{6,}|gh[pousr]_[A-Za-z0-9]{6,}|github_pat_\w{6,}"
    r"|xox[abposr]-[A-Za-z0-9-]+|AKIA[0-9A-Z]{12,}|glpat-[A-Za-z0-9_-]{6,})"
)
"""A word shaped like a known key (OpenAI/Anthropic ``sk-``, GitHub ``ghp_``, Slack ``xox…-``,
AWS ``AKIA``, GitLab ``glpat-``), wherever it stands: masked."""


def mask_secrets(text: str) -> str:
    """``text`` with the values of secret-named options and key-shaped words masked (``…``):
    what a hook's command line or its output may show of a secret."""
    text = _SECRET_OPTION.sub(lambda m: f"{m[1]}{'=' if m[2] == '=' else ' '}…", text)
    return _KEY_FORMAT.sub("…", text)


def _segments(command: str) -> list[str]:
    """``command`` cut at the shell's command separators outside quotes, separators kept as
    segments of their own (so joining them gives ``command`` back)."""
    segments: list[str] = []
    start, index, quote = 0, 0, ""
    while index < len(command):
        char = command[index]
        if quote:
            if char == "\\" and quote == '"':
                index += 1
            elif char == quote:
                quote = ""
        elif char == "\\":
            index += 1
        elif char in "'\"":
            quote = char
        else:
            separator = next((s for s in _SEPARATORS if command.startswith(s, index)), None)
            if separator is not None:
                segments += [command[start:index], separator]
                index += len(separator)
                start = index
                continue
        index += 1
    return [*segments, command[start:]]


def shown_command(command: str) -> str:
    """A hook's command as it is named wherever it is shown or stored (denials, failures,
    ``doctor``, ``/context``): without the environment assignments before each program
    (``TOKEN=… ./hooks/check.sh`` is ``./hooks/check.sh``) and with the value of any other
    assignment word masked (``sudo TOKEN=…``), which often carry secrets that must never reach
    the model, the database or an export (DESIGN §5); so are the values of options whose name
    says secret (``--token=…``, ``--api-key …``) and words shaped like a known key (``sk-…``,
    ``ghp_…``): ``mask_secrets``. The hook itself runs with them."""
    segments = _segments(command)
    shown = "".join(
        segment if index % 2 else _LEADING_ASSIGNMENTS.sub(r"\1", segment)
        for index, segment in enumerate(segments)
    )
    shown = mask_secrets(_ANY_ASSIGNMENT.sub(r"\1=…", shown))
    return " ".join(shown.split()) or "(environment assignments only)"


class HooksConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    before_tool: list[HookEntry] = []
    after_tool: list[HookEntry] = []
    on_input_required: list[HookEntry] = []
    on_run_finished: list[HookEntry] = []

    def with_entries(self, event: HookEvent, entries: Sequence[HookEntry]) -> HooksConfig:
        return self.model_copy(update={event: [*getattr(self, event), *entries]})


@dataclass(frozen=True)
class HookOutcome:
    """What the hooks of one event decided. ``failure`` means a hook broke (exit status, bad
    output, timeout): before a tool the call must not run; after, the result stands and the
    failure is reported beside it."""

    decision: Literal["allow", "deny"] = "allow"
    reason: str = ""
    hook: str = ""
    result: str | None = None
    failure: str | None = None


_CLAUDE_NAMES = {
    "write_file": "Write",
    "edit_file": "Edit",
    "shell": "Bash",
    "read_file": "Read",
    "search": "Grep",
    "list_dir": "LS",
}
_CLAUDE_ALIASES = {"MultiEdit": "edit_file", "Glob": "list_dir", "NotebookEdit": None}


def _claude_tool_name(name: str) -> str:
    if name in _CLAUDE_NAMES:
        return _CLAUDE_NAMES[name]
    if "__" in name:
        return f"mcp__{name}"
    return name


def _matches(entry: HookEntry, tool_name: str) -> bool:
    if entry.claude:
        pattern = entry.matcher or "*"
        if pattern in ("*", ""):
            return True
        candidates = {_claude_tool_name(tool_name)}
        candidates |= {alias for alias, ours in _CLAUDE_ALIASES.items() if ours == tool_name}
        try:
            return any(re.fullmatch(pattern, c) for c in candidates)
        except re.error:
            return False
    return any(fnmatch.fnmatchcase(tool_name, p.strip()) for p in entry.matcher.split("|"))


def matching_hooks(hooks: Sequence[HookEntry], tool_name: str) -> list[HookEntry]:
    return [h for h in hooks if _matches(h, tool_name)]


def _claude_input(tool_name: str, arguments: Mapping[str, Any], workspace: Path) -> dict[str, Any]:
    converted = dict(arguments)
    if "path" in converted and tool_name in ("write_file", "edit_file", "read_file"):
        converted["file_path"] = str((workspace / str(converted.pop("path"))).resolve())
    return converted


def _payload(entry: HookEntry, event: HookEvent, base: Mapping[str, Any]) -> bytes:
    payload = dict(base)
    if entry.claude:
        payload["hook_event_name"] = {"before_tool": "PreToolUse", "after_tool": "PostToolUse"}.get(
            event, event
        )
        payload["cwd"] = payload.get("workspace")
        tool_name = str(payload.get("tool_name", ""))
        payload["tool_input"] = _claude_input(
            tool_name, payload.get("arguments", {}), Path(str(payload.get("workspace", ".")))
        )
        payload["tool_name"] = _claude_tool_name(tool_name)
        if "result" in payload:
            payload["tool_response"] = payload["result"]
    else:
        payload["event"] = event
    return json.dumps(payload, ensure_ascii=False).encode()


@dataclass
class _Completed:
    status: int
    stdout: str
    stderr: str


async def _run_command(entry: HookEntry, stdin: bytes, workspace: Path) -> _Completed:
    """Run one hook; raises ``TimeoutError`` after killing its whole process group. The hook
    runs under the supervisor that kills that group when agent-tui dies, as ``shell`` does."""
    process = await asyncio.create_subprocess_exec(
        *supervised_shell(entry.command, name="agent-tui-hook"),
        cwd=workspace,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        preexec_fn=parent_death_signal(),
    )
    try:
        async with asyncio.timeout(entry.timeout):
            out, err = await process.communicate(stdin)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            await process.wait()
        # The hook's own processes are the supervisor's children, not ours: killed is not yet
        # gone (a loaded machine schedules them to die later). Bounded: SIGKILL always wins.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + KILL_WAIT
        while group_alive(process.pid) and loop.time() < deadline:
            await asyncio.sleep(0.01)
        raise
    return _Completed(
        status=process.returncode or 0,
        stdout=out[:MAX_HOOK_OUTPUT].decode("utf-8", errors="replace"),
        stderr=err[:MAX_HOOK_OUTPUT].decode("utf-8", errors="replace").strip(),
    )


SAID_CHARS = 200
"""How much of a failed hook's line its failure quotes."""


def _said(done: _Completed) -> str:
    """What a failed hook said: its last line on stderr, else its first on stdout (``printed
    …``), cut and with what looks like a secret masked; "no message" when it said nothing."""
    if done.stderr:
        line = done.stderr.splitlines()[-1]
    else:
        printed = done.stdout.strip().splitlines()
        if not printed:
            return "no message"
        line = f"printed {printed[0].strip()}"
    line = mask_secrets(" ".join(line.split()))
    return line if len(line) <= SAID_CHARS else line[: SAID_CHARS - 1] + "…"


def _denied(label: str, reason: str) -> HookOutcome:
    """A deny by the hook ``label``. Its reason (what it printed on stderr, or its JSON reason)
    goes to the model, the database and exports, so what looks like a secret in it is masked
    as in the hook's shown command."""
    return HookOutcome(
        decision="deny", reason=mask_secrets(reason) or "denied by a hook", hook=label
    )


def _interpret(entry: HookEntry, done: _Completed) -> HookOutcome:
    label = entry.label()
    if done.status == 2:
        return _denied(label, done.stderr)
    if done.status != 0:
        tail = _said(done)
        return HookOutcome(hook=label, failure=f"{label} exited with status {done.status}: {tail}")
    text = done.stdout.strip()
    if not text:
        return HookOutcome(hook=label)
    try:
        answer = json.loads(text)
    except json.JSONDecodeError:
        return HookOutcome(hook=label, failure=f"{label} printed something that is not JSON")
    if not isinstance(answer, dict):
        return HookOutcome(hook=label, failure=f"{label} must print one JSON object")
    specific = answer.get("hookSpecificOutput")
    if isinstance(specific, dict) and "permissionDecision" in specific:
        decision = specific.get("permissionDecision")
        reason = str(specific.get("permissionDecisionReason") or "")
    else:
        decision = answer.get("decision", "allow")
        reason = str(answer.get("reason") or "")
    if decision in ("deny", "block"):
        return _denied(label, reason)
    result = answer.get("result")
    if result is not None and not isinstance(result, str):
        result = json.dumps(result, ensure_ascii=False)
    return HookOutcome(hook=label, reason=reason, result=result)


async def _run_one(
    entry: HookEntry, event: HookEvent, base: Mapping[str, Any], workspace: Path
) -> HookOutcome:
    try:
        done = await _run_command(entry, _payload(entry, event, base), workspace)
    except TimeoutError:
        return HookOutcome(
            hook=entry.label(),
            failure=f"{entry.label()} did not answer within {entry.timeout:g} s and was killed",
        )
    except OSError as exc:
        return HookOutcome(hook=entry.label(), failure=f"{entry.label()} could not start: {exc}")
    return _interpret(entry, done)


async def run_before_tool(
    hooks: HooksConfig,
    *,
    tool_name: str,
    arguments: Mapping[str, Any],
    workspace: Path,
    run_id: str = "",
    job_id: str = "",
    starting: Callable[[HookEntry], None] | None = None,
) -> HookOutcome:
    """Run the matching ``before_tool`` hooks in order; the first deny or failure decides.
    ``starting`` is told of each hook as it starts (what the call waits for meanwhile)."""
    base = {
        "tool_name": tool_name,
        "arguments": dict(arguments),
        "workspace": str(workspace),
        "run_id": run_id,
        "job_id": job_id,
    }
    for entry in matching_hooks(hooks.before_tool, tool_name):
        if starting is not None:
            starting(entry)
        outcome = await _run_one(entry, "before_tool", base, workspace)
        if outcome.decision == "deny" or outcome.failure:
            return outcome
    return HookOutcome()


async def run_after_tool(
    hooks: HooksConfig,
    *,
    tool_name: str,
    arguments: Mapping[str, Any],
    result: str,
    is_error: bool,
    workspace: Path,
    run_id: str = "",
    job_id: str = "",
) -> HookOutcome:
    """Run the matching ``after_tool`` hooks in order, each seeing the result the previous one
    left; the outcome carries the final result when any hook rewrote it. A ``deny`` after a tool
    (Claude Code's "block") sends its reason to the model with the result."""
    current: str | None = None
    notes: list[str] = []
    failures: list[str] = []
    for entry in matching_hooks(hooks.after_tool, tool_name):
        base = {
            "tool_name": tool_name,
            "arguments": dict(arguments),
            "result": result if current is None else current,
            "is_error": is_error,
            "workspace": str(workspace),
            "run_id": run_id,
            "job_id": job_id,
        }
        outcome = await _run_one(entry, "after_tool", base, workspace)
        if outcome.failure:
            failures.append(outcome.failure)
            continue
        if outcome.result is not None:
            current = outcome.result
        if outcome.decision == "deny":
            notes.append(f"{outcome.hook}: {outcome.reason}")
    if notes:
        current = (result if current is None else current) + "\n\n" + "\n".join(notes)
    return HookOutcome(result=current, failure="; ".join(failures) or None)


_background_tasks: set[asyncio.Task[None]] = set()
"""Notification hooks still running (kept referenced so the loop does not drop them)."""


def fire_and_forget(
    hooks: Sequence[HookEntry], event: HookEvent, payload: Mapping[str, Any], workspace: Path
) -> None:
    """Start the notification hooks of ``event``; nothing waits for them, and their failures are
    only logged (a notification must never slow or fail a run)."""
    for entry in hooks:

        async def one(entry: HookEntry = entry) -> None:
            outcome = await _run_one(entry, event, payload, workspace)
            if outcome.failure:
                log.warning("%s", outcome.failure)

        task = asyncio.get_running_loop().create_task(one(), name=f"hook-{event}")
        _background_tasks.add(task)
        task.add_done_callback(_background_tasks.discard)


@dataclass(frozen=True)
class ClaudeHookReport:
    used: list[str]
    skipped: list[str]


def _claude_settings_files(workspace: Path, env: Mapping[str, str]) -> list[Path]:
    return list(_claude_settings_paths(str(workspace), env.get("HOME") or ""))


@functools.lru_cache(maxsize=64)
def _claude_settings_paths(workspace: str, home: str) -> tuple[Path, ...]:
    """Made once per workspace and home (looked up at each step)."""
    home_path = Path(home or Path.home())
    return (
        home_path / ".claude" / "settings.json",
        Path(workspace) / ".claude" / "settings.json",
        Path(workspace) / ".claude" / "settings.local.json",
    )


FileStamp = tuple[tuple[str, int, int] | None, ...]
"""(path, mtime in ns, size) of each file that hooks are read from; None for a missing one."""


def files_stamp(paths: Sequence[Path]) -> FileStamp:
    """A cheap stamp (one ``stat`` per file) that changes when any of ``paths`` is written,
    created or removed."""
    stamps: list[tuple[str, int, int] | None] = []
    for path in paths:
        try:
            found = path.stat()
        except OSError:
            stamps.append(None)
            continue
        stamps.append((str(path), found.st_mtime_ns, found.st_size))
    return tuple(stamps)


def hook_config_files(workspace: Path, *, env: Mapping[str, str] | None = None) -> list[Path]:
    """The agent-tui config files whose ``[hooks]`` apply in ``workspace``."""
    from runtime.config import user_config_path, workspace_config_path

    return [user_config_path(env), workspace_config_path(workspace)]


def hook_files_stamps(
    workspace: Path | str, *, env: Mapping[str, str] | None = None
) -> tuple[FileStamp, FileStamp]:
    """``files_stamp`` of ``hook_config_files`` and of ``claude_settings_files``: what is
    looked at in each step, so the paths are made once per workspace and environment (making
    them again took most of the check's time) and each file costs one ``stat``."""
    env = os.environ if env is None else env
    config_paths, claude_paths = _hook_paths(
        str(workspace), env.get("XDG_CONFIG_HOME", ""), env.get("HOME") or ""
    )
    return _stamp_of(config_paths), _stamp_of(claude_paths)


@functools.lru_cache(maxsize=64)
def _hook_paths(workspace: str, xdg_config_home: str, home: str) -> tuple[tuple[str, ...], ...]:
    env = {"XDG_CONFIG_HOME": xdg_config_home, "HOME": home}
    folder = Path(workspace)
    return (
        tuple(str(path) for path in hook_config_files(folder, env=env)),
        tuple(str(path) for path in claude_settings_files(folder, env=env)),
    )


def _stamp_of(paths: tuple[str, ...]) -> FileStamp:
    """``files_stamp`` of paths given as text."""
    stamps: list[tuple[str, int, int] | None] = []
    for path in paths:
        try:
            found = os.stat(path)
        except OSError:
            stamps.append(None)
            continue
        stamps.append((path, found.st_mtime_ns, found.st_size))
    return tuple(stamps)


def claude_settings_files(workspace: Path, *, env: Mapping[str, str] | None = None) -> list[Path]:
    """The Claude Code settings files whose hooks apply in ``workspace``."""
    return _claude_settings_files(workspace, os.environ if env is None else env)


def load_claude_hooks(
    workspace: Path, *, env: Mapping[str, str] | None = None
) -> tuple[HooksConfig, ClaudeHookReport]:
    """Claude Code's PreToolUse / PostToolUse command hooks as agent-tui hooks, and a report of
    which entries were used and which were skipped (and why)."""
    env = os.environ if env is None else env
    config = HooksConfig()
    used: list[str] = []
    skipped: list[str] = []
    events: dict[str, HookEvent] = {"PreToolUse": "before_tool", "PostToolUse": "after_tool"}
    for path in _claude_settings_files(workspace, env):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            skipped.append(f"{path}: not readable as JSON ({exc})")
            continue
        hooks = data.get("hooks") if isinstance(data, dict) else None
        if not isinstance(hooks, dict):
            continue
        for claude_event, groups in hooks.items():
            where = f"{path}: hooks.{claude_event}"
            if claude_event not in events:
                skipped.append(f"{where}: agent-tui has no such event")
                continue
            for index, group in enumerate(groups if isinstance(groups, list) else []):
                matcher = str(group.get("matcher", "*")) if isinstance(group, dict) else "*"
                entries = group.get("hooks", []) if isinstance(group, dict) else []
                for inner, hook in enumerate(entries if isinstance(entries, list) else []):
                    label = f"{where}[{index}].hooks[{inner}]"
                    if not isinstance(hook, dict) or hook.get("type") != "command":
                        skipped.append(f"{label}: only command hooks map to agent-tui")
                        continue
                    command = hook.get("command")
                    if not isinstance(command, str) or not command.strip():
                        skipped.append(f"{label}: no command")
                        continue
                    timeout = hook.get("timeout", 60)
                    entry = HookEntry(
                        command=command,
                        matcher=matcher,
                        timeout=float(timeout) if isinstance(timeout, int | float) else 60.0,
                        source=str(path),
                        claude=True,
                    )
                    config = config.with_entries(events[claude_event], [entry])
                    used.append(f"{label}: {matcher or '*'} → {shown_command(command)}")
    return config, ClaudeHookReport(used=used, skipped=skipped)
