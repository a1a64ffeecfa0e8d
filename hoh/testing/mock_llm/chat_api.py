"""OpenAI Chat Completions (`POST /v1/chat/completions`), the wire API of OpenCode and Pi.

Streamed answers (`stream: true`) are `data: {chat.completion.chunk}` frames: a first chunk
with the role (and, for a tool call, its id and name), argument or content deltas, a chunk
with `finish_reason` (`tool_calls` | `stop`), a usage chunk (`choices: []`) when the client
asked for `stream_options.include_usage`, then `data: [DONE]`. The minimal form keeps only
`{"choices": [...]}` in each chunk and sends no usage. Tool results come back as
`role: "tool"` messages.
"""

from __future__ import annotations

import time
from typing import Any

from .model import (Decision, RequestView, TextReply, ToolSpec, UserMessage, content_text, estimate_tokens,
                    split_text, sse, stable_id)


def parse(body: dict[str, Any], body_chars: int = 0) -> RequestView:
    """Read the tools, user messages and tool-result count out of a chat request."""
    users: list[UserMessage] = []
    results = 0
    for msg in body.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        if msg.get("role") == "tool":
            results += 1
        elif msg.get("role") == "user":
            users.append(UserMessage(content_text(msg.get("content")), results))
    tools = []
    for t in body.get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and fn.get("name"):
            params = fn.get("parameters") if isinstance(fn.get("parameters"), dict) else {}
            tools.append(ToolSpec(fn["name"], params))
    options = body.get("stream_options") if isinstance(body.get("stream_options"), dict) else {}
    return RequestView(model=str(body.get("model", "mock-model")), tools=tuple(tools),
                       user_messages=tuple(users), tool_results=results,
                       stream=bool(body.get("stream", False)),
                       include_usage=bool(options.get("include_usage")), body_chars=body_chars)



def _usage(view: RequestView, decision: Decision) -> dict[str, int]:
    reply = decision.reply
    out_chars = len(reply.text if isinstance(reply, TextReply) else reply.arguments)
    prompt, completion = estimate_tokens(view.body_chars), estimate_tokens(out_chars)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _ident(view: RequestView, decision: Decision) -> dict[str, Any]:
    reply = decision.reply
    key = reply.text if isinstance(reply, TextReply) else reply.call_id
    return {"id": stable_id("chatcmpl-", view.model, view.tool_results, key),
            "created": int(time.time()), "model": view.model}


def json_body(view: RequestView, decision: Decision) -> dict[str, Any]:
    """The non-streamed answer (`stream: false`)."""
    reply = decision.reply
    if isinstance(reply, TextReply):
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        finish = "stop"
    else:
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": reply.call_id, "type": "function", "function": {"name": reply.name, "arguments": reply.arguments}}]}
        finish = "tool_calls"
    return {**_ident(view, decision), "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": _usage(view, decision)}


def sse_frames(view: RequestView, decision: Decision, minimal: bool = False) -> list[bytes]:
    """The whole streamed answer as SSE frames, terminated by `data: [DONE]`."""
    reply = decision.reply
    if isinstance(reply, TextReply):
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        deltas += [{"content": piece} for piece in split_text(reply.text)]
        finish = "stop"
    else:
        deltas = [{"role": "assistant", "content": None, "tool_calls": [
            {"index": 0, "id": reply.call_id, "type": "function", "function": {"name": reply.name, "arguments": ""}}]}]
        deltas += [{"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
                   for piece in split_text(reply.arguments)]
        finish = "tool_calls"
    choices = [[{"index": 0, "delta": d, "finish_reason": None}] for d in deltas]
    choices.append([{"index": 0, "delta": {}, "finish_reason": finish}])
    if minimal:
        return [sse({"choices": c}) for c in choices] + [sse("[DONE]")]
    head = {**_ident(view, decision), "object": "chat.completion.chunk"}
    frames = [sse({**head, "choices": c}) for c in choices]
    if view.include_usage:
        frames.append(sse({**head, "choices": [], "usage": _usage(view, decision)}))
    return frames + [sse("[DONE]")]
