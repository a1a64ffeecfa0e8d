"""Role transcripts (`hoh.transcript`): every recorded stream of the four real CLIs and a scripted attempt read
into messages, tool calls with their inputs and outputs, and errors; a live attempt read while it is written;
and the garbage an agent could print in its stream, which never raises."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import DEMO, REPO, run_hoh

from hoh.harness.claude import ClaudeAdapter
from hoh.harness.codex import CodexAdapter
from hoh.harness.entries import MAX_LINE_BYTES, MAX_TEXT
from hoh.harness.opencode import OpenCodeAdapter
from hoh.harness.pi import PiAdapter
from hoh.harness.scripted import ScriptedAdapter
from hoh.transcript import EntryKind, TranscriptEntry, attempts_of, read_transcript

STREAMS = REPO / "tests" / "data" / "harness_streams"
ADAPTERS = {"codex": CodexAdapter, "opencode": OpenCodeAdapter, "pi": PiAdapter, "claude": ClaudeAdapter,
            "scripted": ScriptedAdapter}
FINAL = '{"status":"done","candidate_id":"loop-0001-abcdef012345","files":["calc.py","notes/awkward.txt"]}'
RUN = "python3 calc.py 1 + 2 > out.txt && wc -c < notes/awkward.txt > size.txt"

# What each recorded error stream must show: the error texts, in order.
ERRORS = {
    "codex/close": ["Reconnecting... 1/1 (stream disconnected before completion: error sending request)",
                    "stream disconnected before completion: error sending request"],
    "codex/http400": ["mock injected HTTP 400 (invalid_request_error)"],  # the API's error body, read
    "codex/http429": ["exceeded retry limit, last status: 429 Too Many Requests"],
    "codex/http500": ["Reconnecting... 1/1 (We’re currently experiencing high demand",
                      "We’re currently experiencing high demand"],
    "opencode/close": ["Cannot connect to API: The socket connection was closed unexpectedly"],
    "opencode/http400": ["HTTP 400: mock injected HTTP 400"],
    "opencode/http429": ["HTTP 429: mock injected HTTP 429"],
    "opencode/http500": ["HTTP 500: mock injected HTTP 500"],
    "pi/close": ["Connection error.", "retrying (attempt 1 of 1): Connection error.", "Connection error."],
    "pi/http400": ["400 mock injected HTTP 400"],
    "pi/http429": ["429 mock injected HTTP 429", "retrying (attempt 1 of 1): 429 mock injected HTTP 429",
                   "429 mock injected HTTP 429"],
    "pi/http500": ["500 mock injected HTTP 500", "retrying (attempt 1 of 1): 500 mock injected HTTP 500",
                   "500 mock injected HTTP 500"],
    "claude/close": ["API retry 1 of 1: unknown", "API Error: Connection dropped (ECONNRESET)"],
    "claude/http400": ["API Error: 400 mock injected HTTP 400"],
    "claude/http429": ["API retry 1 of 1: HTTP 429 rate_limit", "API Error: Request rejected (429)"],
    "claude/http500": ["API retry 1 of 1: HTTP 500 server_error", "API Error: 500 mock injected HTTP 500"],
    "claude/nokey": ["Not logged in · Please run /login"],
}


def entries_of(cli: str, case: str) -> list[TranscriptEntry]:
    return ADAPTERS[cli].transcript_entries((STREAMS / cli / f"{case}.jsonl").read_bytes())


def kinds(entries: list[TranscriptEntry]) -> list[str]:
    return [e.kind.value for e in entries]


def test_every_recorded_stream_is_covered_and_read_without_a_bad_line():
    recorded = {f"{p.parent.name}/{p.stem}" for p in STREAMS.glob("*/*.jsonl")}
    assert recorded == set(ERRORS) | {f"{cli}/success" for cli in ("codex", "opencode", "pi", "claude")} | {
        "claude/denied"}
    for name in sorted(recorded):
        cli, case = name.split("/")
        for entry in entries_of(cli, case):
            # Every line of a real CLI's stream is one hoh reads: no "line N ..." complaint.
            assert not entry.text.startswith("line "), (name, entry)


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_an_error_stream_shows_the_cli_s_errors_and_nothing_it_did_not_say(name):
    cli, case = name.split("/")
    entries = entries_of(cli, case)
    assert kinds(entries) == ["error"] * len(ERRORS[name]), [e.text for e in entries]
    for entry, expected in zip(entries, ERRORS[name]):
        assert entry.text.startswith(expected), (entry.text, expected)


def test_codex_success_shows_each_command_with_its_exit_code_and_the_answer():
    entries = entries_of("codex", "success")
    assert kinds(entries) == ["tool_call", "tool_result"] * 3 + ["message"]
    calls, results = entries[0:6:2], entries[1:6:2]
    assert [c.call_id for c in calls] == [r.call_id for r in results] == ["item_0", "item_1", "item_2"]
    assert calls[0].tool == "shell" and calls[0].text.endswith("| base64 -d > calc.py'")
    assert "mkdir -p notes" in calls[1].text
    assert calls[2].text == f"/bin/bash -lc '{RUN}'"
    assert all(r.text == "[exit code 0]" and not r.is_error for r in results)
    assert entries[-1].text == FINAL


def test_opencode_success_shows_the_written_files_the_command_and_its_output():
    entries = entries_of("opencode", "success")
    assert kinds(entries) == ["tool_call", "tool_result"] * 3 + ["message"]
    write = json.loads(entries[0].text)
    assert entries[0].tool == "write" and write["filePath"] == "calc.py" and write["content"].startswith("import sys")
    assert "ünïcode ✓" in json.loads(entries[2].text)["content"]
    assert entries[1].text == entries[3].text == "Wrote file successfully."
    assert (entries[4].tool, entries[4].text, entries[5].text) == ("bash", RUN, "(no output)")
    assert entries[4].call_id == entries[5].call_id == "call_8f5a5811736a"
    assert entries[0].at == "2026-11-30T07:49:24.759000Z"
    assert entries[-1].text == FINAL


def test_pi_success_reads_finished_messages_and_tools_not_every_delta():
    entries = entries_of("pi", "success")
    assert kinds(entries) == ["tool_call", "tool_result"] * 3 + ["message"]
    assert json.loads(entries[0].text) == {"path": "calc.py", "content": "import sys\n\na, op, b = sys.argv[1:4]\n"
                                           "print(float(a) + float(b) if op == \"+\" else float(a) - float(b))\n"}
    assert entries[1].text == "Successfully wrote 102 bytes to calc.py" and entries[1].call_id == entries[0].call_id
    assert entries[3].text == "Successfully wrote 137 bytes to notes/awkward.txt"
    assert (entries[4].tool, entries[4].text, entries[5].text) == ("bash", RUN, "(no output)")
    assert entries[-1].text == FINAL


def test_claude_success_shows_failed_reads_as_errors_and_the_writes():
    entries = entries_of("claude", "success")
    assert kinds(entries) == ["tool_call", "tool_result"] * 5 + ["message"]
    read, missing = entries[0], entries[1]
    assert read.tool == "Read" and json.loads(read.text) == {"file_path": "$LAB/runs/claude-success/work/calc.py"}
    assert missing.is_error and missing.tool == "Read" and missing.text.startswith("File does not exist.")
    assert json.loads(entries[2].text)["content"].startswith("import sys") and not entries[3].is_error
    assert (entries[8].tool, entries[8].text, entries[9].text) == ("Bash", RUN, "(Bash completed with no output)")
    assert entries[0].at == "2026-11-30T08:23:21.094Z"
    assert entries[-1].text == FINAL


def test_claude_denial_is_an_error_and_the_refused_call_s_result_failed():
    entries = entries_of("claude", "denied")
    assert kinds(entries) == ["tool_call", "error", "tool_result", "tool_call", "tool_result", "message"]
    assert entries[0].text == "echo hacked > calc.py"
    assert entries[1].text.startswith("Bash denied: Permission for this tool use was denied")
    assert entries[2].is_error and entries[2].call_id == entries[0].call_id
    assert (entries[3].text, entries[4].text, entries[4].is_error) == ("ls -a", ".\n..", False)
    assert entries[5].text == '{"status":"planned"}'


# ---- attempt directories -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    ws = tmp_path_factory.mktemp("transcript") / "ws"
    assert run_hoh("build", DEMO / "spec.md", "--loops", "1", "-w", ws, "-q").returncode == 0
    return ws


def loop_dir(ws: Path, loop: int = 1) -> Path:
    return ws / "state" / "loops" / f"{loop:04d}"


def test_a_scripted_attempt_is_its_prompt_tools_answer_and_recorded_usage(demo):
    attempt = loop_dir(demo) / "roles" / "developer" / "attempt-1"
    t = read_transcript(attempt)
    result = json.loads((attempt / "result.json").read_text())
    assert (t.role, t.loop, t.attempt, t.harness, t.outcome, t.ok, t.live) == ("developer", 1, 1, "scripted", "ok",
                                                                              True, False)
    assert kinds(t.entries) == ["prompt", "tool_call", "tool_result", "tool_call", "tool_result", "message"]
    assert t.entries[0].text == (attempt / "prompt.md").read_text() and t.entries[0].at.endswith("Z")
    assert (t.entries[1].tool, t.entries[1].text) == ("write", str(demo / "project" / "calc.py"))
    assert (t.entries[3].tool, t.entries[4].text) == ("run", "exit code 0")
    assert "python3 calc.py 2 + 3" in t.entries[3].text
    assert t.entries[-1].text == t.final_message == result["harness"]["final_message"]
    assert t.usage.to_json() == result["harness"]["usage"] and t.usage.input_tokens > 0
    assert t.errors == [] and t.session_id == "scripted-1-developer-1"


def test_attempts_of_lists_a_loop_in_run_order_with_interrupted_runs_first(demo, tmp_path):
    loop = shutil.copytree(loop_dir(demo), tmp_path / "0001")
    shutil.copytree(loop / "roles" / "developer", loop / "roles" / "developer.interrupted-1")
    (loop / "roles" / "planner" / "attempt-2").mkdir()
    (loop / "roles" / "planner" / "notes").mkdir()  # not an attempt
    (loop / "roles" / "intruder").mkdir()  # not a role
    refs = attempts_of(loop)
    assert [(r.role, r.attempt, r.interrupted, r.set_aside, r.loop) for r in refs] == [
        ("planner", 1, False, None, 1), ("planner", 2, False, None, 1), ("developer", 1, True, 1, 1),
        ("developer", 1, False, None, 1), ("qa", 1, False, None, 1)]
    assert refs[2].path == loop / "roles" / "developer.interrupted-1" / "attempt-1"
    finished = read_transcript(refs[2].path)  # it had ended before its role was cut off
    assert (finished.role, finished.interrupted, finished.live, finished.outcome) == ("developer", False, False, "ok")
    (refs[2].path / "result.json").unlink()
    cut = read_transcript(refs[2].path)
    assert (cut.interrupted, cut.live, cut.outcome, cut.ok) == (True, False, None, None)
    assert cut.entries[-1].text == "the attempt was cut off (hoh stopped or crashed) and set aside when the run resumed"
    assert cut.final_message == finished.final_message and cut.usage == finished.usage  # read from its stream
    assert attempts_of(tmp_path / "missing") == []


def fake_attempt(root: Path, role: str = "developer", attempt: int = 1, harness: str | None = None) -> Path:
    path = root / "state" / "loops" / "0003" / "roles" / role / f"attempt-{attempt}"
    path.mkdir(parents=True)
    (path / "prompt.md").write_text("do the work")
    inputs = {"schema_version": 1, "role": role, "loop": 3, "attempt": attempt}
    (path / "inputs.json").write_text(json.dumps({**inputs, "harness": harness} if harness else inputs))
    return path


@pytest.mark.parametrize("cli", ["codex", "opencode", "pi", "claude"])
def test_a_live_attempt_reads_what_is_written_so_far(cli, tmp_path):
    attempt = fake_attempt(tmp_path, harness=cli)
    lines = (STREAMS / cli / "success.jsonl").read_bytes().splitlines(keepends=True)
    half = len(lines) // 2
    # A half-written last line: still being written, so no complaint about it.
    (attempt / "events.jsonl").write_bytes(b"".join(lines[:half]) + lines[half][: len(lines[half]) // 2])
    live = read_transcript(attempt)
    assert live.live and live.outcome is None and live.ok is None and (live.harness, live.loop) == (cli, 3)
    assert live.entries[0].kind is EntryKind.PROMPT and live.entries[0].text == "do the work"
    assert EntryKind.TOOL_CALL in {e.kind for e in live.entries}
    assert not [e for e in live.entries if e.kind is EntryKind.ERROR]
    full = ADAPTERS[cli].transcript_entries(b"".join(lines))
    assert live.entries[1:] == full[: len(live.entries) - 1]  # a prefix of the finished transcript
    (attempt / "events.jsonl").write_bytes(b"".join(lines))
    done = read_transcript(attempt)
    assert done.entries[1:] == full and done.final_message == FINAL and done.usage.input_tokens > 0
    assert done.session_id


def test_a_finished_stream_cut_mid_line_says_so(tmp_path):
    attempt = fake_attempt(tmp_path, harness="codex")
    (attempt / "events.jsonl").write_bytes((STREAMS / "codex" / "success.jsonl").read_bytes()[:-40])
    (attempt / "result.json").write_text(json.dumps({"schema_version": 1, "ok": False, "harness": {
        "outcome": "crashed", "final_message": None, "usage": {"input_tokens": 5}}, "errors": ["harness outcome crashed"]}))
    t = read_transcript(attempt)
    assert t.entries[-2].kind is EntryKind.ERROR and t.entries[-2].text.startswith("line 10 is not JSON: {")
    assert (t.outcome, t.ok, t.usage.input_tokens) == ("crashed", False, 5)


def test_rejected_reply_is_a_reask_naming_the_errors_and_the_next_attempt(tmp_path):
    first = fake_attempt(tmp_path, "qa", 1, "scripted")
    (first / "events.jsonl").write_text('{"type": "message", "text": "not json"}\n')
    (first / "result.json").write_text(json.dumps({"schema_version": 1, "ok": False, "harness": {"outcome": "ok"},
                                                   "errors": ["the reply is not a JSON object", {"odd": 1}]}))
    t = read_transcript(first)
    assert t.errors == ["the reply is not a JSON object", '{"odd": 1}'] and not t.rejected_next
    assert t.entries[-1].kind is EntryKind.REASK and "no re-ask followed" in t.entries[-1].text
    fake_attempt(tmp_path, "qa", 2, "scripted")
    again = read_transcript(first)
    assert again.rejected_next and again.entries[-1].text == (
        "hoh rejected this reply (hoh re-asked in attempt 2):\n- the reply is not a JSON object\n- {\"odd\": 1}")


def test_the_harness_comes_from_the_record_then_the_config_then_the_stream(tmp_path):
    attempt = fake_attempt(tmp_path)
    shutil.copy(STREAMS / "pi" / "success.jsonl", attempt / "events.jsonl")
    assert read_transcript(attempt).harness == "pi"  # what the stream's first event looks like
    (tmp_path / "hoh.yaml").write_text("harness:\n  name: codex\nroles:\n  developer:\n    harness: pi\n")
    assert read_transcript(attempt).harness == "pi"  # the role's own harness
    (tmp_path / "hoh.yaml").write_text("harness:\n  name: opencode\n")
    assert read_transcript(attempt).harness == "opencode"
    (attempt / "inputs.json").write_text(json.dumps({"harness": "pi"}))
    t = read_transcript(attempt)
    assert t.harness == "pi" and t.final_message == FINAL  # the record wins
    for sniffed in ("codex", "opencode", "claude"):
        other = fake_attempt(tmp_path / sniffed)
        shutil.copy(STREAMS / sniffed / "success.jsonl", other / "events.jsonl")
        assert read_transcript(other).harness == sniffed


def test_a_demo_workspace_records_the_harness_in_inputs_json(demo):
    inputs = json.loads((loop_dir(demo) / "roles" / "qa" / "attempt-1" / "inputs.json").read_text())
    assert (inputs["harness"], inputs["model"]) == ("scripted", None)


# ---- hostile streams -----------------------------------------------------------------------------------------
WRONG_SHAPES = [
    [1, 2], "a string", None, 7, {"type": None}, {"type": ["item.completed"]},
    {"type": "item.completed", "item": "not an object"}, {"type": "item.started", "item": {"type": "command_execution",
                                                                                           "command": {"x": 1}}},
    {"type": "turn.failed", "error": "plain"}, {"type": "tool_use", "part": {"tool": 5, "state": []}},
    {"type": "tool_use", "part": {"tool": "bash", "state": {"status": "completed", "input": {"command": ["rm"]}}}},
    {"type": "error", "error": {"data": "nope"}}, {"type": "text", "part": "x"},
    {"type": "message_end", "message": {"role": "assistant", "content": "not a list", "stopReason": "error"}},
    {"type": "message_end", "message": {"role": "assistant", "content": [1, {"type": "toolCall", "arguments": 3}]}},
    {"type": "tool_execution_end", "result": [{"text": 1}], "toolName": {"a": 1}},
    {"type": "assistant", "message": {"content": [{"type": "tool_use", "input": "str", "id": [1]}]}},
    {"type": "user", "message": {"content": [{"type": "tool_result", "content": {"deep": [1]}}]}},
    {"type": "assistant", "message": "no"}, {"type": "result", "is_error": True, "result": {"x": 1}},
    {"type": "system", "subtype": "api_retry", "error_status": {"x": 1}}, {"type": "tool", "exit_code": True},
    {"type": "tool", "name": ["x"], "id": 3}, {"type": "message", "text": 42}, {"type": "usage", "input_tokens": "x"},
    {"type": "message", "text": "\ud800 lone surrogate"},
]


def hostile_stream() -> bytes:
    lines = [json.dumps(shape).encode() for shape in WRONG_SHAPES]
    lines += [b"\x00\xff\xfe binary \x89PNG\r\x1a", os.urandom(4096).replace(b"\n", b" "), b"not json at all",
              b"[" * 100_000, b'{"type": "message", "text": "' + b"A" * (MAX_TEXT * 3) + b'"}',
              b"x" * (MAX_LINE_BYTES + 1), b"{\"type\": \"message\", \"text\": \"after the flood\"}"]
    return b"\n".join(lines) + b"\n"


@pytest.mark.parametrize("cli", sorted(ADAPTERS))
def test_hostile_streams_never_raise_and_every_text_is_capped(cli):
    entries = ADAPTERS[cli].transcript_entries(hostile_stream())
    assert all(len(e.text) <= MAX_TEXT + 100 for e in entries)
    for entry in entries:
        entry.text.encode("utf-8")  # no lone surrogate left to break a file or a page
    errors = [e.text for e in entries if e.kind is EntryKind.ERROR]
    assert any(t.startswith(f"line {len(WRONG_SHAPES) + 3} is not JSON: not json at all") for t in errors)
    assert any(t.startswith("line 1 is a JSON list, not an event object") for t in errors)
    assert any(f"is {MAX_LINE_BYTES + 1} bytes, longer than hoh reads" in t for t in errors)
    assert any(t.startswith(f"line {len(WRONG_SHAPES) + 4} is not JSON") for t in errors)  # 100 000 brackets
    if cli == "scripted":  # the lines after the flood are still read, a huge text cut and said so
        messages = [e.text for e in entries if e.kind is EntryKind.MESSAGE]
        assert messages[-1] == "after the flood"
        assert messages[-2].startswith("AAAA") and messages[-2].endswith(f"[… {MAX_TEXT * 2} more characters cut by hoh]")
        assert "? lone surrogate" in messages


def test_a_hostile_attempt_dir_reads_without_raising(tmp_path):
    attempt = fake_attempt(tmp_path, harness="package.module:Missing")  # a third party's adapter not installed
    (attempt / "events.jsonl").write_bytes(hostile_stream())
    (attempt / "result.json").write_bytes(b"\x00{ not json")
    (attempt / "prompt.md").unlink()
    (attempt / "prompt.md").symlink_to("/etc/passwd")  # hoh never wrote that: not followed
    t = read_transcript(attempt)
    assert t.entries[0].text == "[no prompt.md]" and t.harness == "package.module:Missing"
    assert "result.json is not a JSON object hoh can read" in [e.text for e in t.entries]
    assert t.live and len(t.entries) > len(WRONG_SHAPES)
    (attempt / "inputs.json").write_text('{"harness": ["not", "a", "name"], "loop": "x"}')
    assert read_transcript(attempt).loop == 3  # the directory's own place in the tree
    empty = fake_attempt(tmp_path / "empty", harness="codex")
    assert [e.text for e in read_transcript(empty).entries] == ["do the work", "no events.jsonl yet"]


THINKING = {
    "codex": [{"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "plan it"}},
              {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": "done"}}],
    "opencode": [{"type": "reasoning", "timestamp": 1796024964506, "part": {"type": "reasoning", "text": "plan it"}},
                 {"type": "text", "timestamp": 1796024964507, "part": {"type": "text", "text": "done"}}],
    "pi": [{"type": "message_end", "message": {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "plan it"}, {"type": "text", "text": "done"}], "stopReason": "stop"}}],
    "claude": [{"type": "assistant", "message": {"model": "claude-sonnet-4-5", "content": [
        {"type": "thinking", "thinking": "plan it"}, {"type": "text", "text": "done"}]}}],
}


@pytest.mark.parametrize("cli", sorted(THINKING))
def test_thinking_is_read_from_each_cli_s_own_block(cli):
    stream = "".join(json.dumps(event) + "\n" for event in THINKING[cli])
    entries = ADAPTERS[cli].transcript_entries(stream)
    assert [(e.kind, e.text) for e in entries] == [(EntryKind.THINKING, "plan it"), (EntryKind.MESSAGE, "done")]


def test_a_run_set_aside_after_a_transient_failure_comes_first_and_says_so(tmp_path):
    attempt = fake_attempt(tmp_path, harness="codex")
    shutil.copy(STREAMS / "codex" / "http429.jsonl", attempt / "events.transient-1.jsonl")
    shutil.copy(STREAMS / "codex" / "success.jsonl", attempt / "events.jsonl")
    t = read_transcript(attempt)
    assert [e.text for e in t.entries[:3]] == [
        "do the work", "exceeded retry limit, last status: 429 Too Many Requests",
        "this run ended in a transient failure (rate limit, network); hoh ran the attempt again"]
    assert t.entries[3:] == ADAPTERS["codex"].transcript_entries((STREAMS / "codex" / "success.jsonl").read_bytes())


def test_a_live_attempt_masks_the_secrets_hoh_would_scrub_at_its_end(tmp_path, monkeypatch):
    monkeypatch.setenv("HOH_TRANSCRIPT_KEY", "sk-live-secret-1234")
    (tmp_path / "hoh.yaml").write_text("harness:\n  name: codex\n  base_url: http://127.0.0.1:9/v1\n"
                                       "  api_key_env: HOH_TRANSCRIPT_KEY\n")
    attempt = fake_attempt(tmp_path, harness="codex")
    leak = {"type": "item.completed", "item": {"id": "item_0", "type": "command_execution", "command": "env",
                                               "aggregated_output": "KEY=sk-live-secret-1234\n", "exit_code": 0}}
    said = {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": "sk-live-secret-1234"}}
    (attempt / "events.jsonl").write_text(json.dumps(leak) + "\n" + json.dumps(said) + "\n")
    live = read_transcript(attempt)
    assert [e.text for e in live.entries[1:]] == ["env", "KEY=<redacted>\n[exit code 0]", "<redacted>"]
    assert live.final_message == "<redacted>"
    assert "sk-live-secret-1234" not in json.dumps(live.to_json())
