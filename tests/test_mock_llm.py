"""Tests of the scripted mock model server (hoh.testing.mock_llm), driven over real HTTP on 127.0.0.1.

The tool schemas come from tests/data/harness_streams/<cli>/tools.json: what the real Codex,
OpenCode, Pi and Claude Code advertised to this server (recorded by `python -m hoh.testing.mock_llm.record`,
together with their event streams).
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hoh.testing.mock_llm import MockLLM, Script, ScriptError, Settings
from hoh.testing.mock_llm.tools import write_file_command

STREAMS = Path(__file__).parent / "data" / "harness_streams"
SECRET = "sk-test-secret-value-42"
AWKWARD = "a 'quote' \"dq\" $HOME ${X} $(id) `id` \\ \\n %s %%\n\ttab — ✓\n\nno final newline \\"


def real_tools(cli: str) -> list[dict[str, Any]]:
    """The tools the real CLI advertised (recorded by hoh.testing.mock_llm.record, descriptions stripped)."""
    return json.loads((STREAMS / cli / "tools.json").read_text())


def fn(name: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": props, "required": required}}}


STR = {"type": "string"}
CODEX_TOOLS, OPENCODE_TOOLS, PI_TOOLS = real_tools("codex"), real_tools("opencode"), real_tools("pi")
CLAUDE_TOOLS = real_tools("claude")
PI_READONLY = [t for t in PI_TOOLS if t["function"]["name"] == "read"]

SCRIPT = {"entries": [
    {"role": "developer", "loop": 1, "steps": [
        {"write": {"path": "calc.py", "content": "print(3)\n"}},
        {"shell": "python calc.py > out.txt"},
        {"final": {"status": "done", "candidate": "{{candidate_id}}", "evidence": "{{evidence_dir}}"}}]},
    {"role": "developer", "loop": 1, "attempt": 2, "steps": [{"final": "attempt two"}]},
    {"role": "qa", "steps": [{"final": "qa any loop {{loop}}"}]},
]}


# -- helpers ---------------------------------------------------------------------------------------
def request(m: MockLLM, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
            timeout: float = 5) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", m.port, timeout=timeout)
    try:
        data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def events(raw: bytes) -> list[Any]:
    """The `data:` payloads of an SSE body (JSON-decoded, except [DONE])."""
    out = []
    for line in (raw.decode() if isinstance(raw, bytes) else raw).splitlines():
        if line.startswith("data: "):
            payload = line[6:]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def prompt(role: str = "developer", loop: int = 1, attempt: int = 1) -> str:
    return (f"<!-- hoh:role={role} loop={loop} attempt={attempt} -->\nCandidate id: loop-0001-abcdef012345\n"
            "Evidence dir: /abs/evidence dir\n\nDo the work.")


def chat_body(text: str, results: int = 0, tools: list | None = None, stream: bool = True) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "sys"},
                                  {"role": "user", "content": [{"type": "text", "text": text}]}]
    for i in range(results):
        msgs += [{"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function",
                  "function": {"name": "bash", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": f"c{i}", "content": "ok"}]
    return {"model": "mock-model", "messages": msgs, "stream": stream,
            "stream_options": {"include_usage": True}, "tools": PI_TOOLS if tools is None else tools}


def responses_body(text: str, results: int = 0, tools: list | None = None, stream: bool = True) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sys"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context/>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}]
    for i in range(results):
        items += [{"type": "function_call", "call_id": f"c{i}", "name": "exec_command", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": f"c{i}", "output": "Process exited with code 0"}]
    return {"model": "gpt-5.5", "input": items, "stream": stream, "tools": CODEX_TOOLS if tools is None else tools}


def messages_body(text: str, results: int = 0, tools: list | None = None, cwd: str = "/work/project",
                  stream: bool = True) -> dict[str, Any]:
    """A request shaped like Claude Code's: reminders and the prompt in the first user message."""
    first = [{"type": "text", "text": f"<system-reminder>\n# Environment\n - Primary working directory: {cwd}\n"
                                      " - Is a git repository: false\n</system-reminder>"},
             {"type": "text", "text": text}]
    msgs: list[dict[str, Any]] = [{"role": "user", "content": first}]
    for i in range(results):
        msgs += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"}]}]
    return {"model": "claude-sonnet-4-5", "messages": msgs, "system": [{"type": "text", "text": "sys"}],
            "max_tokens": 32000, "stream": stream, "tools": CLAUDE_TOOLS if tools is None else tools}


