"""The subprocess choke point: timeouts, whole-group kills, bounded memory, orphan reaping."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import yaml

from hoh.harness.process import TAIL_BYTES, reap, run_process, start_ticks


def run(tmp_path, script: str, **kw):
    defaults = dict(cwd=tmp_path, env=dict(os.environ), stdin=None, stdout_path=tmp_path / "out",
                    stderr_path=tmp_path / "err", wall_timeout=30, idle_timeout=30)
    return run_process([sys.executable, "-c", script], **{**defaults, **kw})


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()[:1] != "Z"


GRANDCHILD = ("import subprocess, sys, time; p = subprocess.Popen(['sleep', '300']); "
              "open('child.pid', 'w').write(str(p.pid)); print('started', flush=True); time.sleep(300)")


def test_idle_timeout_kills_the_whole_group(tmp_path):
    result = run(tmp_path, GRANDCHILD, idle_timeout=1.0)
    assert result.timed_out == "idle" and result.exit_code is None
    assert result.stdout_path.read_text() == "started\n"  # partial output kept
    assert not alive(int((tmp_path / "child.pid").read_text()))


def test_wall_timeout_even_while_printing(tmp_path):
    result = run(tmp_path, "import time\nwhile True: print('tick', flush=True); time.sleep(0.1)",
                 wall_timeout=1.0, idle_timeout=30)
    assert result.timed_out == "wall" and 1.0 <= result.duration_s < 10


def test_children_left_behind_after_a_normal_exit_are_killed(tmp_path):
    script = "import subprocess; p = subprocess.Popen(['sleep', '300']); open('child.pid','w').write(str(p.pid))"
    result = run(tmp_path, script)
    assert result.exit_code == 0
    assert not alive(int((tmp_path / "child.pid").read_text()))


def test_flooded_stderr_keeps_memory_bounded_and_the_file_whole(tmp_path):
    result = run(tmp_path, "import sys\nfor i in range(200000): sys.stderr.write(f'line {i}\\n')")
    assert result.exit_code == 0
    assert result.stderr_path.stat().st_size > 2_000_000
    assert len(result.stderr_excerpt) < 3 * TAIL_BYTES
    assert result.stderr_excerpt.startswith("line 0\n") and result.stderr_excerpt.endswith("line 199999\n")
    assert "bytes omitted" in result.stderr_excerpt


def test_stdin_is_delivered_and_closed(tmp_path):
    result = run(tmp_path, "import sys; print(len(sys.stdin.read()))", stdin=b"x" * 300_000)
    assert result.exit_code == 0 and result.stdout_path.read_text() == "300000\n"


def test_a_missing_executable_is_a_spawn_error(tmp_path):
    result = run_process(["/nonexistent/cli"], cwd=tmp_path, env={}, stdin=None, stdout_path=tmp_path / "o",
                         stderr_path=tmp_path / "e", wall_timeout=5, idle_timeout=5)
    assert result.spawn_error and result.exit_code is None


def test_reap_kills_a_recorded_group_but_not_a_reused_pid(tmp_path):
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    ticks = start_ticks(proc.pid)
    assert reap(proc.pid, ticks + 1) is False and proc.poll() is None  # another process's identity
    assert reap(proc.pid, ticks) is True
    proc.wait(timeout=5)
    assert reap(proc.pid, ticks) is False


@pytest.mark.parametrize("sandbox", ["bwrap", "off"])
def test_an_agent_never_outlives_a_killed_hoh(make_project, sandbox):
    """Jailed, the agent dies with hoh (its jail is tied to hoh's life); without the jail, the
    next resume reaps the agent a kill -9 of hoh left running."""
    from conftest import mini_script
    script = mini_script(1)
    script["loops"][1]["developer"] = [{"actions": [{"write": {"path": "hanging.txt", "content": "x\n"}},
                                                    {"hang": True}]}, script["loops"][1]["developer"]]
    p = make_project(script)
    # hoh's own idle kill of the hung agent never comes before the test's kill of hoh, however loaded the machine:
    # the resume below runs a script whose Developer no longer hangs (hoh reads the workspace's frozen copy).
    hoh = subprocess.Popen([sys.executable, "-m", "hoh", "build", str(p.spec), "-H", "scripted", "-w", str(p.ws), "-q",
                            "--loops", "1", "--set", "timeouts.idle_seconds=3600", "--set", f"sandbox.mode={sandbox}"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    agent = None
    while agent is None and time.time() < deadline:
        time.sleep(0.1)
        if (p.ws / "state" / "journal.jsonl").exists():
            agent = next((e for e in p.journal() if e["event"] == "process_started" and e["role"] == "developer"), None)
    assert agent is not None
    # Killed once the agent is silent for good: an agent still writing its first events when hoh dies gets
    # SIGPIPE on hoh's pipe, and dies with it (so nothing would be left to reap).
    events = p.state("loops", "0001", "roles", "developer", "attempt-1", "events.jsonl")
    while time.time() < deadline and not (events.is_file() and "hanging.txt" in events.read_text()):
        time.sleep(0.1)
    assert "hanging.txt" in events.read_text()
    hoh.kill()
    hoh.wait()
    script["loops"][1]["developer"] = script["loops"][1]["developer"][1]
    (p.ws / "script.yaml").write_text(yaml.safe_dump(script, sort_keys=False))
    from hoh import api
    if sandbox == "bwrap":
        deadline = time.time() + 30
        while alive(agent["pid"]) and time.time() < deadline:
            time.sleep(0.1)
        assert not alive(agent["pid"])  # the jail went with hoh, and everything in it
        assert api.resume(p.ws).status == "finished"
        return
    assert alive(agent["pid"])  # the hung agent outlived hoh, as after a real kill -9
    assert api.resume(p.ws).status == "finished"
    assert not alive(agent["pid"])
    assert any(e["event"] == "orphan_reaped" and e["pid"] == agent["pid"] for e in p.journal())
