"""The subprocess choke point: timeouts, whole-group kills, bounded memory, orphan reaping."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

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
    script["loops"][1]["developer"] = [{"actions": [{"hang": True}]}, script["loops"][1]["developer"]]
    p = make_project(script)
    # The idle timeout leaves time to kill hoh before hoh itself kills the hung agent, on a loaded machine too.
    hoh = subprocess.Popen([sys.executable, "-m", "hoh", "build", str(p.spec), "-H", "scripted", "-w", str(p.ws), "-q",
                            "--loops", "1", "--set", "timeouts.idle_seconds=30", "--set", f"sandbox.mode={sandbox}"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    agent = None
    while agent is None and time.time() < deadline:
        time.sleep(0.1)
        if (p.ws / "state" / "journal.jsonl").exists():
            agent = next((e for e in p.journal() if e["event"] == "process_started" and e["role"] == "developer"), None)
    assert agent is not None
    hoh.kill()
    hoh.wait()
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
