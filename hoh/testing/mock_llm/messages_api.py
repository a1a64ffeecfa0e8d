"""Anthropic Messages API (`POST /v1/messages`), the wire API of Claude Code.

Claude Code 2.1.332 always streams (HARNESS-claude-code.md §2). The SSE form it accepts::

    event: message_start        {message: {id, role, model, content: [], usage: {input_tokens, ...}}}
    event: ping
    event: content_block_start  {index, content_block: {type: text, text: ""} | {type: tool_use, id, name, input: {}}}
    event: content_block_delta  {index, delta: {type: text_delta, text} | {type: input_json_delta, partial_json}}
    event: content_block_stop   {index}
    event: message_delta        {delta: {stop_reason: end_turn | tool_use}, usage: {output_tokens}}
    event: message_stop

Tool results come back as `tool_result` blocks inside a user message. Claude Code's file tools
take absolute paths; the working directory is read from the `<env>` reminder of the first
user message (` - Primary working directory: /abs`), so a script's relative paths resolve there.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .model import (Decision, RequestView, TextReply, ToolSpec, UserMessage, estimate_tokens, split_text, sse,
                    stable_id)

CWD_RE = re.compile(r"^[ \t-]*Primary working directory:[ \t]*(/\S.*?)[ \t]*$", re.MULTILINE)
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error",
               500: "api_error", 529: "overloaded_error"}


def _text_of(content: Any) -> str:
    """The text blocks of a message (tool_result blocks are counted, not read)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"
                         and isinstance(b.get("text"), str))
    return ""


def _results_in(content: Any) -> int:
    if not isinstance(content, list):
        return 0
    return sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result")


def parse(body: dict[str, Any], body_chars: int = 0) -> RequestView:
    """Read the tools, user messages, tool-result count and working directory out of a Messages request."""
    users: list[UserMessage] = []
    results = 0
    for msg in body.get("messages") or []:
        if not isinstance(msg, dict) or msg.get("role") != "user":
            continue
        content = msg.get("content")
        results += _results_in(content)
        text = _text_of(content)
        if text:
            users.append(UserMessage(text, results))
    tools = tuple(ToolSpec(t["name"], t.get("input_schema") if isinstance(t.get("input_schema"), dict) else {})
                  for t in body.get("tools") or [] if isinstance(t, dict) and isinstance(t.get("name"), str))
    cwd = next((m[1] for u in users if (m := CWD_RE.search(u.text))), None)
    return RequestView(model=str(body.get("model", "mock-model")), tools=tools, user_messages=tuple(users),
                       tool_results=results, stream=bool(body.get("stream", False)), include_usage=True,
                       body_chars=body_chars, cwd=cwd)


def _usage(view: RequestView, decision: Decision) -> tuple[int, int]:
    reply = decision.reply
    out_chars = len(reply.text if isinstance(reply, TextReply) else reply.arguments)
    return estimate_tokens(view.body_chars), estimate_tokens(out_chars)


def _message_id(view: RequestView, decision: Decision) -> str:
    reply = decision.reply
    key = reply.text if isinstance(reply, TextReply) else reply.call_id
    return stable_id("msg_", view.model, view.tool_results, key)


def _block(decision: Decision, done: bool) -> dict[str, Any]:
    reply = decision.reply
    if isinstance(reply, TextReply):
        return {"type": "text", "text": reply.text if done else ""}
    return {"type": "tool_use", "id": reply.call_id, "name": reply.name,
            "input": json.loads(reply.arguments) if done else {}}


def _stop_reason(decision: Decision) -> str:
    return "end_turn" if isinstance(decision.reply, TextReply) else "tool_use"


def json_body(view: RequestView, decision: Decision) -> dict[str, Any]:
    """The non-streamed answer (`stream: false`)."""
    inp, out = _usage(view, decision)
    return {"id": _message_id(view, decision), "type": "message", "role": "assistant", "model": view.model,
            "content": [_block(decision, done=True)], "stop_reason": _stop_reason(decision), "stop_sequence": None,
            "usage": {"input_tokens": inp, "output_tokens": out,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


def sse_frames(view: RequestView, decision: Decision, minimal: bool = False) -> list[bytes]:
    """The whole streamed answer as SSE frames, ending with `message_stop` (`minimal` drops the ping)."""
    inp, out = _usage(view, decision)
    reply = decision.reply
    start = {**json_body(view, decision), "content": [], "stop_reason": None,
             "usage": {"input_tokens": inp, "output_tokens": 1,
                       "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}
    if isinstance(reply, TextReply):
        deltas = [{"type": "text_delta", "text": piece} for piece in split_text(reply.text)]
    else:
        deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in split_text(reply.arguments)]
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    if not minimal:
        events.append({"type": "ping"})
    events.append({"type": "content_block_start", "index": 0, "content_block": _block(decision, done=False)})
    events += [{"type": "content_block_delta", "index": 0, "delta": d} for d in deltas]
    events += [{"type": "content_block_stop", "index": 0},
               {"type": "message_delta", "delta": {"stop_reason": _stop_reason(decision), "stop_sequence": None},
                "usage": {"output_tokens": out}},
               {"type": "message_stop"}]
    return [sse(e, event=e["type"]) for e in events]


def error_body(status: int, message: str) -> dict[str, Any]:
    """An Anthropic-style error object."""
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}
