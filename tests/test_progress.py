"""Live progress of build and resume: the events tail against the recorded streams and hostile ones, the live
line's own role clock and figures, one line per attempt in a log, `--progress json`, and the `--json` report."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from conftest import DEMO, run_hoh
from rich.console import Console

from hoh.cli import progress as progress_mod
from hoh.cli import tail as tail_mod
from hoh.cli.options import ProgressMode
from hoh.cli.progress import LiveProgress
from hoh.cli.tail import LINE_LIMIT, EventsTail
from hoh.config import HarnessConfig
from hoh.harness import registry
from hoh.usage import Usage

STREAMS = Path(__file__).parent / "data" / "harness_streams"
CLIS = ("claude", "codex", "opencode", "pi")


def adapter(cli: str):
    return registry.create(HarnessConfig(name=cli, model="m"))


@pytest.mark.parametrize("cli", CLIS)
def test_the_tail_of_a_growing_stream_says_what_the_whole_stream_says(cli, tmp_path):
    """Appended in odd-sized pieces (lines cut anywhere), the live figures end equal to one parse of the
    whole recorded stream: running totals (Claude Code's result) are not counted twice."""
    data = (STREAMS / cli / "success.jsonl").read_bytes()
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"")
    harness = adapter(cli)
    tail = EventsTail(events, harness.parse_events)
    seen = []
    for start in range(0, len(data), 997):
        with open(events, "ab") as fh:
            fh.write(data[start:start + 997])
        seen.append(tail.poll())
    whole = harness.parse_events(data.decode().splitlines())
    assert seen[-1].usage == whole.usage and seen[-1].tool_calls == whole.tool_calls == 3 + (cli == "claude") * 2
    assert seen[-1].last_tool and "calc.py" in seen[-1].last_tool
    assert [s.usage.total_tokens for s in seen] == sorted(s.usage.total_tokens for s in seen)  # never goes back


def test_the_tail_reads_only_what_was_appended(tmp_path, monkeypatch):
    events = tmp_path / "events.jsonl"
    events.write_text('{"type": "tool", "name": "run", "command": "make"}\n')
    reads = []
    real_fdopen = os.fdopen

    class Counting:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def seek(self, offset):
            return self.fh.seek(offset)

        def read(self, size):
            data = self.fh.read(size)
            reads.append(len(data))
            return data
    monkeypatch.setattr(tail_mod.os, "fdopen", lambda fd, mode: Counting(real_fdopen(fd, mode)))
    tail = EventsTail(events, adapter("scripted").parse_events)
    assert tail.poll().tool_calls == 1
    assert tail.poll().tool_calls == 1
    with open(events, "a") as fh:
        fh.write('{"type": "usage", "input_tokens": 7, "output_tokens": 3}\n')
    figures = tail.poll()
    assert (figures.tool_calls, figures.usage.total_tokens, figures.last_tool) == (1, 10, "run make")
    assert reads == [51, 57]  # the first line once, then only the appended one; an unchanged file is not read


def test_a_hostile_stream_never_breaks_progress(tmp_path):
    """Garbage, a line that makes the adapter's parser raise, an endless line, terminal escapes in a tool's
    name, and the file swapped for a link or a FIFO: the tail keeps its last figures, shows nothing raw."""
    events = tmp_path / "events.jsonl"
    tail = EventsTail(events, adapter("codex").parse_events)
    assert tail.poll().tool_calls == 0  # not there yet
    good = '{"type": "item.completed", "item": {"type": "command_execution", "command": "ls\\u001b[2J\\rrm -rf /"}}\n'
    events.write_text("\x00\xff not json\n" + good)
    figures = tail.poll()
    assert figures.tool_calls == 1 and figures.last_tool == "shell ls [2J rm -rf /"
    with open(events, "a") as fh:
        fh.write('{"type": "item.completed", "item": "a string where a dict goes"}\n')  # codex's parser raises
    assert tail.poll() == figures
    with open(events, "a") as fh:
        fh.write("x" * (LINE_LIMIT + 10))
    assert tail.poll() == figures and tail.partial == b""  # an endless line is not buffered
    with open(events, "a") as fh:
        fh.write("y" * 100 + "\n" + good)  # its end is skipped, the next line counts
    assert tail.poll().tool_calls == 2

    target = tmp_path / "elsewhere.jsonl"
    target.write_text(good * 5)
    events.unlink()
    events.symlink_to(target)
    assert EventsTail(events, adapter("codex").parse_events).poll().tool_calls == 0  # a link is not followed
    events.unlink()
    os.mkfifo(events)
    assert EventsTail(events, adapter("codex").parse_events).poll().tool_calls == 0  # a FIFO is not waited on


