"""`hoh status` tells the truth: a loop nobody works on is not `running`, a running loop has a time, a loop's
time leaves out the days its run was stopped, a partial verdict says why, and a stop reads as people say it."""

from __future__ import annotations

import json
import os
import signal
import time

from conftest import mini_script, run_hoh
from test_budgets import events, new_project
from test_long_runs import start_build, started, wait_for


def status(ws) -> dict:
    result = run_hoh("status", "-w", ws, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def slow_developer(seconds: float) -> dict:
    script = mini_script(1)
    script["loops"][1]["developer"]["actions"].insert(0, {"sleep": seconds})
    return script


def test_a_live_loop_runs_with_its_time_and_a_stopped_one_says_stopped(tmp_path):
    # The Developer outlasts a status and a stop on a loaded machine: the stop comes while it runs.
    p = new_project(tmp_path, slow_developer(12))
    build = start_build(p, "--loops", "1")
    wait_for(p, started("developer"))
    time.sleep(1.2)
    live = status(p.ws)
    assert live["state"] == "running" and live["loops"][0]["status"] == "running"
    assert live["loops"][0]["seconds"] >= 1.0  # the time so far, not 0s
    assert run_hoh("stop", "-w", p.ws).returncode == 0
    build.communicate(timeout=60)

    after = status(p.ws)
    assert after["state"] == "stopped" and after["loops"][0]["ended"] == "stopped"
    assert after["loops"][0]["status"] == "running"  # still a loop status: run and loop statuses share names
    assert after["stop_reason"]["status"] == "stopped"  # the persisted value, unchanged
    assert after["stop_reason"]["message"].startswith("stopped by hoh stop (pid ")
    human = run_hoh("status", "-w", p.ws).stdout
    assert "stop reason: stopped by hoh stop (pid " in human and "stopped: stopped" not in human
    assert "running" not in human


def test_a_loop_s_time_leaves_out_the_stop(tmp_path):
    p = new_project(tmp_path, slow_developer(6))  # long enough for `hoh stop` to come while it runs
    build = start_build(p, "--loops", "1")
    wait_for(p, started("developer"))
    assert run_hoh("stop", "-w", p.ws).returncode == 0
    build.communicate(timeout=60)
    time.sleep(3)  # the run waits, stopped: none of this is the loop's time
    assert run_hoh("resume", "-w", p.ws, "-q").returncode == 0

    journal = events(p.ws)
    loop_start = next(e["time"] for e in journal if e["event"] == "loop_started")
    stopped_at, resumed_at = [e["time"] for e in journal if e["event"] == "run_finished"][0], \
        [e["time"] for e in journal if e["event"] == "run_started"][1]
    loop_end = next(e["time"] for e in journal if e["event"] == "loop_finished")
    spans = (stopped_at - loop_start) + (loop_end - resumed_at)
    seconds = status(p.ws)["loops"][0]["seconds"]
    assert abs(seconds - spans) < 0.05, (seconds, spans)
    assert seconds < loop_end - loop_start - 2.5


def test_two_ctrl_c_say_interrupted_and_name_the_workspace(tmp_path):
    p = new_project(tmp_path, slow_developer(60))
    build = start_build(p, "--loops", "1")
    wait_for(p, started("developer"))
    build.send_signal(signal.SIGINT)
    time.sleep(0.5)
    build.send_signal(signal.SIGINT)
    _, err = build.communicate(timeout=30)
    assert build.returncode == 130
    assert f"hoh resume -w {p.ws.resolve()}" in err and "WORKSPACE" not in err
    shown = status(p.ws)
    assert shown["state"] == "interrupted" and shown["loops"][0]["ended"] == "interrupted"
    assert shown["stop_reason"]["message"] == "interrupted (Ctrl-C)"
    assert "stop reason: interrupted (Ctrl-C)" in run_hoh("status", "-w", p.ws).stdout


def test_a_killed_hoh_leaves_an_interrupted_loop(tmp_path):
    p = new_project(tmp_path, slow_developer(60))
    build = start_build(p, "--loops", "1")
    wait_for(p, started("developer"))
    os.kill(build.pid, signal.SIGKILL)
    build.wait()
    try:
        shown = status(p.ws)
        assert shown["state"] == "interrupted" and shown["loops"][0]["ended"] == "interrupted"
        assert "killed" in shown["stop_reason"]["message"]
    finally:
        pid = next(e["pid"] for e in events(p.ws) if e["event"] == "process_started" and e["role"] == "developer")
        try:
            os.killpg(pid, signal.SIGKILL)  # the agent a kill -9 of hoh leaves behind
        except ProcessLookupError:
            pass


def test_a_partial_verdict_says_which_regression_and_criterion(demo_ws):
    shown = status(demo_ws)
    reasons = {loop["loop"]: loop["reason"] for loop in shown["loops"]}
    assert reasons[1] is None  # a pass needs no reason
    assert reasons[2].startswith("regression I-0002 (V-0002 ") and "broke" in reasons[2]
    assert "regression I-0001 (V-0005 " in reasons[3]
    human = run_hoh("status", "-w", demo_ws).stdout
    assert "loop 2 partial: regression I-0002 (V-0002" in human
