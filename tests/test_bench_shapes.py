"""Tasks of the shapes real suites use (tests/data/bench_shapes/), each graded or errored by `hoh bench`
exactly as a plain `harbor run` of the same task with the same agent grades it: several reward keys,
reward.txt beside reward.json, a prebuilt `docker_image`, a separate verifier environment, a compose
sidecar, `network_mode = "no-network"` (which Harbor's Docker environment cannot enforce here), a
verifier whose environment cannot start, `[[steps]]`, and a loop that leaves no candidate.

`hoh bench` runs one loop, as the plain run does (`harbor run --agent hoh.harbor:HohAgent`, whose own
verifier grades loop 1's candidate in place); `late`'s loop 1 Developer fails.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import REPO
from harbor_env import harbor  # noqa: F401 - fixture

from hoh.bench.records import records_of
from hoh.bench.results import load_run, trial_results

SHAPES = REPO / "tests" / "data" / "bench_shapes"
SCORED = {"multikey": {"reward": 1.0, "docs": 0.0}, "both-files": {"reward": 1.0}, "prebuilt": {"reward": 1.0},
          "separate": {"reward": 1.0}, "sidecar": {"reward": 1.0}}
ERRORS = ("broken-verifier", "no-network", "steps")


@pytest.fixture(scope="module")
def shapes(harbor, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("shapes")
    # A plain Harbor job stops at the no-network task (see below), so the plain run covers it alone.
    plain_suite = root / "plain-suite"
    shutil.copytree(SHAPES, plain_suite, ignore=lambda d, names: ["no-network"] if Path(d) == SHAPES else [])
    bench = harbor.hoh_async("bench", "run", SHAPES, "--harness", "scripted", "--loops", "1", "--env", "docker",
                             "-o", root / "bench", "-j", "4", "-q")
    plain = harbor.run(plain_suite, root / "jobs", "plain", "--agent", "hoh.harbor:HohAgent", "--ak",
                       "harness=scripted", "--ak", "loops=1", "-n", "4")
    no_network = harbor.cli("run", "-p", SHAPES / "no-network", "--agent", "hoh.harbor:HohAgent", "--ak",
                            "harness=scripted", "--env", "docker", "-o", root / "jobs", "--job-name", "no-network",
                            "-y", timeout=600)
    stdout, stderr = bench.communicate(timeout=900)
    assert bench.returncode == 1, (stdout[-3000:], stderr[-3000:])  # errors were reported, not hidden
    paths, settings = load_run(root / "bench")
    records, _ = records_of(paths, settings)
    return {"bench": {r["task"]: r for r in records}, "plain": {t.dir.name.split("__")[0]: t for t in plain},
            "no_network": no_network, "out": root / "bench", "stdout": stdout}


def test_scored_shapes_get_the_rewards_a_plain_harbor_run_gives(shapes):
    for task, rewards in SCORED.items():
        record, plain = shapes["bench"][task], shapes["plain"][task]
        assert plain.result["verifier_result"]["rewards"] == rewards, task
        assert record["loops"][0]["rewards"] == rewards, task
        assert record["outcome"] == "completed" and record["error"] is None, task
    # every reward key is kept: HoH@t per key where a suite has several
    multikey = shapes["bench"]["multikey"]
    assert multikey["scores"] == [1.0]
    assert "docs: @1 0.000" in shapes["stdout"] and "reward: @1 1.000" in shapes["stdout"]


def test_both_reward_files_are_read_as_harbor_reads_them(shapes):
    # the verifier wrote reward.txt = 0.25 and reward.json = {"reward": 1}: Harbor reads reward.json
    trial = next(d for d, r in trial_results(shapes["out"] / "jobs" / "both-files.grade"))
    assert (trial / "verifier" / "reward.txt").read_text().strip() == "0.25"
    assert shapes["bench"]["both-files"]["loops"][0]["score"] == 1.0


def test_a_separate_verifier_grades_the_replayed_candidate_as_an_artifact(shapes):
    [(_, grade)] = trial_results(shapes["out"] / "jobs" / "separate.grade")
    assert grade["verifier_environment_mode"] == "separate" and grade["verifier_result"]["rewards"] == {"reward": 1.0}


def test_a_loop_whose_role_failed_is_an_error_and_never_graded_as_the_starting_state(shapes):
    late = shapes["bench"]["late"]
    assert [(e["state"], e["hoh_status"], e["graded_loop"], e["score"]) for e in late["loops"]] == \
        [("failed", "developer_failed", None, None)]
    assert late["outcome"] == "error" and late["error"].startswith("loop 1: developer failed after")
    # the plain run's verifier graded what the failed loop left, A_0 as the task ships it: 0, a silent zero
    assert shapes["plain"]["late"].result["verifier_result"]["rewards"] == {"reward": 0.0}
    assert not (shapes["out"] / "jobs" / "late.grade").exists()  # nothing to grade: A_0 is not its score
    assert [e["state"] for e in shapes["bench"]["multikey"]["loops"]] == ["graded"]


def test_errors_carry_the_reason_harbor_gives_and_are_never_scores(shapes):
    bench = shapes["bench"]
    for task in ERRORS:
        assert bench[task]["outcome"] == "error" and bench[task]["scores"] == [None], task
    # a verifier whose environment cannot start: the same exception, the daemon's same reason
    plain = shapes["plain"]["broken-verifier"].result["exception_info"]
    reason = re.search(r"Error response from daemon: [^\n]*", plain["exception_message"]).group(0)
    assert bench["broken-verifier"]["error"].startswith(plain["exception_type"] + ": ")
    assert reason in bench["broken-verifier"]["error"]
    assert shapes["plain"]["broken-verifier"].result["verifier_result"] is None
    # [[steps]]: the hoh agent refuses a multi-step task, in one line, before anything is installed
    plain = shapes["plain"]["steps"].exception
    assert plain[0] == "TaskEnvironmentError" and "multi-step tasks ([[steps]])" in plain[1]
    assert bench["steps"]["error"] == f"{plain[0]}: {plain[1]}"


def test_no_network_cannot_run_on_docker_here_and_says_why(shapes):
    # Harbor's Docker environment enforces no-network through an egress sidecar after probing the
    # kernel with a pinned alpine image; offline that probe fails, and Harbor refuses the task while
    # creating the trial, which stops its whole job. hoh bench runs each task as its own job, so
    # only this task is an error, with Harbor's own message.
    plain = shapes["no_network"]
    assert plain.returncode != 0
    message = "ValueError: network_mode='no-network' is not supported by EnvironmentType.DOCKER environment."
    assert message in plain.stdout + plain.stderr
    assert shapes["bench"]["no-network"]["error"].startswith(f"Harbor stopped before the trial finished: {message}")