def test_a_rerun_keeps_what_the_first_run_of_the_attempt_said(tmp_path):
    """A transient failure's events are renamed aside and the rerun writes a new file; both runs' usage count."""
    events = tmp_path / "events.jsonl"
    events.write_text('{"type": "usage", "input_tokens": 5, "output_tokens": 5}\n')
    tail = EventsTail(events, adapter("scripted").parse_events)
    assert tail.poll().usage.total_tokens == 10
    events.rename(tmp_path / "events.transient-1.jsonl")
    events.write_text('{"type": "usage", "input_tokens": 1, "output_tokens": 2}\n')
    assert tail.poll().usage.total_tokens == 13


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_live_line_shows_the_roles_own_clock_tokens_cost_and_last_tool(tmp_path, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(progress_mod.time, "monotonic", clock)
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    events = tmp_path / "events.jsonl"
    harness = adapter("scripted")
    progress = LiveProgress(console, ProgressMode.LIVE)
    progress("loop", loop=2, target=5)
    clock.now += 15  # the Planner took 15 s
    progress("role", role="developer", loop=2)
    progress("attempt", role="developer", loop=2, attempt=1, events=events, adapter=harness)
    clock.now += 9
    events.write_text('{"type": "tool", "name": "write", "path": "calc.py"}\n'
                      '{"type": "usage", "input_tokens": 1000, "output_tokens": 234, "cost_usd": 0.0125}\n')
    line = progress.status_line().plain
    assert line == "loop 2/5 · developer · 0:00:09 · 1,234 tokens · $0.0125 · 1 tool calls · last: write calc.py"
    progress("attempt_done", role="developer", loop=2, attempt=1, ok=False, outcome="ok", seconds=9.0,
             usage=Usage(1000, 0, 234, 0, 0.0125), tool_calls=1, errors=["missing field 'summary'"])
    progress("attempt", role="developer", loop=2, attempt=2, events=tmp_path / "attempt-2.jsonl", adapter=harness)
    clock.now += 3
    line = progress.status_line().plain  # the role's clock goes on; the first attempt's spend stays counted
    assert line == ("loop 2/5 · developer (attempt 2) · 0:00:12 · 1,234 tokens · $0.0125 · 1 tool calls · "
                    "last: write calc.py")
    assert "developer · attempt 1 · rejected: missing field 'summary' · 9.0s · 1,234 tokens · $0.0125" \
        in console.file.getvalue()


def test_a_role_whose_events_are_garbage_still_shows_its_clock(tmp_path):
    console = Console(file=io.StringIO(), width=200)
    progress = LiveProgress(console, ProgressMode.LIVE)
    progress("loop", loop=1, target=1)
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"\x1b]0;pwned\x07" * 1000 + b"\n{[[[\n")
    progress("attempt", role="qa", loop=1, attempt=1, events=events, adapter=adapter("claude"))
    assert progress.status_line().plain.startswith("loop 1/1 · qa · 0:00:0")


def lines_of(stderr: str, needle: str) -> list[str]:
    return [line for line in stderr.splitlines() if needle in line]


def test_a_log_gets_one_line_per_role_attempt_start_and_end(tmp_path):
    """stdout and stderr are pipes here: no live line, but each role's start and end as it happens."""
    log = tmp_path / "hoh.log"
    result = run_hoh("--log-file", log, "build", DEMO / "spec.md", "--harness", "scripted", "--loops", "2",
                     "-w", tmp_path / "ws")
    assert result.returncode == 0, result.stderr
    progress = [line for line in result.stderr.splitlines() if line.startswith("loop ") and " · " in line]
    expected = [f"loop {t}/2 · {role} · attempt 1 · {what}" for t in (1, 2)
                for role in ("planner", "developer", "qa") for what in ("started", "ok")]
    assert [" · ".join(line.split(" · ")[:4]) for line in progress] == expected
    for line in lines_of(result.stderr, "· ok ·"):
        _, _, _, _, seconds, tokens, cost = line.split(" · ")
        assert seconds.endswith("s") and float(seconds[:-1]) > 0
        assert tokens.endswith(" tokens") and int(tokens.split()[0].replace(",", "")) > 0
        assert cost == "cost unknown"  # the scripted agent's model has no price: unknown, never $0
    assert "\x1b[" not in result.stderr
    logged = log.read_text()
    assert logged.count("· started") == 6 and logged.count("· ok ·") == 6 and "loop 2 finished: partial" in logged


