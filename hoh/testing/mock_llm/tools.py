"""Build tool-call arguments from the tools a client advertised.

Each harness names and shapes its tools differently (HARNESSES.md §1):

* write tools: OpenCode `write {filePath, content}`, Pi `write {path, content}`, Claude Code
  `Write {file_path (absolute), content}`, others `write_file {file_path, content}`;
* shell tools: Codex `exec_command {cmd}` (unified exec), `shell_command {command: str}`,
  `shell {command: [argv]}`; OpenCode and Pi `bash {command}`; Claude Code `Bash {command}`.

Codex advertises no write tool, so a write step falls back to a shell command that
decodes base64: it reproduces any content byte for byte, whatever quotes, `$`,
backslashes or newlines it holds, without depending on heredoc quoting rules.
"""

from __future__ import annotations

import base64
import posixpath
import shlex
from typing import Any

from .model import ToolSpec

WRITE_TOOLS = ("write", "write_file", "Write")
PATH_KEYS = ("filePath", "file_path", "path")
SHELL_TOOLS = ("exec_command", "shell_command", "shell", "bash", "Bash")
FILLER = "mock-llm scripted step"
READ_BEFORE_WRITE = {"Write": "Read"}
"""Write tools that refuse to overwrite a file the agent has not read in this session → their read tool."""


class NoSuitableTool(Exception):
    """The step needs a kind of tool the client did not advertise."""


def write_file_command(path: str, content: str) -> str:
    """A POSIX shell command that writes `content` (UTF-8) to `path` exactly.

    Parent directories are created. The command travels as one argv string, so
    content above ~90 KB may hit the kernel's per-argument limit (128 KiB).
    """
    target = shlex.quote(path)
    data = content.encode("utf-8")
    body = f"printf %s {shlex.quote(base64.b64encode(data).decode())} | base64 -d > {target}" if data \
        else f": > {target}"
    parent = posixpath.dirname(path)
    return f"mkdir -p {shlex.quote(parent)} && {body}" if parent else body


def find_write_tool(tools: tuple[ToolSpec, ...]) -> tuple[ToolSpec, str] | None:
    """The advertised write tool and the name of its path argument, if any."""
    for name in WRITE_TOOLS:
        tool = next((t for t in tools if t.name == name and not t.custom), None)
        if tool is None:
            continue
        props = tool.properties
        key = next((k for k in PATH_KEYS if k in props), None)
        if props and (key is None or "content" not in props):
            continue  # a "write" tool of some other shape: don't guess
        return tool, key or "path"
    return None


def read_before_write_tool(tools: tuple[ToolSpec, ...]) -> ToolSpec | None:
    """The read tool to call before each write, when the advertised write tool demands one."""
    found = find_write_tool(tools)
    read_name = READ_BEFORE_WRITE.get(found[0].name) if found else None
    return next((t for t in tools if t.name == read_name), None) if read_name else None


def find_shell_tool(tools: tuple[ToolSpec, ...]) -> ToolSpec | None:
    for name in SHELL_TOOLS:
        tool = next((t for t in tools if t.name == name and not t.custom), None)
        if tool is not None:
            return tool
    return None


def shell_arguments(tool: ToolSpec, command: str) -> dict[str, Any]:
    """Arguments that make `tool` run `command` in bash."""
    props = tool.properties
    key = "cmd" if "cmd" in props or (not props and tool.name == "exec_command") else "command"
    schema = props.get(key, {})
    is_argv = schema.get("type") == "array" if isinstance(schema, dict) else False
    if not props and tool.name == "shell":
        is_argv = True  # Codex's classic shell tool takes an argv list
    args: dict[str, Any] = {key: ["bash", "-lc", command] if is_argv else command}
    return fill_required(tool, args)


def fill_required(tool: ToolSpec, args: dict[str, Any]) -> dict[str, Any]:
    """Give required string arguments we know nothing about (e.g. a `description`) a filler value."""
    for name in tool.required:
        if name in args:
            continue
        schema = tool.properties.get(name, {})
        if isinstance(schema, dict) and schema.get("type") == "string":
            args[name] = FILLER
    return args


def write_call(tools: tuple[ToolSpec, ...], path: str, content: str,
               prefer: str = "write", cwd: str | None = None) -> tuple[str, dict[str, Any]]:
    """(tool name, arguments) that write `content` to `path`.

    `prefer="shell"` skips the write tool even when one is advertised, so that a test can
    exercise a harness's shell path (or bypass a write tool that misbehaves). With `cwd`
    (a client whose write tool takes absolute paths), a relative path is resolved there.
    """
    found = find_write_tool(tools) if prefer != "shell" else None
    if found is not None:
        tool, key = found
        target = posixpath.join(cwd, path) if cwd else path
        return tool.name, fill_required(tool, {key: target, "content": content})
    shell = find_shell_tool(tools)
    if shell is None:
        raise NoSuitableTool(f"cannot write {path}: no write or shell tool advertised")
    return shell.name, shell_arguments(shell, write_file_command(path, content))


def shell_call(tools: tuple[ToolSpec, ...], command: str) -> tuple[str, dict[str, Any]]:
    shell = find_shell_tool(tools)
    if shell is None:
        raise NoSuitableTool(f"cannot run {command!r}: no shell tool advertised")
    return shell.name, shell_arguments(shell, command)