def messages_answer(m: MockLLM, body: dict[str, Any]) -> dict[str, Any]:
    """Reassemble a streamed Messages answer into {events, block, text, input, stop, usage}."""
    status, headers, raw = request(m, "POST", "/v1/messages?beta=true", body)
    assert status == 200 and headers["content-type"] == "text/event-stream"
    evs = events(raw)
    block = next(e["content_block"] for e in evs if e["type"] == "content_block_start")
    deltas = [e["delta"] for e in evs if e["type"] == "content_block_delta"]
    delta = next(e for e in evs if e["type"] == "message_delta")
    return {"events": [e["type"] for e in evs], "block": block,
            "text": "".join(d.get("text", "") for d in deltas),
            "input": json.loads("".join(d.get("partial_json", "") for d in deltas) or "{}"),
            "stop": delta["delta"]["stop_reason"],
            "usage": {**evs[0]["message"]["usage"], "output_tokens": delta["usage"]["output_tokens"]}}


def chat_answer(m: MockLLM, body: dict[str, Any]) -> dict[str, Any]:
    """Reassemble a streamed chat answer into {text, tool, arguments, finish, usage}."""
    status, _, raw = request(m, "POST", "/v1/chat/completions", body)
    assert status == 200
    evs = events(raw)
    assert evs[-1] == "[DONE]"
    out: dict[str, Any] = {"text": "", "tool": None, "arguments": "", "usage": None}
    for e in evs[:-1]:
        out["usage"] = e.get("usage") or out["usage"]
        for c in e["choices"]:
            d = c["delta"]
            out["text"] += d.get("content") or ""
            for tc in d.get("tool_calls", []):
                out["tool"] = tc.get("function", {}).get("name") or out["tool"]
                out["arguments"] += tc["function"].get("arguments", "")
            out["finish"] = c["finish_reason"] or out.get("finish")
    return out


def responses_answer(m: MockLLM, body: dict[str, Any]) -> dict[str, Any]:
    status, headers, raw = request(m, "POST", "/v1/responses", body)
    assert status == 200 and headers["content-type"] == "text/event-stream"
    evs = events(raw)
    assert evs[-1]["type"] == "response.completed"
    return [e for e in evs if e["type"] == "response.output_item.done"][0]["item"] | {"_events": evs}


@pytest.fixture
def mock(tmp_path: Path):
    with MockLLM(script=SCRIPT, log_path=tmp_path / "requests.jsonl") as m:
        yield m


# -- endpoints and wire shapes ---------------------------------------------------------------------
def test_routes(mock: MockLLM) -> None:
    assert mock.base_url == f"http://127.0.0.1:{mock.port}/v1"
    status, _, raw = request(mock, "GET", "/v1/models")
    assert status == 200 and "mock-model" in [d["id"] for d in json.loads(raw)["data"]]
    assert request(mock, "GET", "/v1/nothing")[0] == 404
    assert request(mock, "POST", "/v1/responses", b"{not json")[0] == 400
    assert mock.requests()[0]["answer"]["status"] == 400  # logged too


def test_title_request_has_no_tools(mock: MockLLM) -> None:
    body = chat_body(prompt(), tools=[])
    del body["tools"]
    assert chat_answer(mock, body)["text"] == "Mock title"
    assert mock.requests()[-1]["match"]["source"] == "title"


