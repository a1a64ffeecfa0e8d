"""Task sources and grading: the Harbor loader (examples, the GameCraft-Bench sample, broken tasks),
ProgramBench through its package, rewards, and the verifier's isolated view."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest
from conftest import REPO
from test_bench_run import EXAMPLES, hoh_bench

from hoh.bench.harbor import load_task
from hoh.bench.tasks import load_suite
from hoh.bench.verifier import bwrap_problem, docker_engine_problem, grade_harbor, read_rewards, resolve_env, score_of, unavailable_reasons
from hoh.errors import UsageError

GAMECRAFT = REPO.parent / "shared" / "benchmarks" / "gamecraft-bench"
needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None, reason=f"{bwrap_problem()}")


def test_examples_are_valid_harbor_tasks_with_what_the_tests_need():
    suite = load_suite(str(EXAMPLES))
    assert [t.id for t in suite.tasks] == ["csvstat", "kvstore", "roman", "rpn", "wordfreq"]
    for task in suite.tasks:
        assert task.valid and task.kind == "harbor" and task.workdir == "/workspace"
        assert task.solution_dir and task.scripted_script and task.instruction_text().startswith("# ")
        assert task.metadata["verifier"] == "tests/test.sh" and task.metadata["difficulty"] == "easy"
        assert task.allow_internet is True and task.verifier_timeout == 60.0
    rewards = {t.id: "reward.txt" if "reward.txt" in (t.path / "tests" / "test.sh").read_text() else "reward.json"
               for t in suite.tasks}
    assert set(rewards.values()) == {"reward.txt", "reward.json"}  # both reward formats are exercised


@pytest.mark.skipif(not GAMECRAFT.is_dir(), reason="the shared GameCraft-Bench sample is not beside the repo")
def test_gamecraft_sample_lists_with_metadata_and_reports_its_grader_unavailable():
    result = hoh_bench("list", GAMECRAFT, "--json")
    assert result.returncode == 0, result.stderr
    tasks = {t["id"]: t for t in json.loads(result.stdout)["tasks"]}
    assert sorted(tasks) == ["cardgame-spire-descent", "horror-floor-13", "puzzle-sokoban-dungeon"]
    sokoban = tasks["puzzle-sokoban-dungeon"]
    assert sokoban["name"] == "gamecraft-bench/puzzle-sokoban-dungeon"
    assert "Godot 4" in sokoban["description"] and "sokoban" in sokoban["metadata"]["keywords"]
    assert sokoban["metadata"]["agent_timeout_sec"] == 7200.0 and sokoban["metadata"]["memory_mb"] == 2048
    for task in tasks.values():
        assert task["grading"] == "grader_unavailable"
        assert any("Godot" in r for r in task["reasons"]) and any("judge model" in r for r in task["reasons"])
    human = hoh_bench("list", GAMECRAFT)
    assert human.returncode == 0 and "grader_unavailable 3" in human.stdout


@pytest.mark.skipif(not GAMECRAFT.is_dir(), reason="the shared GameCraft-Bench sample is not beside the repo")
def test_a_run_on_an_ungradable_suite_records_grader_unavailable_without_running_the_agent(tmp_path):
    out = tmp_path / "out"
    result = hoh_bench("run", GAMECRAFT, "--harness", "scripted", "-o", out, "-q")
    assert result.returncode == 0, result.stderr
    for path in (out / "trials").glob("*/trial.json"):
        rec = json.loads(path.read_text())
        assert rec["outcome"] == "grader_unavailable" and "Godot" in rec["error"]
        assert rec["scores"] == [] and rec["final_score"] is None  # not a zero
        assert not (path.parent / "workspace").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["outcomes"] == {"grader_unavailable": 3} and summary["scored"] == 0


def test_docker_environments_and_missing_judge_keys_are_grader_unavailable(tmp_path, monkeypatch):
    task_dir = shutil.copytree(EXAMPLES / "rpn", tmp_path / "rpn")
    (task_dir / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\nWORKDIR /app\n")
    env = 'env = { JUDGE_KEY = "${HOH_TEST_JUDGE_KEY}", MODE = "${HOH_TEST_MODE:-strict}" }\n'
    toml = (task_dir / "task.toml").read_text().replace("[verifier]\n", "[verifier]\n" + env)
    (task_dir / "task.toml").write_text(toml)
    monkeypatch.delenv("HOH_TEST_JUDGE_KEY", raising=False)
    task = load_task(task_dir)
    assert task.valid and task.workdir == "/app"
    reasons = unavailable_reasons(task)
    assert any(r.startswith("needs Docker") for r in reasons)
    assert any("$HOH_TEST_JUDGE_KEY" in r for r in reasons)
    assert not any("Docker" in r for r in unavailable_reasons(task, grade_on_host=True))
    monkeypatch.setenv("HOH_TEST_JUDGE_KEY", "k")
    assert resolve_env(task.verifier_env) == ({"JUDGE_KEY": "k", "MODE": "strict"}, [])


def test_invalid_tasks_carry_their_reasons(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "instruction.md").write_text("   \n")
    task = load_task(tmp_path / "a")
    assert not task.valid
    assert set(task.problems) == {"no task.toml", "instruction.md is empty", "no verifier: tests/test.sh is missing"}
    with pytest.raises(UsageError, match="not found"):
        load_suite(str(tmp_path / "missing"))
    with pytest.raises(UsageError, match="not a valid regular expression"):
        load_suite(str(EXAMPLES), "(")


def test_rewards(tmp_path):
    assert read_rewards(tmp_path) == ({}, "the verifier wrote neither reward.txt nor reward.json")
    (tmp_path / "reward.json").write_text('{"tests": 0.5, "style": 1}')
    rewards, problem = read_rewards(tmp_path)
    assert problem is None and score_of(rewards) == 0.75  # no `reward` key: the mean
    (tmp_path / "reward.txt").write_text("0.25\n")
    assert read_rewards(tmp_path) == ({"reward": 0.25}, None)  # reward.txt wins, as in Harbor
    (tmp_path / "reward.txt").write_text("lots")
    assert "not a number" in read_rewards(tmp_path)[1]
    (tmp_path / "reward.txt").unlink()
    (tmp_path / "reward.json").write_text('{"reward": "high"}')
    assert "not a finite number" in read_rewards(tmp_path)[1]


def _verifier_task(tmp_path: Path, test_sh: str, timeout: float = 30) -> Path:
    task_dir = tmp_path / "task"
    (task_dir / "tests").mkdir(parents=True)
    (task_dir / "task.toml").write_text(f'[task]\nname = "t"\n[verifier]\ntimeout_sec = {timeout}\n'
                                        '[environment]\nallow_internet = false\n')
    (task_dir / "instruction.md").write_text("# t\n")
    (task_dir / "tests" / "test.sh").write_text(test_sh)
    return task_dir


@needs_bwrap
def test_the_verifier_sees_only_its_copies(tmp_path):
    # A host directory outside /tmp (which the sandbox replaces): only read-only there keeps it out.
    canary = Path("/var/tmp") / f"hoh-canary-{tmp_path.name}-{id(tmp_path)}"
    canary.unlink(missing_ok=True)
    task = load_task(_verifier_task(tmp_path, f"""
        set -u
        pwd > /logs/verifier/pwd.txt
        cat /workspace/app.txt > /logs/verifier/seen.txt
        echo changed > /workspace/app.txt              # its own copy: allowed
        echo escaped > {canary} 2>/dev/null && echo wrote-host >> /logs/verifier/seen.txt
        echo hi > /tmp/scratch && echo tmp-ok >> /logs/verifier/seen.txt
        printf '{{"reward": 0.5, "extra": 1}}' > /logs/verifier/reward.json
        exit 3
        """))
    candidate = tmp_path / "grade" / "workspace"
    candidate.mkdir(parents=True)
    (candidate / "app.txt").write_text("candidate\n")
    try:
        grade = grade_harbor(task, candidate, tmp_path / "grade")
        assert not canary.exists()
    finally:
        canary.unlink(missing_ok=True)
    assert grade.status == "graded" and grade.score == 0.5 and grade.rewards == {"reward": 0.5, "extra": 1.0}
    assert grade.detail == "test.sh exit code 3"
    logs = tmp_path / "grade" / "logs" / "verifier"
    assert (logs / "pwd.txt").read_text().strip() == "/workspace"
    assert (logs / "seen.txt").read_text().split() == ["candidate", "tmp-ok"]  # the host was read-only
    assert (candidate / "app.txt").read_text() == "changed\n"


@needs_bwrap
def test_verifier_errors_and_timeouts_are_graded_zero_with_the_reason(tmp_path):
    task = load_task(_verifier_task(tmp_path, "echo broken >&2; exit 1\n"))
    (tmp_path / "g1" / "workspace").mkdir(parents=True)
    grade = grade_harbor(task, tmp_path / "g1" / "workspace", tmp_path / "g1")
    assert grade.status == "verifier_error" and grade.score == 0.0
    assert "neither reward.txt nor reward.json" in grade.detail and "broken" in grade.detail

    shutil.rmtree(tmp_path / "task")
    task = load_task(_verifier_task(tmp_path, "sleep 30\n", timeout=1))
    (tmp_path / "g2" / "workspace").mkdir(parents=True)
    grade = grade_harbor(task, tmp_path / "g2" / "workspace", tmp_path / "g2")
    assert grade.status == "verifier_timeout" and grade.score == 0.0 and grade.seconds < 15


# ---- ProgramBench --------------------------------------------------------------------------------
def test_programbench_tasks_come_from_its_package():
    pytest.importorskip("programbench", reason="ProgramBench is optional: pip install programbench")
    result = hoh_bench("list", "programbench", "--json")
    assert result.returncode == 0, result.stderr
    tasks = {t["id"]: t for t in json.loads(result.stdout)["tasks"]}
    from programbench.submission import benchmark_instances
    assert set(tasks) == set(benchmark_instances())  # every instance, without the package's fixtures
    jq = next(t for i, t in tasks.items() if i.startswith("jqlang__jq"))
    assert jq["metadata"]["language"] == "c" and jq["metadata"]["tests"] > 100
    assert jq["metadata"]["image"].startswith("programbench/jqlang_1776_jq")
    if docker_engine_problem():  # CI runs a Docker engine now (for the Harbor tests)
        assert jq["grading"] == "grader_unavailable" and "needs Docker" in jq["reasons"][0]
    else:
        assert jq["grading"] == "ok"
    filtered = hoh_bench("list", "programbench:^jqlang", "--json")
    assert [t["id"] for t in json.loads(filtered.stdout)["tasks"]] == [jq["id"]]


def test_programbench_submission_format_and_scoring_through_the_package(tmp_path):
    pytest.importorskip("programbench", reason="ProgramBench is optional: pip install programbench")
    import programbench
    from programbench.submission import score_instance

    from hoh.bench.programbench import instances, package_submission, score_eval
    iid = "testorg__calculator.abc1234"
    candidate = tmp_path / "candidate"
    (candidate / "src").mkdir(parents=True)
    (candidate / "compile.sh").write_text("#!/bin/sh\ncp src/calc.sh executable\n")
    (candidate / "src" / "calc.sh").write_text("echo 4\n")
    archive = package_submission(candidate, tmp_path / "run", iid)
    assert archive == tmp_path / "run" / iid / "submission.tar.gz"
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == ["compile.sh", "src", "src/calc.sh"]

    fixtures = Path(programbench.__file__).parent / "data" / "test_runs"
    for kind in ("correct", "incorrect"):
        eval_json = fixtures / kind / iid / f"{iid}.eval.json"
        grade = score_eval(eval_json, iid)
        assert grade.status == "graded"
        assert grade.score == score_instance(eval_json, instances(include_fixtures=True)[iid])
        assert grade.rewards["tests_passed"] == (3.0 if kind == "correct" else 0.0)
