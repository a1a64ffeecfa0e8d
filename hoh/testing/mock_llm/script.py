"""The mock's script and the stateless rule that picks an answer for a request.

A script maps (role, loop[, attempt]) to a list of steps. Two equivalent JSON forms::

    {"entries": [{"role": "developer", "loop": 1, "steps": [...]},
                 {"role": "developer", "loop": 1, "attempt": 2, "steps": [...]},
                 {"role": "qa", "steps": [...]}],              # no loop: any loop
     "default": [...]}                                         # optional

    {"developer": {"1": [...], "1/2": [...]}, "qa": {"*": [...]}}

Steps (one key each; `final` must come last)::

    {"write": {"path": "calc.py", "content": "...", "via": "shell"}}   # via: optional, forces the shell fallback
    {"shell": "python calc.py 1 + 2 > out.txt"}
    {"call": {"name": "read", "arguments": {"path": "x"}}}             # a raw call of an advertised tool
    {"final": "<text>"}  or  {"final": {...JSON...}}                    # objects are sent as compact JSON

Strings in steps may hold `{{candidate_id}}`, `{{candidate_dir}}` and `{{evidence_dir}}` (read from
the prompt's fact lines, `hoh.markers`) and `{{role}}`, `{{loop}}`, `{{attempt}}`.

The decision depends only on the request, because clients retry:

1. no tools advertised → the text "Mock title" (OpenCode's title generator);
2. the role marker `<!-- hoh:role=R loop=N attempt=K -->` is taken from the *last* user
   message that has one (for a single prompt that is also the first; after a resumed re-ask
   it is the new attempt's), and the entry is looked up by (R, N, K), then (R, N), then (R, any);
3. no marker or no entry → the default script (write hello.txt = hi, then a JSON status);
4. step index = tool results in the history after that user message; past the last action
   step, the answer is the final text. Where the client's write tool must read a file before
   overwriting it (Claude Code), each write step is preceded by a read step.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...markers import find_fact, find_role_marker
from .model import Decision, RequestView, TextReply, ToolCallReply, stable_id
from .tools import NoSuitableTool, read_before_write_tool, shell_call, write_call

TITLE_TEXT = "Mock title"
DEFAULT_FINAL = '{"status":"done","files":["hello.txt"]}'
DEFAULT_STEPS: tuple[dict[str, Any], ...] = (
    {"write": {"path": "hello.txt", "content": "hi"}},
    {"final": DEFAULT_FINAL},
)

STEP_KINDS = ("write", "shell", "call", "final")


class ScriptError(ValueError):
    """The script file is malformed; the message says which entry and step."""


@dataclass(frozen=True)
class Entry:
    """The steps for one (role, loop, attempt); None for loop/attempt means "any"."""

    role: str | None
    loop: int | None
    attempt: int | None
    steps: tuple[dict[str, Any], ...]

    @property
    def actions(self) -> tuple[dict[str, Any], ...]:
        return tuple(s for s in self.steps if "final" not in s)

    @property
    def final(self) -> Any:
        last = self.steps[-1] if self.steps else {}
        return last.get("final", DEFAULT_FINAL)


@dataclass(frozen=True)
class Script:
    """Scripted steps per (role, loop[, attempt]); see the module docstring for the format."""

    entries: tuple[Entry, ...] = ()
    default: Entry = field(default_factory=lambda: Entry(None, None, None, DEFAULT_STEPS))

    @classmethod
    def load(cls, source: "Script | dict | str | Path | None") -> "Script":
        """Accept a Script, a parsed dict, a path to a JSON file, or None (the default script)."""
        if source is None:
            return cls()
        if isinstance(source, Script):
            return source
        if isinstance(source, (str, Path)):
            try:
                source = json.loads(Path(source).read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise ScriptError(f"cannot read script {source}: {exc}") from exc
        if not isinstance(source, dict):
            raise ScriptError("a script must be a JSON object")
        return cls.from_dict(source)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Script":
        entries: list[Entry] = []
        for i, raw in enumerate(data.get("entries", [])):
            if not isinstance(raw, dict) or "role" not in raw:
                raise ScriptError(f"entries[{i}] needs at least a role and steps")
            entries.append(_entry(raw["role"], raw.get("loop"), raw.get("attempt"), raw.get("steps"),
                                  where=f"entries[{i}]"))
        for role, by_loop in data.items():
            if role in ("entries", "default", "version"):
                continue
            if not isinstance(by_loop, dict):
                raise ScriptError(f"{role}: expected an object of loop keys ('1', '1/2', '*')")
            for key, steps in by_loop.items():
                loop, _, attempt = str(key).partition("/")
                entries.append(_entry(role, None if loop == "*" else loop, attempt or None, steps,
                                      where=f"{role}[{key}]"))
        if "default" in data:
            return cls(tuple(entries), _entry(None, None, None, data["default"], where="default"))
        return cls(tuple(entries))

    def lookup(self, role: str, loop: int, attempt: int | None) -> Entry | None:
        """Most specific entry first: (role, loop, attempt), (role, loop), (role, any loop)."""
        for want_loop, want_attempt in ((loop, attempt), (loop, None), (None, None)):
            for e in self.entries:
                if e.role == role and e.loop == want_loop and e.attempt == want_attempt:
                    return e
        return None


def _entry(role: Any, loop: Any, attempt: Any, steps: Any, where: str) -> Entry:
    try:
        loop_n = None if loop is None else int(loop)
        attempt_n = None if attempt is None else int(attempt)
    except (TypeError, ValueError) as exc:
        raise ScriptError(f"{where}: loop/attempt must be integers") from exc
    if not isinstance(steps, list) or not steps:
        raise ScriptError(f"{where}: steps must be a non-empty list")
    for j, step in enumerate(steps):
        _check_step(step, f"{where}.steps[{j}]", last=j == len(steps) - 1)
    return Entry(None if role is None else str(role), loop_n, attempt_n, tuple(steps))


def _check_step(step: Any, where: str, last: bool) -> None:
    if not isinstance(step, dict) or len(step) != 1 or next(iter(step)) not in STEP_KINDS:
        raise ScriptError(f"{where}: a step is one of {{{', '.join(STEP_KINDS)}: ...}}, got {step!r}")
    kind, value = next(iter(step.items()))
    if kind == "final" and not last:
        raise ScriptError(f"{where}: 'final' must be the last step")
    if kind == "write" and not (isinstance(value, dict) and isinstance(value.get("path"), str)
                                and isinstance(value.get("content"), str)):
        raise ScriptError(f"{where}: write needs string 'path' and 'content'")
    if kind == "shell" and not isinstance(value, str):
        raise ScriptError(f"{where}: shell needs a command string")
    if kind == "call" and not (isinstance(value, dict) and isinstance(value.get("name"), str)):
        raise ScriptError(f"{where}: call needs a tool 'name'")


@dataclass(frozen=True)
class Marker:
    """A parsed `<!-- hoh:role=R loop=N attempt=K -->` and the index of the user message holding it."""

    role: str
    loop: int
    attempt: int | None
    message_index: int


def find_marker(view: RequestView) -> Marker | None:
    """The role marker of the last user message that carries one."""
    for i in range(len(view.user_messages) - 1, -1, -1):
        found = find_role_marker(view.user_messages[i].text)
        if found:
            return Marker(found.role, found.loop, found.attempt, i)
    return None


def prompt_values(view: RequestView, marker: Marker | None) -> dict[str, str]:
    """Placeholder values, read from the marked prompt first, then from any user message."""
    texts = [m.text for m in view.user_messages]
    if marker is not None:
        texts.insert(0, texts[marker.message_index])
    values: dict[str, str] = {}
    for name in ("candidate_id", "evidence_dir", "candidate_dir"):
        found = next((f for t in texts if (f := find_fact(name, t))), None)
        if found is not None:
            values[name] = found
    if marker is not None:
        values.update(role=marker.role, loop=str(marker.loop),
                      attempt="" if marker.attempt is None else str(marker.attempt))
    return values


def substitute(value: Any, values: dict[str, str]) -> Any:
    """Replace `{{name}}` in every string inside `value`; unknown names stay visible."""
    if isinstance(value, str):
        for name, text in values.items():
            value = value.replace("{{" + name + "}}", text)
        return value
    if isinstance(value, list):
        return [substitute(v, values) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, values) for k, v in value.items()}
    return value


def decide(view: RequestView, script: Script, final_text: str | None = None,
           tool_pref: str = "write") -> Decision:
    """Pick the answer for one request (see the module docstring)."""
    if not view.tools:
        return Decision(TextReply(TITLE_TEXT), source="title")
    marker = find_marker(view)
    entry = script.lookup(marker.role, marker.loop, marker.attempt) if marker else None
    source = "script" if entry is not None else "default"
    entry = entry or script.default
    before = view.user_messages[marker.message_index].tool_results_before if marker else 0
    step = max(0, view.tool_results - before)
    values = prompt_values(view, marker)
    where = dict(role=marker.role if marker else None, loop=marker.loop if marker else None,
                 attempt=marker.attempt if marker else None, step=step)
    actions = read_before_writes(view, entry.actions, tool_pref)
    if step >= len(actions):
        final = substitute(final_text if final_text is not None else entry.final, values)
        text = final if isinstance(final, str) else json.dumps(final, separators=(",", ":"))
        return Decision(TextReply(text), source=source, **where)
    action = substitute(actions[step], values)
    try:
        reply = _tool_call(view, action, tool_pref, call_key=(marker, step))
    except NoSuitableTool as exc:
        return Decision(TextReply(f"mock-llm error at step {step}: {exc}"), source="error", **where)
    return Decision(reply, source=source, **where)


def read_before_writes(view: RequestView, actions: tuple[dict[str, Any], ...],
                       tool_pref: str) -> tuple[dict[str, Any], ...]:
    """Precede each write with a read when the client's write tool refuses to overwrite an unread file
    (Claude Code's `Write`). The mock cannot know whether the file exists; a read of a missing file is
    only a tool error, and the write then creates it."""
    read = read_before_write_tool(view.tools)
    if read is None or tool_pref == "shell":
        return actions
    out: list[dict[str, Any]] = []
    for action in actions:
        if "write" in action and action["write"].get("via") != "shell":
            path = action["write"]["path"]
            out.append({"call": {"name": read.name, "arguments": {
                "file_path": posixpath.join(view.cwd, path) if view.cwd else path}}})
        out.append(action)
    return tuple(out)


def _tool_call(view: RequestView, action: dict[str, Any], tool_pref: str, call_key: Any) -> ToolCallReply:
    kind, value = next(iter(action.items()))
    call_id = stable_id("call_", call_key, json.dumps(action, sort_keys=True))
    if kind == "write":
        prefer = "shell" if value.get("via") == "shell" else tool_pref
        name, args = write_call(view.tools, value["path"], value["content"], prefer=prefer, cwd=view.cwd)
    elif kind == "shell":
        name, args = shell_call(view.tools, value)
    else:
        tool = view.tool(value["name"])
        if tool is None:
            raise NoSuitableTool(f"tool {value['name']!r} was not advertised")
        if tool.custom:
            return ToolCallReply(tool.name, str(value.get("input", "")), call_id, custom=True)
        name, args = tool.name, value.get("arguments", {})
    return ToolCallReply(name, json.dumps(args), call_id)