def test_progress_json_is_one_object_per_line_on_stderr_and_json_is_one_document_on_stdout(tmp_path):
    ws = tmp_path / "ws"
    result = run_hoh("build", DEMO / "spec.md", "--loops", "1", "-w", ws, "--progress", "json", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["status"] == "finished" and report["exit_code"] == 0 and report["loops_finished"] == 1
    assert report["workspace"] == str(ws.resolve()) and report["tokens"] > 0 and report["cost_usd"] is None
    assert [(loop["loop"], loop["verdict"]) for loop in report["loops"]] == [(1, "pass")]
    events = [json.loads(line) for line in result.stderr.splitlines()]
    assert all(e["v"] == 1 and isinstance(e["time"], float) for e in events)
    assert [(e["event"], e.get("role")) for e in events] == [
        ("role_start", "planner"), ("role_end", "planner"), ("role_start", "developer"), ("role_end", "developer"),
        ("candidate", None), ("role_start", "qa"), ("role_end", "qa"), ("loop_end", None), ("run_end", None)]
    ends = [e for e in events if e["event"] == "role_end"]
    assert all(e["ok"] and e["outcome"] == "ok" and e["attempt"] == 1 and e["loop"] == 1 and e["seconds"] > 0
               for e in ends)
    assert sum(e["tokens"] for e in ends) == events[-2]["tokens"] == report["tokens"]
    assert events[-1]["status"] == "finished" and events[-1]["loops"] == report["loops"]


def test_resume_json_alone_has_no_progress_and_reports_the_exit_code(tmp_path):
    ws = tmp_path / "ws"
    assert run_hoh("build", DEMO / "spec.md", "--loops", "1", "-w", ws, "-q").returncode == 0
    result = run_hoh("resume", "-w", ws, "--loops", "1", "--json")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    report = json.loads(result.stdout)
    assert report["loops_finished"] == 2 and [loop["loop"] for loop in report["loops"]] == [1, 2]
    bad = run_hoh("resume", "-w", ws, "--progress", "loud")
    assert bad.returncode == 2 and "'loud' is not one of 'auto', 'live', 'lines', 'json', 'none'" in bad.stderr


def test_on_a_terminal_the_live_line_follows_the_running_role(tmp_path):
    """The real CLI on a pseudo-terminal: its live line names the running role with the role's own clock,
    and the tail shows a tool call the role made while it was still running."""
    import pty
    import re
    import select
    import subprocess
    import sys
    import shutil

    import yaml
    demo = Path(shutil.copytree(DEMO, tmp_path / "demo"))
    script = yaml.safe_load((demo / "script.yaml").read_text())
    script["loops"][1]["developer"]["actions"].insert(1, {"sleep": 2})  # a tool call made while the role still runs
    (demo / "script.yaml").write_text(yaml.safe_dump(script))
    primary, secondary = pty.openpty()
    env = {**os.environ, "COLUMNS": "250", "LINES": "50", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "hoh", "build", str(demo / "spec.md"), "--harness", "scripted",
                             "--loops", "1", "-w", str(tmp_path / "ws")], stdin=subprocess.DEVNULL, stdout=secondary,
                            stderr=secondary, env=env)
    os.close(secondary)
    chunks = []
    while True:
        ready, _, _ = select.select([primary], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(primary, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=60) == 0
    os.close(primary)
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "\n", b"".join(chunks).decode("utf-8", "replace")).replace("\r", "\n")
    frames = [line.strip() for line in screen.splitlines() if "tool calls" in line]
    assert any(re.search(r"loop 1/1 · developer · 0:00:0\d · [\d,]+ tokens · cost unknown · \d+ tool calls", f)
               for f in frames), frames
    assert any(" · last: " in f for f in frames), frames
    assert not any("loop 0/0" in f for f in screen.splitlines())  # before the first loop it says it is starting
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode("utf-8", "replace"))
    assert "loop 1/1 · qa · attempt 1 · ok · " in plain and "finished 1/1 loops" in plain
