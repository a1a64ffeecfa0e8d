"""`hoh bench` on Harbor, end to end on a real Docker engine: the examples with Harbor's oracle and
with hoh's scripted harness over three loops, every loop's candidate graded by Harbor's verifier in
its own trial; an identical rerun; an interrupted run resumed by Harbor; bad input. Asserted on the
Harbor job dirs under OUT (result.json of every trial), hoh's journal in the agent trials, and the
summaries. Needs Harbor and Docker (see harbor_env.py)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from conftest import run_hoh
from harbor_env import EXAMPLES, bench_runs, compose_containers, containers_of_job, harbor  # noqa: F401

from hoh.bench.results import trial_results
from hoh.store.journal import Journal, RunHistory

TASKS = ["csvstat", "kvstore", "roman", "rpn", "wordfreq"]


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def grade_trials(out: Path, task: str) -> dict[int, dict]:
    """loop → the result.json of the grade trial that verified loop t's candidate."""
    found = {}
    for _, result in trial_results(out / "jobs" / f"{task}.grade"):
        agent = result["config"]["agent"]
        assert agent["import_path"] == "hoh.harbor:CandidateAgent"
        found[agent["kwargs"]["loop"]] = result
    return found


def one_line_error(result: subprocess.CompletedProcess, message: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("hoh: ") and message in lines[0], result.stderr


def test_the_oracle_scores_one_on_every_example(bench_runs):
    out = bench_runs["oracle"]
    s = summary(out)
    assert [t["task"] for t in s["tasks"]] == TASKS
    assert [(t["outcome"], t["scores"]) for t in s["tasks"]] == [("completed", [1.0])] * 5
    assert s["hoh_at"] == [{"loop": 1, "mean": 1.0, "n": 5, "pass_rate": 1.0}] and s["errors"] == []
    for task in TASKS:  # Harbor's own oracle trial, graded by Harbor's verifier; nothing else ran
        [(_, result)] = trial_results(out / "jobs" / f"{task}.agent")
        assert result["agent_info"]["name"] == "oracle" and result["exception_info"] is None
        assert result["verifier_result"]["rewards"] == {"reward": 1.0}
        assert not (out / "jobs" / f"{task}.grade").exists()


def test_an_identical_rerun_finishes_at_once_with_the_same_results(harbor, bench_runs):
    out = bench_runs["oracle"]
    before = summary(out)["tasks"]
    files = [p for p in (out / "jobs").rglob("*") if p.is_file()] + list((out / "harbor").iterdir())
    stamps = {p: p.stat().st_mtime_ns for p in files}
    started = time.monotonic()
    result = harbor.hoh("bench", "run", EXAMPLES, "--harness", "oracle", "--env", "docker", "-o", out, "-j", "3")
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 30  # Harbor's preflight only: no job is started again
    assert summary(out)["tasks"] == before
    assert {p: p.stat().st_mtime_ns for p in files} == stamps
    assert "oracle: HoH@1 1.000 · pass rate 1.00 · outcomes completed 5" in result.stdout


def test_every_loop_of_hoh_is_graded_by_harbor_s_verifier(bench_runs):
    out = bench_runs["scripted"]
    s = summary(out)
    assert [e["mean"] for e in s["hoh_at"]] == [0.5, 1.0, 1.0]  # loop 2 completes each program, loop 3 documents it
    for task in TASKS:
        record = next(t for t in s["tasks"] if t["task"] == task)
        assert record["outcome"] == "completed" and record["scores"] == [0.5, 1.0, 1.0]
        [(trial, live)] = trial_results(out / "jobs" / f"{task}.agent")
        history = RunHistory.read(Journal(trial / "hoh" / "workspace" / "state" / "journal.jsonl"))
        assert [(t, loop.status) for t, loop in sorted(history.loops.items())] == \
            [(1, "partial"), (2, "pass"), (3, "pass")]
        grades = grade_trials(out, task)
        assert sorted(grades) == [1, 2, 3]
        for t, expected in zip((1, 2, 3), record["scores"]):
            grade = grades[t]
            assert grade["exception_info"] is None and grade["agent_info"]["name"] == "hoh-candidate"
            assert grade["verifier_result"]["rewards"] == {"reward": expected}
            # each grading trial replayed exactly loop t's frozen candidate
            assert grade["agent_result"]["metadata"]["hoh_candidate"]["candidate_id"] == history.loops[t].candidate_id
        # the agent trial's own verifier graded its final workdir: the same as loop 3's replay
        assert live["verifier_result"]["rewards"] == grades[3]["verifier_result"]["rewards"]
        assert record["tokens"]["input"] == live["agent_result"]["n_input_tokens"] == history.usage.input_tokens > 0
    # The verifier's own output of loop 1 (kept in its grade trial) says what was missing.
    loop1 = next(d for d, r in trial_results(out / "jobs" / "roman.grade") if r["config"]["agent"]["kwargs"]["loop"] == 1)
    assert "FAIL" in (loop1 / "verifier" / "checks.txt").read_text()


def test_report_compares_hoh_at_t_with_deltas_and_win_rates(bench_runs):
    # the report reads Harbor's JSON only: hoh's core (this venv, without Harbor) is enough
    text = run_hoh("bench", "report", bench_runs["oracle"], "--compare", bench_runs["scripted"])
    assert text.returncode == 0, text.stderr
    cells = [[c for c in line.split() if c != "│"] for line in text.stdout.splitlines()]
    rows = {c[0]: c[1:] for c in cells if c and c[0].startswith("HoH@")}
    # the oracle runs once: no HoH@3 of its own to compare (the final scores still are, below)
    assert rows["HoH@1"] == ["1.000", "0.500", "-0.500"] and rows["HoH@3"] == ["–", "1.000", "–"]
    assert "note: A ran 1 loop and B 3" in text.stdout
    assert "B over A: 0 wins, 5 ties, 0 losses on 5 tasks · win rate 0.500" in text.stdout
    assert "Dominance" in text.stdout
    data = json.loads(run_hoh("bench", "report", bench_runs["oracle"], "--compare", bench_runs["scripted"],
                              "--json").stdout)
    assert data["comparisons"][0]["rows"][0] == {"metric": "HoH@1", "a": 1.0, "b": 0.5, "delta": -0.5}
    assert data["win_rates"] == {"runs": ["oracle", "scripted · hoh"], "matrix": [[None, 0.5], [0.5, None]],
                                 "dominance": [0.5, 0.5]}


def test_an_interrupted_run_is_resumed_by_harbor(harbor, tmp_path):
    out, task = tmp_path / "out", tmp_path / "suite" / "roman"
    shutil.copytree(EXAMPLES / "roman", task)
    script = yaml.safe_load((task / "scripted" / "script.yaml").read_text())
    script["loops"][2]["developer"]["actions"].insert(0, {"sleep": 20})  # the interrupt comes while loop 2 runs
    (task / "scripted" / "script.yaml").write_text(yaml.safe_dump(script, sort_keys=False))
    argv = ("bench", "run", task, "--harness", "scripted", "--loops", "2", "--env", "docker", "-o", out)
    proc = harbor.hoh_async(*argv)
    deadline = time.monotonic() + 300
    while not list((out / "jobs").glob("roman.agent/*/hoh/run.log")):  # hoh has finished a loop
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.5)
    job_id = json.loads((out / "jobs" / "roman.agent" / "result.json").read_text())["id"]
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=400)
    assert proc.returncode == 130 and "rerun the same command to resume" in stderr, stderr
    job = out / "jobs" / "roman.agent"
    assert containers_of_job(job) == [] and containers_of_job(job, "network ls") == [], compose_containers()
    [(_, cancelled)] = trial_results(out / "jobs" / "roman.agent")
    assert cancelled["exception_info"]["exception_type"] == "CancelledError"  # Harbor stopped its trial
    again = harbor.hoh(*argv)
    assert again.returncode == 0, again.stderr
    [(_, result)] = trial_results(out / "jobs" / "roman.agent")  # the cancelled trial was replaced, not kept
    assert result["exception_info"] is None and result["id"] != cancelled["id"]
    assert json.loads((out / "jobs" / "roman.agent" / "result.json").read_text())["id"] == job_id  # one Harbor job
    assert summary(out)["tasks"][0]["scores"] == [0.5, 1.0]


