"""Developers working at once under the run's controls (issue 27): `hoh stop`, a second Ctrl-C and a budget
cover every running Developer."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from conftest import REPO, Project, run_hoh
from test_parallel import two_packages
from test_parallel_resume import snapshot

from hoh import api


def start_build(p: Project, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hoh", "build", str(p.spec), "-H", "scripted", "-w", str(p.ws), "-q",
                             "--developers", "2", *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def events(p: Project) -> list[dict]:
    path = p.state("journal.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")] if path.exists() else []


def both_started(p: Project, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(e["event"] == "process_started" and e.get("package") in ("P1", "P2") for e in events(p)) == 2:
            return
        time.sleep(0.05)
    raise AssertionError("the two Developers never both started")


def project(tmp_path, name: str, sleep: float) -> Project:
    (tmp_path / name).mkdir()
    return Project(tmp_path / name, {"schema_version": 1, "loops": {1: two_packages(shared=False, sleep=sleep)}})


def test_hoh_stop_lets_every_running_developer_finish_its_attempt_then_ends(tmp_path):
    reference = project(tmp_path, "reference", 2)
    assert reference.build(sets={"policy.developers": 2}).status == "finished"
    p = project(tmp_path, "p", 2)
    build = start_build(p, "--loops", "1")
    both_started(p)
    asked = run_hoh("stop", "-w", p.ws)
    assert asked.returncode == 0, asked.stderr
    _, err = build.communicate(timeout=60)
    assert build.returncode == 4, err
    finished = [e for e in events(p) if e["event"] == "attempt_finished"]
    assert sorted(e.get("package") or e["role"] for e in finished) == ["P1", "P2", "planner"]
    assert all(e["ok"] for e in finished)  # both Developers' work recorded, no QA started
    assert events(p)[-1]["status"] == "stopped"
    resumed = run_hoh("resume", "-w", p.ws, "-q")
    assert resumed.returncode == 0, resumed.stderr
    # Nothing done twice: each package's one attempt, then QA.
    assert [e.get("package") or e["role"] for e in events(p) if e["event"] == "attempt_started"] in (
        ["planner", "P1", "P2", "qa"], ["planner", "P2", "P1", "qa"])
    assert snapshot(p.ws) == snapshot(reference.ws)


def test_a_second_ctrl_c_kills_every_running_developer_at_once(tmp_path):
    p = project(tmp_path, "p", 60)
    build = start_build(p, "--loops", "1")
    both_started(p)
    pids = [e["pid"] for e in events(p) if e["event"] == "process_started" and e.get("package")]
    build.send_signal(signal.SIGINT)
    # The second Ctrl-C only once hoh has taken the first: two signals before its handler runs are one.
    said = ""
    while "stopping after the current role attempt" not in said:
        line = build.stderr.readline()
        assert line, f"hoh ended before it took the first Ctrl-C: {said}"
        said += line
    build.send_signal(signal.SIGINT)
    assert build.wait(timeout=30) == 130
    assert events(p)[-1]["status"] == "interrupted"
    for pid in pids:  # neither Developer's agent outlives hoh
        assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0
    started = [e for e in events(p) if e["event"] == "attempt_started" and e.get("package")]
    assert len(started) == 2  # no Developer started another attempt after the interrupt


def test_a_budget_stops_every_developer_before_its_next_attempt(tmp_path):
    (tmp_path / "p").mkdir()
    loop = two_packages(shared=False, sleep=0.2)
    for pid in ("P1", "P2"):  # each package's first attempt is rejected (no JSON): each needs a second one
        loop[f"developer@{pid}"] = [{"reply_text": "not json", "usage": {"input_tokens": 400, "output_tokens": 100}},
                                    loop[f"developer@{pid}"]]
    loop["planner"]["usage"] = {"input_tokens": 100, "output_tokens": 100}
    p = Project(tmp_path / "p", {"schema_version": 1, "loops": {1: loop}})
    report = api.build(p.spec, p.ws, p.config(1, {"policy.developers": 2, "budget.tokens": 1000}))
    assert report.status == "budget_exhausted"
    started = [e for e in events(p) if e["event"] == "attempt_started" and e.get("package")]
    assert sorted(e["package"] for e in started) == ["P1", "P2"]  # neither went on to a second attempt
    assert [e["event"] for e in events(p)].count("budget_stop") >= 1


def test_each_developer_working_holds_a_share_of_the_budget(tmp_path):
    """Two Developers may not both start when the budget holds one more attempt but not two: the one that comes
    second is stopped before its attempt, so the budget is passed by no more than one attempt's surprise, as with
    one Developer."""
    (tmp_path / "p").mkdir()
    loops = {}
    for t in (1, 2):
        loop = two_packages(shared=False, sleep=0.2)
        loop["planner"]["usage"] = {"input_tokens": 50, "output_tokens": 50}
        loop["qa"]["usage"] = {"input_tokens": 50, "output_tokens": 50}
        for pid in ("P1", "P2"):
            loop[f"developer@{pid}"]["usage"] = {"input_tokens": 400, "output_tokens": 100}
        loops[t] = loop
    p = Project(tmp_path / "p", {"schema_version": 1, "loops": loops})
    # After loop 1 and loop 2's Planner: 1,300 spent; one more Developer attempt (500) fits in 2,000, two do not.
    report = api.build(p.spec, p.ws, p.config(2, {"policy.developers": 2, "budget.tokens": 2000}))
    assert report.status == "budget_exhausted"
    started = [e for e in events(p) if e["event"] == "attempt_started" and e.get("package") and e["loop"] == 2]
    assert len(started) == 1
    stop = next(e for e in events(p) if e["event"] == "budget_stop")
    assert (stop["loop"], stop["role"], stop["spent"], stop["estimate"]) == (2, "developer", 1300, 1000)
    spent = sum(sum(e["usage"][k] for k in ("input_tokens", "output_tokens")) for e in events(p)
                if e["event"] == "attempt_finished")
    assert spent == 1800  # within the budget: the estimates held


# ---- the benchmark's smoke run (must show 4 is its full run: benchmarks/README.md) ----------------------------
def test_the_parallel_developers_benchmark_prints_its_figures(tmp_path):
    bench = REPO / "benchmarks" / "perf" / "parallel_developers.py"
    result = subprocess.run([sys.executable, str(bench), "--tiny", "--json"], capture_output=True, text=True,
                            timeout=300, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOH_BENCH_TMP": str(tmp_path)},
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(result.stdout)
    assert set(figures["loop_seconds"]) == {"1", "2", "4"} and set(figures["ratios"]) == {"2/1", "4/1"}
    for k, spread in figures["loop_seconds"].items():
        assert 0 < spread["min"] <= spread["median"] <= spread["max"]
    assert figures["ratios"]["2/1"] == figures["loop_seconds"]["2"]["median"] / figures["loop_seconds"]["1"]["median"]
    assert list(tmp_path.iterdir()) == []  # its temp dir honoured HOH_BENCH_TMP and is gone
