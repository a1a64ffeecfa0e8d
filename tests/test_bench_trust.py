"""Benchmark results a user can trust (tests/data/bench_trust, run by the `bench_trust` fixture on Docker): a
harness that never reaches its model is an error with the reason, a trial that dies after loop 1 leaves loops
2..T not run with its exception, a verifier that cannot run here makes its task *not gradable here* (its
reference solution scores 0) and keeps it out of the means, and a task graded on two keys shows both keys
everywhere. Each is asserted on what `hoh bench` persisted (the records Harbor's job dirs give, summary.json,
summary.md) and on what it printed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from harbor_env import TRUST, bench_trust, harbor  # noqa: F401 - fixtures

from hoh.bench.causes import cause_of, telling_lines
from hoh.bench.records import records_of
from hoh.bench.results import load_run

UNKNOWN_PROVIDER = 'Unknown provider "endpoint"'


def records(out: Path) -> dict[str, dict]:
    paths, settings = load_run(out)
    found, _ = records_of(paths, settings)
    return {r["task"]: r for r in found}


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def printed(out: Path) -> dict:
    return json.loads((out.parent / f"{out.name}.json").read_text())


def states(record: dict) -> list[str]:
    return [entry["state"] for entry in record["loops"]]


def test_a_harness_that_never_reaches_its_model_is_an_error_with_the_reason_not_a_score(bench_trust):
    # the bench's own policy goes on past a failed role: the loop is `failed`, with the role's reason
    one = records(bench_trust["one"])["no-model"]
    assert one["outcome"] == "error" and states(one) == ["failed"] and one["scores"] == [None]
    assert UNKNOWN_PROVIDER in one["loops"][0]["error"] and one["loops"][0]["hoh_status"] == "planner_failed"
    assert one["loops"][0]["rewards"] is None and one["final_score"] is None
    assert not (bench_trust["one"] / "jobs" / "no-model.grade").exists()  # nothing to grade: A_0 is not its score
    # with a failed role stopping the run, no loop was finished: each is not run, with the same reason
    stop = records(bench_trust["stop"])["no-model"]
    assert stop["outcome"] == "error" and states(stop) == ["not_run"] * 3
    assert all(UNKNOWN_PROVIDER in entry["error"] for entry in stop["loops"])
    # never averaged in: the mean is twokeys' alone, and the error is listed with its cause
    shown = summary(bench_trust["one"])
    assert shown["scored"] == 1 and shown["hoh_at"][0] == {"loop": 1, "mean": 0.75, "n": 1, "pass_rate": 0.0}
    [error] = [e for e in shown["errors"] if e["task"] == "no-model"]
    assert UNKNOWN_PROVIDER in error["cause"] and UNKNOWN_PROVIDER in error["error"]
    out = printed(bench_trust["one"])
    assert out["exit"] == 1
    assert "failed" in out["stdout"] and UNKNOWN_PROVIDER in out["stdout"]


def test_a_trial_that_dies_after_loop_1_leaves_the_later_loops_not_run_with_its_exception(bench_trust):
    dies = records(bench_trust["stop"])["dies"]
    assert states(dies) == ["graded", "not_run", "not_run"] and dies["scores"] == [1.0, None, None]
    assert dies["outcome"] == "error" and dies["final_score"] is None
    exception = "NonZeroAgentExitCodeError: hoh stopped after 1 loops"
    for entry in dies["loops"][1:]:
        assert exception in entry["error"] and "crashing on purpose" in entry["error"]
    # in every report: the summary's errors, summary.md's row and full text, the printed table
    shown = summary(bench_trust["stop"])
    assert any(e["task"] == "dies" and exception in e["error"] for e in shown["errors"])
    [row] = [t for t in shown["tasks"] if t["task"] == "dies"]
    assert row["states"] == ["graded", "not_run", "not_run"] and not row["scored"]
    md = (bench_trust["stop"] / "summary.md").read_text()
    dies_row = next(line for line in md.splitlines() if line.startswith("| dies |"))
    assert "| 1.000 | not run | not run |" in dies_row and exception in dies_row
    assert "### dies (error)" in md
    table = printed(bench_trust["stop"])["stdout"]  # its cause column wraps: the exception's name fits a line
    assert "not run" in table and "NonZeroAgentExitCodeError" in table


def test_a_verifier_that_needs_an_unreachable_host_makes_its_task_not_gradable_here(bench_trust):
    task = records(bench_trust["stop"])["offline-verifier"]
    assert task["outcome"] == "not_gradable" and states(task) == ["not_run"] * 3
    calibration = task["calibration"]
    assert calibration["state"] == "not_gradable" and calibration["rewards"] == {"reward": 0.0}
    assert any("Name or service not known" in line for line in calibration["telling"])
    assert "Name or service not known" in task["cause"] and "reference solution scores reward 0 of 1" in task["cause"]
    # its agent trial was not started: it could not have been graded either
    assert not (bench_trust["stop"] / "jobs" / "offline-verifier.agent").exists()
    shown = summary(bench_trust["stop"])
    assert shown["calibration"] == {"gradable": 2, "no_solution": 2, "not_gradable": 1}
    assert shown["outcomes"]["not_gradable"] == 1
    scored = [t["task"] for t in shown["tasks"] if t["scored"]]
    assert "offline-verifier" not in scored and shown["hoh_at"][0]["n"] == len(scored)
    assert "offline-verifier (not_gradable)" in (bench_trust["stop"] / "summary.md").read_text()


def test_bench_check_grades_only_the_reference_solutions(harbor, bench_trust, tmp_path):
    # the calibration jobs of the run are Harbor's: `hoh bench check` does only this, in its own OUT
    checked = harbor.hoh("bench", "check", TRUST, "-i", "offline-verifier", "-i", "dies", "-o", tmp_path / "check",
                         "--json")
    assert checked.returncode == 1, checked.stderr[-2000:]  # a task is not gradable here
    found = {t["task"]: t for t in json.loads(checked.stdout)["tasks"]}
    assert found["dies"]["state"] == "no_solution"
    assert found["offline-verifier"]["state"] == "not_gradable"
    assert any("Name or service not known" in line for line in found["offline-verifier"]["telling"])
    assert not list((tmp_path / "check" / "jobs").glob("*.agent"))


def test_a_two_key_task_shows_both_keys_everywhere(harbor, bench_trust, tmp_path):
    assert records(bench_trust["stop"])["twokeys"]["calibration"]["rewards"] == {"correctness": 1.0,
                                                                                  "performance": 1.0}
    task = records(bench_trust["stop"])["twokeys"]
    assert [entry["rewards"] for entry in task["loops"]] == [{"correctness": 1.0, "performance": 0.5}] + \
        [{"correctness": 1.0, "performance": 1.0}] * 2
    assert task["outcome"] == "completed" and task["scores"] == [0.75, 1.0, 1.0]  # no `reward`: the keys' mean
    shown = summary(bench_trust["stop"])
    assert shown["headline"] == "reward, else the mean of correctness, performance"  # early reports `reward`
    assert [e["mean"] for e in shown["by_key"]["performance"]] == [0.5, 1.0, 1.0]
    assert [e["mean"] for e in shown["by_key"]["correctness"]] == [1.0, 1.0, 1.0]
    md = (bench_trust["stop"] / "summary.md").read_text()
    assert "| 0.750 (correctness 1.00, performance 0.50) | 1.000 (correctness 1.00, performance 1.00) |" in md
    assert "`performance`: @1 0.500 (n=1) → @2 1.000 (n=1) → @3 1.000 (n=1)" in md
    # --metric chooses the headline (on a copy: the report rewrites the run's summary, the other tests read it);
    # one no task reports is refused in one line, and nothing is rewritten
    run = shutil.copytree(bench_trust["stop"], tmp_path / "stop", symlinks=True)
    by_performance = harbor.hoh("bench", "report", run, "--metric", "performance", "--json")
    assert by_performance.returncode == 0, by_performance.stderr
    chosen = json.loads(by_performance.stdout)
    assert chosen["headline"] == "performance" and [e["mean"] for e in chosen["hoh_at"]] == [0.5, 1.0, 1.0]
    assert chosen["scored"] == 1  # early reports no `performance`: unscored under this headline
    before = (run / "summary.json").read_bytes()
    assert json.loads(before)["headline"] == "performance"
    bad = harbor.hoh("bench", "report", run, "--metric", "speed")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().count("\n") == 0 and "--metric speed" in bad.stderr and "correctness" in bad.stderr
    assert (run / "summary.json").read_bytes() == before


def test_compare_says_where_the_runs_do_not_match(harbor, bench_trust):
    result = harbor.hoh("bench", "report", bench_trust["stop"], "--compare", bench_trust["one"], "--json")
    assert result.returncode == 0, result.stderr
    [cmp] = json.loads(result.stdout)["comparisons"]
    rows = {row["metric"]: row for row in cmp["rows"]}
    assert cmp["matched"] == ["twokeys"]  # early is scored in A alone, no-model in neither
    assert rows["HoH@1"] == {"metric": "HoH@1", "a": 0.75, "b": 0.75, "delta": 0.0}
    for k in (2, 3):  # no HoH@2 or @3 for a one-loop run
        assert rows[f"HoH@{k}"]["a"] == 1.0 and rows[f"HoH@{k}"]["b"] is None and rows[f"HoH@{k}"]["delta"] is None
    assert rows["performance @1"] == {"metric": "performance @1", "a": 0.5, "b": 0.5, "delta": 0.0}
    assert any("different tasks" in note for note in cmp["notes"])
    assert any("A ran 3 loops and B 1" in note for note in cmp["notes"])
    text = harbor.hoh("bench", "report", bench_trust["stop"], "--compare", bench_trust["one"])
    assert "note: A ran 3 loops and B 1" in text.stdout


def test_a_loop_after_the_run_completed_carries_the_last_grade(bench_trust):
    early = records(bench_trust["stop"])["early"]
    assert [(e["state"], e["graded_loop"], e["score"]) for e in early["loops"]] == \
        [("graded", 1, 1.0), ("graded", 2, 1.0), ("carried", 2, 1.0)]
    assert [e["hoh_status"] for e in early["loops"]] == ["pass", "complete", None]
    assert early["outcome"] == "completed" and "hoh stopped (complete) before loop 3" in early["loops"][2]["note"]


def test_calibration_of_a_suite_without_reference_solutions_is_refused_in_one_line(harbor, tmp_path):
    result = harbor.hoh("bench", "check", TRUST / "dies", "-o", tmp_path / "out")
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0
    assert "no task" in result.stderr and "reference solution" in result.stderr
    assert not (tmp_path / "out").exists()


# ---- causes, without Harbor --------------------------------------------------------------------------------
COMPOSE_FAILURE = (
    "RuntimeError: Docker compose command failed for environment t. Command: docker compose -p t -f "
    "/x/docker-compose-build.yaml up --detach --wait. Return code: 1. Stdout: #5 [2/3] RUN apt-get install -y "
    "ffmpeg\\n#5 0.61 E: Unable to locate package ffmpeg\\n#5 ERROR: process \"/bin/sh -c apt-get install -y "
    "ffmpeg\" did not complete successfully: exit code: 100. Stderr: None")


def test_an_error_note_leads_with_its_cause_and_keeps_the_full_text():
    assert cause_of(COMPOSE_FAILURE) == "RuntimeError: #5 0.61 E: Unable to locate package ffmpeg"
    assert cause_of("ValueError: bad option\nmore") == "ValueError: bad option"
    assert cause_of("") is None


@pytest.mark.parametrize("output, line", [
    ("curl: (6) Could not resolve host: astral.sh", "curl: (6) Could not resolve host: astral.sh"),
    ("Traceback (most recent call last):\n  File \"/t.py\", line 1, in <module>\n    import gamecraft_bench\n"
     "ModuleNotFoundError: No module named 'gamecraft_bench'",
     "ModuleNotFoundError: No module named 'gamecraft_bench'"),
    ("test.sh: line 3: godot: command not found", "test.sh: line 3: godot: command not found"),
])
def test_telling_lines_are_the_verifier_s_own_words(output, line):
    assert telling_lines(output) == [line]