def test_responses_full_form_with_usage(mock: MockLLM) -> None:
    item = responses_answer(mock, responses_body(prompt(), results=2))
    names = [e["type"] for e in item["_events"]]
    assert names[:2] == ["response.created", "response.output_item.added"]
    assert "response.output_text.delta" in names and names[-2:] == ["response.output_item.done", "response.completed"]
    usage = item["_events"][-1]["response"]["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    deltas = "".join(e["delta"] for e in item["_events"] if e["type"] == "response.output_text.delta")
    assert deltas == item["content"][0]["text"]
    raw = request(mock, "POST", "/v1/responses", responses_body(prompt()))[2].decode()
    assert "event: response.completed\n" in raw


def test_chat_full_form_with_usage_chunk(mock: MockLLM) -> None:
    ans = chat_answer(mock, chat_body(prompt()))
    assert ans["finish"] == "tool_calls" and ans["usage"]["prompt_tokens"] > 0
    assert json.loads(ans["arguments"]) == {"path": "calc.py", "content": "print(3)\n"}


def test_minimal_sse(mock: MockLLM) -> None:
    mock.control(minimal_sse="bare")
    raw = request(mock, "POST", "/v1/responses", responses_body(prompt()))[2].decode()
    assert "event:" not in raw and "usage" not in raw
    assert [e["type"] for e in events(raw)] == ["response.output_item.done", "response.completed"]
    evs = events(request(mock, "POST", "/v1/chat/completions", chat_body(prompt()))[2])
    assert all(set(e) == {"choices"} for e in evs[:-1]) and evs[-1] == "[DONE]"


def test_messages_full_form_with_usage(mock: MockLLM) -> None:
    # The first scripted step of (developer, 1) is a write: Claude Code's Write must read the file first.
    read = messages_answer(mock, messages_body(prompt()))
    names = read["events"]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert set(names[3:-3]) == {"content_block_delta"} and names[-3:] == ["content_block_stop", "message_delta",
                                                                          "message_stop"]
    assert read["block"]["type"] == "tool_use" and read["block"]["name"] == "Read" and read["stop"] == "tool_use"
    assert read["input"] == {"file_path": "/work/project/calc.py"}
    assert read["usage"]["input_tokens"] > 0 and read["usage"]["output_tokens"] > 0
    write = messages_answer(mock, messages_body(prompt(), results=1))
    assert write["block"]["name"] == "Write"
    assert write["input"] == {"file_path": "/work/project/calc.py", "content": "print(3)\n"}  # absolute
    shell = messages_answer(mock, messages_body(prompt(), results=2))
    assert shell["block"]["name"] == "Bash" and shell["input"]["command"] == "python calc.py > out.txt"
    final = messages_answer(mock, messages_body(prompt(), results=3))
    assert final["block"] == {"type": "text", "text": ""} and final["stop"] == "end_turn"
    assert json.loads(final["text"])["candidate"] == "loop-0001-abcdef012345"
    assert [r["match"]["step"] for r in mock.requests()] == [0, 1, 2, 3]
    assert mock.requests()[0]["path"] == "/v1/messages?beta=true"


def test_messages_minimal_and_non_streamed(mock: MockLLM) -> None:
    mock.control(minimal_sse=True)
    assert "ping" not in messages_answer(mock, messages_body(prompt()))["events"]
    status, _, raw = request(mock, "POST", "/v1/messages", messages_body(prompt(), results=3, stream=False))
    body = json.loads(raw)
    assert status == 200 and body["type"] == "message" and body["stop_reason"] == "end_turn"
    assert json.loads(body["content"][0]["text"])["status"] == "done" and body["usage"]["input_tokens"] > 0


def test_messages_errors_are_anthropic_shaped_with_retry_after(mock: MockLLM) -> None:
    mock.control(fail_mode="429", fail_count=1, retry_after_ms=1500)
    status, headers, raw = request(mock, "POST", "/v1/messages", messages_body(prompt()))
    assert status == 429 and headers["retry-after"] == "2" and headers["retry-after-ms"] == "1500"
    assert json.loads(raw) == {"type": "error",
                               "error": {"type": "rate_limit_error", "message": "mock injected HTTP 429"}}
    assert messages_answer(mock, messages_body(prompt()))["block"]["name"] == "Read"


def test_non_streamed_answers(mock: MockLLM) -> None:
    status, _, raw = request(mock, "POST", "/v1/chat/completions", chat_body(prompt(), results=2, stream=False))
    body = json.loads(raw)
    assert status == 200 and body["object"] == "chat.completion"
    assert json.loads(body["choices"][0]["message"]["content"])["status"] == "done"
    body = json.loads(request(mock, "POST", "/v1/responses", responses_body(prompt(), stream=False))[2])
    assert body["output"][0]["type"] == "function_call" and body["usage"]["total_tokens"] > 0


# -- the stateless decision --------------------------------------------------------------------------
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_step_selected_by_tool_result_count(mock: MockLLM, api: str) -> None:
    def answer(n: int) -> dict[str, Any]:
        if api == "chat":
            a = chat_answer(mock, chat_body(prompt(), results=n))
            return {"tool": a["tool"], "args": a["arguments"], "text": a["text"]}
        item = responses_answer(mock, responses_body(prompt(), results=n))
        return {"tool": item.get("name"), "args": item.get("arguments"),
                "text": item["content"][0]["text"] if item["type"] == "message" else ""}

    first, second, third, extra = answer(0), answer(1), answer(2), answer(5)
    assert first["tool"] == ("write" if api == "chat" else "exec_command")
    assert second["tool"] == ("bash" if api == "chat" else "exec_command")
    assert "python calc.py > out.txt" in second["args"]
    final = json.loads(third["text"])
    assert final == {"status": "done", "candidate": "loop-0001-abcdef012345", "evidence": "/abs/evidence dir"}
    assert extra["text"] == third["text"]
    assert [r["match"]["step"] for r in mock.requests()] == [0, 1, 2, 5]
    assert answer(1) == second  # a retried request gets the same answer, ids included


def test_marker_lookup_and_fallbacks(mock: MockLLM) -> None:
    assert chat_answer(mock, chat_body(prompt(attempt=2)))["text"] == "attempt two"
    assert chat_answer(mock, chat_body(prompt(attempt=3)))["tool"] == "write"  # falls back to (role, loop)
    assert chat_answer(mock, chat_body(prompt("qa", loop=7)))["text"] == "qa any loop 7"
    default = chat_answer(mock, chat_body(prompt("planner")))
    assert json.loads(default["arguments"]) == {"path": "hello.txt", "content": "hi"}
    assert chat_answer(mock, chat_body("no marker", results=1))["text"] == '{"status":"done","files":["hello.txt"]}'
    assert [r["match"]["source"] for r in mock.requests()] == ["script", "script", "script", "default", "default"]
    assert mock.requests()[0]["match"] == {"source": "script", "role": "developer", "loop": 1, "attempt": 2, "step": 0}


def test_last_marker_wins_and_steps_count_after_it(mock: MockLLM) -> None:
    """A resumed session re-asked with attempt=2 follows the attempt-2 entry from its step 0."""
    body = chat_body(prompt(attempt=1), results=2)
    body["messages"].append({"role": "user", "content": prompt(attempt=2)})
    assert chat_answer(mock, body)["text"] == "attempt two"
    assert mock.requests()[-1]["match"]["step"] == 0


def test_final_text_override_keeps_placeholders(mock: MockLLM) -> None:
    mock.control(final_text="id={{candidate_id}} {{unknown}}")
    assert chat_answer(mock, chat_body(prompt(), results=2))["text"] == "id=loop-0001-abcdef012345 {{unknown}}"


# -- tool-call arguments from advertised schemas ------------------------------------------------------
@pytest.mark.parametrize("tools,api,tool", [
    (CODEX_TOOLS, "responses", "exec_command"),  # Codex has no write tool
    (OPENCODE_TOOLS, "chat", "bash"), (PI_TOOLS, "chat", "bash"),  # with tool_pref=shell
    ([fn("shell_command", {"command": STR}, ["command"])], "chat", "shell_command"),
    ([fn("shell", {"command": {"type": "array", "items": STR}}, ["command"])], "chat", "shell"),
    ([fn("bash", {"command": STR, "description": STR}, ["command", "description"])], "chat", "bash"),
])
def test_write_via_shell_round_trips(tmp_path: Path, tools: list, api: str, tool: str) -> None:
    script = {"developer": {"1": [{"write": {"path": "sub/a b.txt", "content": AWKWARD}}, {"final": "x"}]}}
    with MockLLM(script=script, tool_pref="shell") as m:
        if api == "chat":
            ans = chat_answer(m, chat_body(prompt(), tools=tools))
            name, args = ans["tool"], json.loads(ans["arguments"])
        else:
            item = responses_answer(m, responses_body(prompt(), tools=tools))
            name, args = item["name"], json.loads(item["arguments"])
    assert name == tool
    if tool == "shell":
        argv = args["command"]
    else:
        argv = ["bash", "-c", args["cmd"] if tool == "exec_command" else args["command"]]
    subprocess.run(argv, cwd=tmp_path, check=True, timeout=10)
    assert (tmp_path / "sub/a b.txt").read_bytes() == AWKWARD.encode()
    schema = next(t.get("function", t) for t in tools if t.get("function", t).get("name") == tool)
    assert set(schema["parameters"].get("required", [])) <= set(args)  # unknown required strings get a filler


@pytest.mark.parametrize("tools,key", [(OPENCODE_TOOLS, "filePath"), (PI_TOOLS, "path")])
def test_write_tool_preferred_with_its_path_key(tmp_path: Path, tools: list, key: str) -> None:
    script = {"developer": {"1": [{"write": {"path": "f.txt", "content": AWKWARD}}, {"final": "x"}]}}
    with MockLLM(script=script) as m:
        ans = chat_answer(m, chat_body(prompt(), tools=tools))
    assert ans["tool"] == "write" and json.loads(ans["arguments"]) == {key: "f.txt", "content": AWKWARD}
    subprocess.run(["bash", "-c", write_file_command("empty.txt", "")], cwd=tmp_path, check=True)
    assert (tmp_path / "empty.txt").read_bytes() == b""


def test_missing_tool_gives_an_explanatory_text(mock: MockLLM) -> None:
    ans = chat_answer(mock, chat_body(prompt(), tools=PI_READONLY))
    assert ans["text"].startswith("mock-llm error at step 0") and "no write or shell tool" in ans["text"]
    assert mock.requests()[-1]["match"]["source"] == "error"


def test_raw_calls_including_custom_tools() -> None:
    script = {"developer": {"1": [{"call": {"name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"}},
                                  {"call": {"name": "read", "arguments": {"path": "x"}}}, {"final": "x"}]}}
    with MockLLM(script=script) as m:
        item = responses_answer(m, responses_body(prompt()))
        assert item["type"] == "custom_tool_call" and item["input"].startswith("*** Begin Patch")
        body = responses_body(prompt())
        body["input"].append({"type": "custom_tool_call_output", "call_id": "p", "output": "ok"})
        assert "not advertised" in responses_answer(m, body)["content"][0]["text"]
        ans = chat_answer(m, chat_body(prompt(), results=1))
        assert ans["tool"] == "read" and json.loads(ans["arguments"]) == {"path": "x"}


def test_script_validation(tmp_path: Path) -> None:
    for bad in ({"developer": {"1": []}}, {"developer": {"1": [{"final": "x"}, {"shell": "ls"}]}},
                {"developer": {"x": [{"final": "x"}]}}, {"entries": [{"role": "qa", "steps": [{"nope": 1}]}]},
                {"developer": {"1": [{"write": {"path": "a"}}]}}):
        with pytest.raises(ScriptError):
            Script.load(bad)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SCRIPT))
    assert len(Script.load(path).entries) == 3
    with pytest.raises(ValueError, match="unknown setting"):
        Settings().update(fail_mod="500")


