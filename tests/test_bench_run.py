"""`hoh bench run` end to end on benchmarks/examples: the oracle scores 1.0 everywhere, the scripted
agent gives a per-loop curve, a rerun keeps what finished, and reports compare two runs.

Everything is asserted on what the runs persisted under OUT (trial records, grades, the hoh
workspaces), through the real CLI in a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

EXAMPLES = REPO / "benchmarks" / "examples"
TASKS = ["csvstat", "kvstore", "roman", "rpn", "wordfreq"]

# The real `hoh` entry point, with the bench sub-app registered if hoh/cli/main.py does not yet.
BENCH_MAIN = """
import sys
from hoh.cli import bench, main
if not any(getattr(g, "name", None) == "bench" for g in main.app.registered_groups):
    main.app.add_typer(bench.app, name="bench")
sys.argv = ["hoh", *sys.argv[1:]]
main.main()
"""


def bench_argv(*args) -> list[str]:
    # The examples' images are Docker images now, which this runner cannot grade in; their
    # verifiers need only bash and python3, so they run on this machine instead.
    host = ["--grade-on-host"] if args and args[0] == "run" else []
    return [sys.executable, "-c", BENCH_MAIN, "bench", *map(str, args), *host]


def hoh_bench(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(bench_argv(*args), env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def record(out: Path, task: str) -> dict:
    return json.loads((out / "trials" / task / "trial.json").read_text())


def scores(out: Path, task: str) -> list[float]:
    return [s["score"] for s in record(out, task)["scores"]]


@pytest.mark.parametrize("command", ["", "run", "report", "list"])
def test_help(command):
    result = hoh_bench(*([command] if command else []), "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout


def test_oracle_scores_one_on_every_example(tmp_path):
    out = tmp_path / "oracle"
    result = hoh_bench("run", EXAMPLES, "--harness", "oracle", "--jobs", "2", "-o", out)  # live progress on
    assert result.returncode == 0, result.stderr
    for task in TASKS:
        assert f"{task}: completed @1 1.00" in result.stderr  # one line per finished trial
        rec = record(out, task)
        assert rec["outcome"] == "completed" and rec["harness"] == "oracle" and rec["loops"] == 1, rec
        # The trial's spec is the task's instruction, told where /workspace is in a hoh run.
        spec = (out / "trials" / task / "spec.md").read_text()
        assert spec.startswith("> Where this task says `/workspace`, use your project directory")
        assert spec.endswith((EXAMPLES / task / "instruction.md").read_text())
        assert rec["final_score"] == 1.0, rec
        grade = json.loads((out / "trials" / task / "grades" / "loop-0001" / "grade.json").read_text())
        assert grade["status"] == "graded" and grade["commit"]
        # The verifier wrote its reward under the isolated view's /logs/verifier, kept here.
        logs = out / "trials" / task / "grades" / "loop-0001" / "logs" / "verifier"
        assert (logs / "reward.txt").exists() or (logs / "reward.json").exists()
        # The graded copy is gone; the solution landed in the hoh project, not in the task dir.
        assert not (out / "trials" / task / "grades" / "loop-0001" / "workspace").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mean_score_by_loop"] == [{"loop": 1, "mean": 1.0, "n": 5}] and summary["pass_rate"] == 1.0
    assert "| 1.000 |" in (out / "summary.md").read_text()


def test_scripted_two_loops_gives_a_curve_and_a_rerun_keeps_it(tmp_path):
    out = tmp_path / "scripted"
    args = ("run", EXAMPLES, "--harness", "scripted", "--loops", "2", "--jobs", "2", "-o", out)
    first = hoh_bench(*args, "-q")
    assert first.returncode == 0, first.stderr
    for task in TASKS:
        rec = record(out, task)
        assert rec["outcome"] == "completed" and rec["mode"] == "hoh", rec
        assert scores(out, task) == [0.5, 1.0], (task, rec["scores"])
        assert [s["hoh_status"] for s in rec["scores"]] == ["partial", "pass"]
        assert rec["tokens"]["input"] > 0 and rec["wall_seconds"] > 0
        # Each loop was graded on that loop's frozen candidate.
        ws = out / "trials" / task / "workspace"
        for t in (1, 2):
            cand = json.loads((ws / "state" / "loops" / f"{t:04d}" / "candidate.json").read_text())
            grade = json.loads((out / "trials" / task / "grades" / f"loop-{t:04d}" / "grade.json").read_text())
            assert grade["commit"] == cand["commit"] and rec["scores"][t - 1]["candidate_id"] == cand["candidate_id"]
    summary = json.loads((out / "summary.json").read_text())
    assert [e["mean"] for e in summary["mean_score_by_loop"]] == [0.5, 1.0]
    assert "HoH@1 0.500 → HoH@2 1.000" in first.stdout

    before = {t: (out / "trials" / t / "trial.json").read_bytes() for t in TASKS}
    start = time.monotonic()
    again = hoh_bench(*args, "-q")
    assert again.returncode == 0, again.stderr
    assert time.monotonic() - start < 15
    assert "keeping 5 finished trial(s); running 0" in again.stderr
    assert {t: (out / "trials" / t / "trial.json").read_bytes() for t in TASKS} == before
    assert json.loads((out / "summary.json").read_text())["mean_score_by_loop"] == summary["mean_score_by_loop"]

    # Other settings on the same OUT are refused, with the difference shown.
    other = hoh_bench("run", EXAMPLES, "--harness", "scripted", "--loops", "3", "-o", out, "-q")
    assert other.returncode == 2
    assert "loops: 2 in OUT, 3 now" in other.stderr

    # report rebuilds the summary from the records; --compare shows per-task deltas.
    report = hoh_bench("report", out, "--json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["final_mean"] == 1.0
    vanilla = tmp_path / "vanilla"
    assert hoh_bench("run", EXAMPLES, "--harness", "scripted", "--mode", "vanilla", "--filter", "kvstore|rpn",
                     "-o", vanilla, "-q").returncode == 0
    cmp = hoh_bench("report", vanilla, "--compare", out, "--json")
    assert cmp.returncode == 0, cmp.stderr
    deltas = {t["task"]: t for t in json.loads(cmp.stdout)["tasks"]}
    assert deltas["kvstore"]["a"] == 0.5 and deltas["kvstore"]["b"] == 1.0 and deltas["kvstore"]["delta"] == 0.5
    assert deltas["roman"]["note"] == "only in B"
    assert (vanilla / f"compare-{out.name}.md").read_text().count("| kvstore | 0.500 | 1.000 | 0.500 |") == 1
    human = hoh_bench("report", vanilla, "--compare", out)
    assert human.returncode == 0 and "kvstore" in human.stdout


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie waits for an init that may never reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _copy_task(src: Path, dst: Path) -> Path:
    import shutil
    shutil.copytree(src, dst)
    return dst


def test_killed_run_resumes_unfinished_trials_and_keeps_grades(tmp_path):
    """SIGINT mid-run: the runner stops its harness processes and leaves; rerunning resumes each trial
    from its hoh journal (finished loops and their grades are not redone)."""
    import yaml
    suite = tmp_path / "suite"
    task = _copy_task(EXAMPLES / "kvstore", suite / "kvstore")
    script = yaml.safe_load((task / "scripted" / "script.yaml").read_text())
    script["loops"][2]["developer"]["actions"].insert(0, {"sleep": 5})  # a slow agent in loop 2
    (task / "scripted" / "script.yaml").write_text(yaml.safe_dump(script, sort_keys=False))
    out = tmp_path / "out"
    args = ("run", suite, "--harness", "scripted", "--loops", "2", "-o", out, "-q")

    proc = subprocess.Popen(bench_argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    progress = out / "trials" / "kvstore" / "progress.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        p = json.loads(progress.read_text()) if progress.exists() else {}
        if p.get("loop") == 2 and p.get("phase") == "developer":
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the trial never reached loop 2")
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert "rerun the same command to resume" in stderr
    assert not (out / "trials" / "kvstore" / "trial.json").exists()
    grade1 = out / "trials" / "kvstore" / "grades" / "loop-0001" / "grade.json"
    stamp = grade1.stat().st_mtime_ns
    journal_path = out / "trials" / "kvstore" / "workspace" / "state" / "journal.jsonl"
    agent = [json.loads(line) for line in journal_path.read_text().splitlines()][-1]
    assert agent["event"] == "process_started" and agent["loop"] == 2
    assert not running(agent["pid"])  # the interrupted agent's process was stopped too

    result = hoh_bench(*args, timeout=120)
    assert result.returncode == 0, result.stderr
    assert scores(out, "kvstore") == [0.5, 1.0]
    assert grade1.stat().st_mtime_ns == stamp  # loop 1 was not re-graded
    journal = [json.loads(line) for line in journal_path.read_text().splitlines()]
    assert [e["loop"] for e in journal if e["event"] == "loop_started"] == [1, 2]  # loop 1 ran once
    assert any(e["event"] == "role_set_aside" and e["role"] == "developer" for e in journal)


def test_errored_trials_are_kept_until_retry_errors(tmp_path):
    suite = tmp_path / "suite"
    task = _copy_task(EXAMPLES / "rpn", suite / "rpn")
    script = (task / "scripted" / "script.yaml").read_text()
    (task / "scripted" / "script.yaml").unlink()
    out = tmp_path / "out"
    args = ("run", suite, "--harness", "scripted", "--loops", "2", "-o", out, "-q")
    first = hoh_bench(*args)
    assert first.returncode == 1
    rec = record(out, "rpn")
    assert rec["outcome"] == "error" and "scripted/script.yaml" in rec["error"]

    (task / "scripted" / "script.yaml").write_text(script)
    kept = hoh_bench(*args)
    assert kept.returncode == 1 and record(out, "rpn")["outcome"] == "error"
    retried = hoh_bench(*args, "--retry-errors")
    assert retried.returncode == 0, retried.stderr
    assert record(out, "rpn")["outcome"] == "completed" and scores(out, "rpn") == [0.5, 1.0]


def test_bad_suites_and_invalid_tasks(tmp_path):
    missing = hoh_bench("run", tmp_path / "nope", "-o", tmp_path / "o1")
    assert missing.returncode == 2 and "not found" in missing.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    assert hoh_bench("list", empty).returncode == 2

    suite = tmp_path / "suite"
    _copy_task(EXAMPLES / "wordfreq", suite / "good")
    (suite / "no-instruction").mkdir()
    (suite / "no-instruction" / "task.toml").write_text('[task]\nname = "x"\n')
    (suite / "no-instruction" / "tests").mkdir()
    (suite / "no-instruction" / "tests" / "test.sh").write_text("true\n")
    _copy_task(EXAMPLES / "rpn", suite / "no-verifier")
    (suite / "no-verifier" / "tests" / "test.sh").unlink()
    _copy_task(EXAMPLES / "roman", suite / "bad-toml")
    (suite / "bad-toml" / "task.toml").write_text("[task\nname = ")

    out = tmp_path / "out"
    result = hoh_bench("run", suite, "--harness", "scripted", "--loops", "1", "-o", out, "-q")
    assert result.returncode == 0, result.stderr
    assert record(out, "good")["outcome"] == "completed" and scores(out, "good") == [0.5]
    assert "no instruction.md" in record(out, "no-instruction")["error"]
    assert "tests/test.sh is missing" in record(out, "no-verifier")["error"]
    assert "task.toml is malformed" in record(out, "bad-toml")["error"]
    assert {record(out, t)["outcome"] for t in ("no-instruction", "no-verifier", "bad-toml")} == {"invalid"}

    for name in ("good",):
        import shutil
        shutil.rmtree(suite / name)
    none_valid = hoh_bench("run", suite, "-o", tmp_path / "out2", "-q")
    assert none_valid.returncode == 2 and "no valid task" in none_valid.stderr
    assert not (tmp_path / "out2").exists()
