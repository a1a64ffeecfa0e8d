"""API-neutral view of one model request and of the mock's answer to it.

`responses_api` and `chat_api` translate their wire formats into a `RequestView`,
`script.decide` turns that view into a `Decision`, and the API modules render the
decision back into their own wire format. Nothing here knows about HTTP.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolSpec:
    """A tool the client advertised in this request."""

    name: str
    parameters: dict[str, Any] = field(default_factory=dict)
    """The tool's JSON schema (`{}` when the client gave none)."""
    custom: bool = False
    """True for a Responses API freeform ("custom") tool such as Codex's apply_patch."""

    @property
    def properties(self) -> dict[str, Any]:
        props = self.parameters.get("properties")
        return props if isinstance(props, dict) else {}

    @property
    def required(self) -> list[str]:
        req = self.parameters.get("required")
        return [r for r in req if isinstance(r, str)] if isinstance(req, list) else []


@dataclass(frozen=True)
class UserMessage:
    """The text of one user message and how many tool results came before it."""

    text: str
    tool_results_before: int


@dataclass(frozen=True)
class RequestView:
    """Everything the mock's decision may depend on; built from one request body."""

    model: str
    tools: tuple[ToolSpec, ...]
    user_messages: tuple[UserMessage, ...]
    tool_results: int
    """Tool results (function/custom call outputs, role "tool" messages) in the history."""
    stream: bool = True
    include_usage: bool = False
    body_chars: int = 0
    """Size of the request body; the mock's input-token count is derived from it."""
    cwd: str | None = None
    """The client's working directory, when its file tools want absolute paths (Claude Code)."""

    def tool(self, name: str) -> ToolSpec | None:
        return next((t for t in self.tools if t.name == name), None)


@dataclass(frozen=True)
class TextReply:
    """A final assistant message."""

    text: str


@dataclass(frozen=True)
class ToolCallReply:
    """One tool call. `arguments` is the JSON string (function tools) or the raw input (custom tools)."""

    name: str
    arguments: str
    call_id: str
    custom: bool = False


Reply = TextReply | ToolCallReply


@dataclass(frozen=True)
class Decision:
    """The answer plus why it was chosen (logged with the request)."""

    reply: Reply
    role: str | None = None
    loop: int | None = None
    attempt: int | None = None
    step: int | None = None
    source: str = "default"
    """Which rule answered: title | script | default | error."""

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "role": self.role, "loop": self.loop,
                               "attempt": self.attempt, "step": self.step}
        if isinstance(self.reply, TextReply):
            out.update(kind="text", text=self.reply.text)
        else:
            out.update(kind="tool_call", tool=self.reply.name, arguments=self.reply.arguments,
                       call_id=self.reply.call_id, custom=self.reply.custom)
        return out


def stable_id(prefix: str, *parts: object, n: int = 12) -> str:
    """A deterministic id, so that a retried request gets the same answer, ids included."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()
    return f"{prefix}{digest[:n]}"


def estimate_tokens(chars: int) -> int:
    """Rough 4-chars-per-token count: only needs to be non-zero and deterministic."""
    return max(1, chars // 4)


def split_text(text: str, pieces: int = 3, min_size: int = 16) -> list[str]:
    """Cut text into a few streaming deltas: more than one, so clients' delta joining is exercised,
    but few, because some clients (Pi) repeat the whole partial message in every delta event."""
    size = max(min_size, -(-len(text) // pieces))
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def sse(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    """One server-sent event frame."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def content_text(content: Any) -> str:
    """The text of a message `content`: a string, or a list of parts with `text` (both APIs)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""