# -- failure injection ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mode,status,kind", [("500", 500, "server_error"), ("429", 429, "rate_limit_exceeded"),
                                              ("400", 400, "invalid_request_error")])
def test_http_errors_then_recovery(mock: MockLLM, mode: str, status: int, kind: str) -> None:
    mock.control(fail_mode=mode, fail_count=1, retry_after_ms=50)
    got, headers, raw = request(mock, "POST", "/v1/chat/completions", chat_body(prompt()))
    assert got == status and json.loads(raw)["error"]["type"] == kind and headers["retry-after-ms"] == "50"
    assert chat_answer(mock, chat_body(prompt()))["tool"] == "write"
    assert [r["answer"]["status"] for r in mock.requests()] == [status, 200]
    assert mock.state()["fail_count"] == 0


def test_fail_forever_by_default(mock: MockLLM) -> None:
    mock.control(fail_mode="500")
    assert [request(mock, "POST", "/v1/responses", responses_body(prompt()))[0] for _ in range(3)] == [500] * 3
    assert request(mock, "GET", "/v1/models")[0] == 200  # only model endpoints fail


def test_close_and_midstream_are_transport_errors(mock: MockLLM) -> None:
    mock.control(fail_mode="close", fail_count=1)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        request(mock, "POST", "/v1/responses", responses_body(prompt()))
    mock.control(fail_mode="midstream", fail_count=2)
    for path, body in (("/v1/responses", responses_body(prompt())), ("/v1/chat/completions", chat_body(prompt()))):
        with pytest.raises((http.client.IncompleteRead, ConnectionError)):
            request(mock, "POST", path, body)
    assert responses_answer(mock, responses_body(prompt()))["name"] == "exec_command"


