"""OpenAI Responses API (`POST /v1/responses`), the wire API Codex CLI uses.

Full SSE form (the default), as Codex 0.171.0 accepted it (HARNESSES.md §1)::

    event: response.created            {response: {id, status: in_progress, output: []}}
    event: response.output_item.added  {item: in-progress message / function_call}
    event: response.output_text.delta  (messages only, several)
    event: response.output_item.done   {item: the finished item}
    event: response.completed          {response: {..., output, usage}}

The minimal ("bare") form drops the `event:` lines, `response.created`, the deltas and usage.
Codex sends tool results back as `function_call_output` / `custom_tool_call_output` items.
"""

from __future__ import annotations

import time
from typing import Any

from .model import (Decision, RequestView, TextReply, ToolSpec, UserMessage, content_text, estimate_tokens,
                    split_text, sse, stable_id)


def parse(body: dict[str, Any], body_chars: int = 0) -> RequestView:
    """Read the tools, user messages and tool-result count out of a Responses request."""
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    users: list[UserMessage] = []
    results = 0
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if isinstance(kind, str) and kind.endswith("_call_output"):
            results += 1
        elif kind == "message" and item.get("role") == "user":
            users.append(UserMessage(content_text(item.get("content")), results))
    tools = []
    for t in body.get("tools") or []:
        if isinstance(t, dict) and t.get("type") in ("function", "custom") and t.get("name"):
            params = t.get("parameters") if isinstance(t.get("parameters"), dict) else {}
            tools.append(ToolSpec(t["name"], params, custom=t["type"] == "custom"))
    return RequestView(model=str(body.get("model", "mock-model")), tools=tuple(tools),
                       user_messages=tuple(users), tool_results=results,
                       stream=bool(body.get("stream", False)), include_usage=True, body_chars=body_chars)



def output_item(decision: Decision, done: bool = True) -> dict[str, Any]:
    """The output item; `done=False` gives the in-progress shape sent with output_item.added."""
    reply = decision.reply
    status = "completed" if done else "in_progress"
    if isinstance(reply, TextReply):
        content = [{"type": "output_text", "text": reply.text, "annotations": []}] if done else []
        return {"type": "message", "id": stable_id("msg_", reply.text), "status": status,
                "role": "assistant", "content": content}
    if reply.custom:
        return {"type": "custom_tool_call", "id": stable_id("ctc_", reply.call_id), "status": status,
                "call_id": reply.call_id, "name": reply.name, "input": reply.arguments if done else ""}
    return {"type": "function_call", "id": stable_id("fc_", reply.call_id), "status": status,
            "call_id": reply.call_id, "name": reply.name, "arguments": reply.arguments if done else ""}


def response_object(view: RequestView, decision: Decision, complete: bool = True) -> dict[str, Any]:
    item = output_item(decision)
    out_chars = len(item.get("arguments") or item.get("input") or decision_text(decision))
    obj: dict[str, Any] = {
        "id": stable_id("resp_", view.model, view.tool_results, item["id"]), "object": "response",
        "created_at": int(time.time()), "status": "completed" if complete else "in_progress",
        "model": view.model, "output": [item] if complete else [],
    }
    if complete:
        inp, out = estimate_tokens(view.body_chars), estimate_tokens(out_chars)
        obj["usage"] = {"input_tokens": inp, "input_tokens_details": {"cached_tokens": 0},
                        "output_tokens": out, "output_tokens_details": {"reasoning_tokens": 0},
                        "total_tokens": inp + out}
    return obj


def decision_text(decision: Decision) -> str:
    return decision.reply.text if isinstance(decision.reply, TextReply) else ""


def json_body(view: RequestView, decision: Decision) -> dict[str, Any]:
    """The non-streamed answer (`stream: false`)."""
    return response_object(view, decision)


def sse_frames(view: RequestView, decision: Decision, minimal: bool = False) -> list[bytes]:
    """The whole streamed answer as SSE frames, terminated by `response.completed`."""
    done_item = output_item(decision)
    final = response_object(view, decision)
    if minimal:
        return [sse({"type": "response.output_item.done", "output_index": 0, "item": done_item}),
                sse({"type": "response.completed", "response": {"id": final["id"]}})]
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response_object(view, decision, complete=False)},
        {"type": "response.output_item.added", "output_index": 0, "item": output_item(decision, done=False)},
    ]
    if isinstance(decision.reply, TextReply):
        events += [{"type": "response.output_text.delta", "item_id": done_item["id"], "output_index": 0,
                    "content_index": 0, "delta": piece} for piece in split_text(decision.reply.text)]
    events += [{"type": "response.output_item.done", "output_index": 0, "item": done_item},
               {"type": "response.completed", "response": final}]
    return [sse({**e, "sequence_number": n}, event=e["type"]) for n, e in enumerate(events)]