# ---- bad input: one line, exit 2, nothing started -------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["--env", "nope"], "unknown environment 'nope'; Harbor's environments: "),
    (["--env", "no_such_module:Env"], "--env no_such_module:Env: cannot use it (Failed to import module 'no_such_module'"),
    (["--mode", "vanilla", "--loops", "2"], "one Developer pass"),
    (["--mode", "continuation", "--ablate", "evidence"], "has none to switch off"),
    (["--ablate", "planner"], "unknown ablation 'planner'"),
    (["--mode", "solo"], "unknown mode 'solo'"),
    (["--harness", "nope"], "unknown harness 'nope'"),
    (["--harness", "oracle", "--loops", "2"], "has no modes, ablations or loops"),
    (["--set", "no.such=1"], "invalid key 'no'"),
    (["--include", "nothing-*"], "No tasks matched the filter"),
])
def test_bad_options_are_refused_before_anything_starts(harbor, tmp_path, args, message):
    one_line_error(harbor.hoh("bench", "run", EXAMPLES, "-o", tmp_path / "out", "--harness", "scripted", *args), message)
    assert not (tmp_path / "out").exists()


def test_a_suite_without_a_valid_task_gets_harbor_s_lint_message(harbor, tmp_path):
    suite = tmp_path / "suite"
    shutil.copytree(EXAMPLES / "roman", suite / "roman", ignore=shutil.ignore_patterns("environment"))
    result = harbor.hoh("bench", "run", suite, "-o", tmp_path / "out", "--harness", "scripted")
    one_line_error(result, "has no valid task (roman: [invalid-task-files]")
    assert not (tmp_path / "out").exists()
    lint = harbor.cli("lint", "--select", "invalid-task-files", suite / "roman")
    assert lint.stdout.split("] ", 1)[1].strip() in result.stderr  # Harbor's own wording


def test_no_reachable_docker_engine_is_harbor_s_preflight_message(harbor, tmp_path):
    result = harbor.hoh("bench", "run", EXAMPLES, "--harness", "scripted", "--env", "docker", "-o", tmp_path / "out",
                        env={"DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"})
    one_line_error(result, "--env docker: Docker daemon is not running")
    assert not (tmp_path / "out").exists()


def test_a_rerun_with_other_settings_is_refused(harbor, bench_runs, tmp_path):
    one_line_error(harbor.hoh("bench", "run", EXAMPLES, "--harness", "scripted", "--env", "docker",
                              "-o", bench_runs["oracle"]), "holds a run with other settings (harness: 'oracle' in OUT")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    one_line_error(harbor.hoh("bench", "run", EXAMPLES, "--harness", "scripted", "-o", tmp_path / "full"), "holds no benchmark run")