def test_stall_sends_headers_then_goes_silent(mock: MockLLM) -> None:
    def start() -> tuple[http.client.HTTPConnection, http.client.HTTPResponse, float]:
        conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=5)
        started = time.monotonic()
        conn.request("POST", "/v1/chat/completions", body=json.dumps(chat_body(prompt())))
        resp = conn.getresponse()
        assert resp.status == 200 and time.monotonic() - started < 0.3  # headers come at once
        return conn, resp, started

    mock.control(fail_mode="stall", fail_count=1, stall_seconds=0.4)
    conn, resp, started = start()
    assert events(resp.read())[-1] == "[DONE]" and time.monotonic() - started >= 0.4  # then the answer
    conn.close()
    mock.control(fail_mode="stall", stall_seconds=60)
    conn, resp, started = start()
    mock.stop()  # must not wait for the stall
    assert time.monotonic() - started < 3
    conn.close()


def test_stall_mid_message_sends_the_first_frames_then_goes_silent(mock: MockLLM) -> None:
    mock.control(fail_mode="stall", fail_count=1, stall_seconds=0.6, stall_after_frames=2)
    conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=5)
    started = time.monotonic()
    conn.request("POST", "/v1/messages", body=json.dumps(messages_body(prompt())))
    resp = conn.getresponse()
    first = resp.read1(65536).decode()
    assert "event: message_start" in first and "content_block_start" not in first
    assert time.monotonic() - started < 0.4
    rest = resp.read().decode()
    assert time.monotonic() - started >= 0.6 and "event: message_stop" in rest
    conn.close()


def test_control_and_state_endpoints(mock: MockLLM) -> None:
    status, _, raw = request(mock, "POST", "/__control", {"fail_mode": "429", "fail_count": 2,
                                                          "script": {"qa": {"*": [{"final": "swapped"}]}}})
    assert status == 200 and json.loads(raw)["fail_mode"] == "429"
    state = json.loads(request(mock, "GET", "/__state")[2])
    assert state["fail_count"] == 2 and state["script_entries"] == 1
    assert request(mock, "POST", "/__control", {"bogus": 1})[0] == 400
    assert request(mock, "POST", "/__control", {"fail_mode": "explode"})[0] == 400
    mock.control(fail_mode="none")
    assert chat_answer(mock, chat_body(prompt("qa")))["text"] == "swapped"


@pytest.mark.parametrize("path,kind", [("/v1/chat/completions", "invalid_api_key"),
                                       ("/v1/messages", "authentication_error")])
def test_require_key_refuses_a_request_without_a_key_and_takes_one_with(mock: MockLLM, path: str, kind: str) -> None:
    body = chat_body(prompt())
    assert request(mock, "POST", path, body)[0] == 200  # by default a key-less endpoint
    mock.control(require_key=True)
    status, _, raw = request(mock, "POST", path, body)
    error = json.loads(raw)["error"]
    assert status == 401 and error["type"] == kind and "no API key" in error["message"]
    for headers in ({"Authorization": f"Bearer {SECRET}"}, {"x-api-key": SECRET}):
        assert request(mock, "POST", path, body, headers)[0] == 200
    assert [r["answer"]["status"] for r in mock.requests()] == [200, 401, 200, 200]


# -- logging ---------------------------------------------------------------------------------------------
def test_log_redacts_credentials(mock: MockLLM, tmp_path: Path) -> None:
    body = chat_body(prompt() + f"\nthe key is {SECRET}")
    request(mock, "POST", "/v1/chat/completions", body, {"Authorization": f"Bearer {SECRET}", "api-key": SECRET})
    text = (tmp_path / "requests.jsonl").read_text()
    assert SECRET not in text and "sk-test" not in text
    entry = json.loads(text.splitlines()[0])
    assert entry["headers"]["authorization"] == f"<redacted len={len(SECRET) + 7}>"
    assert entry["headers"]["api-key"] == f"<redacted len={len(SECRET)}>"
    assert entry["path"] == "/v1/chat/completions" and entry["body"]["model"] == "mock-model"
    assert entry["answer"]["tool"] == "write" and entry["match"]["role"] == "developer"
    assert mock.requests() == [entry]


# -- the command line ------------------------------------------------------------------------------------
def test_cli_port_file_log_and_script(tmp_path: Path) -> None:
    port_file, log, script = tmp_path / "port", tmp_path / "log.jsonl", tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-m", "hoh.testing.mock_llm", "--port", "0", "--port-file",
                             str(port_file), "--log", str(log), "--script", str(script), "--retry-after-ms", "5"],
                            env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while not port_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        port = int(port_file.read_text())
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("POST", "/v1/chat/completions", body=json.dumps(chat_body(prompt(attempt=2), stream=False)))
        assert json.loads(conn.getresponse().read())["choices"][0]["message"]["content"] == "attempt two"
        conn.request("GET", "/__state")
        assert json.loads(conn.getresponse().read())["retry_after_ms"] == 5
        conn.close()
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
        proc.stderr.close()
    assert json.loads(log.read_text().splitlines()[0])["match"]["attempt"] == 2


# -- recorded streams of the real CLIs ----------------------------------------------------------------------
@pytest.mark.parametrize("cli", ["codex", "opencode", "pi", "claude"])
def test_recorded_streams_carry_the_scripted_final_message(cli: str) -> None:
    # The mock filled the candidate id from the prompt's fact line; the adapter's parser reads it back.
    from hoh.config import HarnessConfig
    from hoh.harness import registry
    from hoh.testing.mock_llm.record import EXPECTED_FINAL

    adapter = registry.create(HarnessConfig(name=cli))
    with open(STREAMS / cli / "success.jsonl") as fh:
        assert adapter.parse_events(fh).final_message == EXPECTED_FINAL
    for case in ("http500", "http400", "http429", "close"):
        with open(STREAMS / cli / f"{case}.jsonl") as fh:
            run = adapter.parse_events(fh)
        assert run.error and not run.final_message
