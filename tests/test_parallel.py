"""Developers working at once (`policy.developers`, issue 27): the Planner's work packages, one Developer per
package on its own copy of A_{t-1}, the Runtime's merge in package order, QA on the merged candidate."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, mini_loop, run_hoh

from hoh import api
from hoh.records import Plan
from hoh.runtime.validate import check_packages
from hoh.store.merging import CONFLICT_MARKER

EXAMPLE = REPO / "examples" / "parallel"
REPLY = {"self_tests": [], "known_gaps": []}


def journal(ws: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (ws / "state" / "journal.jsonl").read_text().splitlines()]


def loop_file(ws: Path, t: int, *name: str) -> dict[str, Any]:
    return json.loads((ws / "state" / "loops" / f"{t:04d}").joinpath(*name).read_text())


def candidate_files(ws: Path, t: int) -> dict[str, bytes]:
    """The frozen candidate's files, read from hoh's history (not from any work tree)."""
    commit = loop_file(ws, t, "candidate.json")["commit"]
    git = ["git", "--git-dir", str(ws / "history.git")]
    names = subprocess.run([*git, "ls-tree", "-r", "--name-only", commit], capture_output=True, text=True,
                           check=True).stdout.split()
    return {n: subprocess.run([*git, "cat-file", "-p", f"{commit}:{n}"], capture_output=True, check=True).stdout
            for n in names}


def two_packages(shared: bool, merge: dict[str, Any] | None = None, sleep: float = 0.5) -> dict[str, Any]:
    """One loop of two packages: P1 writes a.py (and shared.txt), P2 writes b.py (and shared.txt when `shared`:
    the two sides conflict); `merge` is the merge attempt's script entry."""
    def task(n: int) -> dict[str, Any]:
        return {"id": f"T{n}", "title": f"part {n}", "details": "", "issues": [],
                "acceptance": [{"id": f"T{n}.A1", "condition": f"part {n} prints {n}", "method": "black-box"}]}

    def developer(n: int, name: str) -> dict[str, Any]:
        writes = [{"sleep": sleep}, {"write": {"path": f"{name}.py", "content": f"print({n})\n"}}]
        if shared or n == 1:
            writes.append({"write": {"path": "shared.txt", "content": f"line from P{n}\n"}})
        return {"actions": writes, "reply": {"summary": f"P{n} wrote {name}.py",
                                             "tasks": [{"id": f"T{n}", "status": "done", "notes": ""}], **REPLY}}

    loop: dict[str, Any] = {
        "planner": {"reply": {"goal": "two parts at once", "tasks": [task(1), task(2)], "preserve": [],
                              "out_of_scope": [],
                              "packages": [{"id": "P1", "tasks": ["T1"], "owns": ["a.py", "shared.txt"]},
                                           {"id": "P2", "tasks": ["T2"], "owns": ["b.py"]}]}},
        "developer@P1": developer(1, "a"), "developer@P2": developer(2, "b"),
        "qa": {"checks": [{"id": "T1.A1", "run": "python3 a.py", "expect_stdout": "1"},
                          {"id": "T2.A1", "run": "python3 b.py", "expect_stdout": "2"}]}}
    if merge is not None:
        loop["developer@merge-P2"] = merge
    return loop


RESOLVE = {"actions": [{"write": {"path": "shared.txt", "content": "line from P1\nline from P2\n"}}],
           "reply": {"summary": "kept both lines", "tasks": [{"id": "T2", "status": "done", "notes": ""}], **REPLY}}
LEAVE_MARKERS = {"reply": {"summary": "left it", "tasks": [{"id": "T2", "status": "done", "notes": ""}], **REPLY}}


def no_markers(files: dict[str, bytes]) -> None:
    assert not [n for n, data in files.items() if CONFLICT_MARKER.search(data)]


# ---- must show 1: the example, two packages at once, one merged candidate, QA on it --------------------------
def test_the_example_builds_two_packages_at_once_into_one_candidate_qa_accepts(tmp_path):
    ws = tmp_path / "ws"
    result = run_hoh("build", EXAMPLE / "spec.md", "--developers", "2", "--loops", "1", "-w", ws, "-q")
    assert result.returncode == 0, result.stderr
    assert "parallel work packages" in (EXAMPLE / "spec.md").read_text()
    candidate = loop_file(ws, 1, "candidate.json")
    assert candidate["packages"] == ["P1", "P2"]
    files = candidate_files(ws, 1)
    assert set(files) == {"length.py", "temp.py"}  # both packages' work in the one candidate
    qa = loop_file(ws, 1, "qa.json")
    assert qa["candidate_id"] == candidate["candidate_id"] and qa["verdict"] == "pass"
    merge = loop_file(ws, 1, "merge.json")
    assert merge["merged"] == [{"package": "P1", "how": "clean"}, {"package": "P2", "how": "clean"}]
    assert merge["tree"] == candidate["tree"] and merge["dropped"] == []
    # Both packages' attempts journaled as the developer's, with their package, and overlapping in time.
    events = journal(ws)
    spans = {}
    for e in events:
        if e["event"] in ("attempt_started", "attempt_finished") and e["role"] == "developer":
            spans.setdefault(e["package"], {})[e["event"]] = e["time"]
    assert set(spans) == {"P1", "P2"}
    p1, p2 = spans["P1"], spans["P2"]
    assert p1["attempt_started"] < p2["attempt_finished"] and p2["attempt_started"] < p1["attempt_finished"]
    for pid in ("P1", "P2"):
        attempt = ws / "state" / "loops" / "0001" / "roles" / f"developer-{pid}" / "attempt-1"
        assert json.loads((attempt / "inputs.json").read_text())["package"] == pid
        assert f"Your work package: {pid}" in (attempt / "prompt.md").read_text()
        assert loop_file(ws, 1, "packages", f"{pid}.json")["commit"]
    report = loop_file(ws, 1, "developer.json")
    assert [t["id"] for t in report["tasks"]] == ["T1", "T2"]
    status = api.status(ws)
    assert status["loops"][0]["attempts"]["developer"] == 2


def test_one_developer_stays_as_before(make_project):
    # policy.developers 1 (the default): no package, no packages dir, one developer role dir.
    p = make_project({"schema_version": 1, "loops": {1: mini_loop(1)}})
    assert p.build().status == "finished"
    loop = p.ws / "state" / "loops" / "0001"
    assert not (loop / "packages").exists() and not (loop / "merge.json").exists()
    assert "packages" not in p.loop_json(1, "candidate")
    assert sorted(d.name for d in (loop / "roles").iterdir()) == ["developer", "planner", "qa"]


# ---- must show 2: a conflict --------------------------------------------------------------------------------
def test_a_conflict_is_resolved_by_one_merge_attempt(make_project):
    p = make_project({"schema_version": 1, "loops": {1: two_packages(shared=True, merge=RESOLVE)}})
    assert p.build(sets={"policy.developers": 2}).status == "finished"
    merge = p.loop_json(1, "merge")
    assert merge["merged"] == [{"package": "P1", "how": "clean"}, {"package": "P2", "how": "resolved"}]
    files = candidate_files(p.ws, 1)
    assert files["shared.txt"] == b"line from P1\nline from P2\n" and {"a.py", "b.py"} <= set(files)
    no_markers(files)
    attempt = p.ws / "state" / "loops" / "0001" / "roles" / "developer-merge-P2" / "attempt-1"
    prompt = (attempt / "prompt.md").read_text()
    assert "Conflicting files: shared.txt" in prompt and "P1 wrote a.py" in prompt and "P2 wrote b.py" in prompt
    merged_by = [e for e in journal(p.ws) if e["event"] == "package_merged"]
    assert [(e["package"], e["how"]) for e in merged_by] == [("P1", "clean"), ("P2", "resolved")]
    assert p.loop_json(1, "qa")["verdict"] == "pass"


def test_a_conflict_left_unresolved_drops_the_package_with_its_reason(make_project):
    p = make_project({"schema_version": 1, "loops": {1: two_packages(shared=True, merge=LEAVE_MARKERS)}})
    assert p.build(sets={"policy.developers": 2}).status == "finished"
    merge = p.loop_json(1, "merge")
    assert merge["merged"] == [{"package": "P1", "how": "clean"}]
    [dropped] = merge["dropped"]
    assert dropped["package"] == "P2" and "conflict markers left in shared.txt" in dropped["reason"]
    files = candidate_files(p.ws, 1)
    assert files["shared.txt"] == b"line from P1\n" and "b.py" not in files  # never half of P2
    no_markers(files)
    assert p.loop_json(1, "candidate")["packages"] == ["P1"]
    report = p.loop_json(1, "developer")
    t2 = next(t for t in report["tasks"] if t["id"] == "T2")
    assert t2["status"] == "not_started" and "dropped" in t2["notes"]
    assert any("P2 dropped" in gap for gap in report["known_gaps"])
    assert [e["package"] for e in journal(p.ws) if e["event"] == "package_dropped"] == ["P2"]
    # QA judged the merged candidate: P2's criterion fails there.
    qa = p.loop_json(1, "qa")
    assert {c["id"]: c["status"] for c in qa["criteria"]} == {"T1.A1": "verified", "T2.A1": "failed"}


def test_a_merge_attempt_that_changes_other_files_drops_the_package(make_project):
    meddling = copy.deepcopy(RESOLVE)
    meddling["actions"].append({"write": {"path": "a.py", "content": "print('not P1')\n"}})
    p = make_project({"schema_version": 1, "loops": {1: two_packages(shared=True, merge=meddling)}})
    assert p.build(sets={"policy.developers": 2}).status == "finished"
    [dropped] = p.loop_json(1, "merge")["dropped"]
    assert "also changed a.py, outside its conflicts" in dropped["reason"]
    assert candidate_files(p.ws, 1)["a.py"] == b"print(1)\n"


# ---- bad input ------------------------------------------------------------------------------------------------
def plan_of(packages: list[dict[str, Any]], tasks: int = 2) -> Plan:
    return Plan.from_json({"schema_version": 1, "loop": 1, "goal": "g", "preserve": [], "out_of_scope": [],
                           "tasks": [{"id": f"T{n}", "title": "t", "details": "", "issues": [],
                                      "acceptance": [{"id": f"T{n}.A", "condition": "c", "method": "black-box"}]}
                                     for n in range(1, tasks + 1)],
                           "packages": packages})


@pytest.mark.parametrize("packages,developers,error", [
    ([{"id": "P1", "tasks": ["T1"], "owns": ["a"]}, {"id": "P2", "tasks": ["T2"], "owns": ["b"]},
      {"id": "P3", "tasks": [], "owns": ["c"]}], 2, "at most 2 packages"),
    ([{"id": "P1", "tasks": ["T1"], "owns": ["src/"]}, {"id": "P2", "tasks": ["T2"], "owns": ["src/x.py"]}], 2,
     "packages P1 and P2 overlap"),
    ([{"id": "P1", "tasks": ["T1", "T2"], "owns": ["a"]}, {"id": "P2", "tasks": ["T2"], "owns": ["b"]}], 2,
     "in several: T2"),
    ([{"id": "P1", "tasks": ["T1"], "owns": ["a"]}], 2, "in none: T2"),
    ([{"id": "P1", "tasks": ["T1"], "owns": ["../outside.py"]}, {"id": "P2", "tasks": ["T2"], "owns": ["b"]}], 2,
     "not a path inside the project"),
    ([{"id": "P1", "tasks": ["T1"], "owns": ["/etc/passwd"]}, {"id": "P2", "tasks": ["T2"], "owns": ["b"]}], 2,
     "not a path inside the project"),
    ([{"id": "P1", "tasks": ["T1"], "owns": ["a"]}, {"id": "P2", "tasks": ["T2"], "owns": ["b"]}], 1,
     "policy.developers > 1"),
])
def test_bad_packages_are_errors(packages, developers, error):
    assert any(error in e for e in check_packages(plan_of(packages), developers))


def test_good_packages_pass():
    assert check_packages(plan_of([{"id": "P1", "tasks": ["T1"], "owns": ["src/a/"]},
                                   {"id": "P2", "tasks": ["T2"], "owns": ["src/ab.py", "docs/"]}]), 2) == []


def test_a_plan_with_overlapping_packages_is_re_asked_with_the_errors(make_project):
    loop = two_packages(shared=False)
    bad = copy.deepcopy(loop["planner"])
    bad["reply"]["packages"][1]["owns"] = ["a.py"]
    loop["planner"] = [bad, loop["planner"]]
    p = make_project({"schema_version": 1, "loops": {1: loop}})
    assert p.build(sets={"policy.developers": 2}).status == "finished"
    rejected = p.attempt_result(1, "planner", 1)
    assert not rejected["ok"] and any("packages P1 and P2 overlap" in e for e in rejected["errors"])
    assert p.attempt_result(1, "planner", 2)["ok"]
    retry = (p.ws / "state/loops/0001/roles/planner/attempt-2/prompt.md").read_text()
    assert "packages P1 and P2 overlap" in retry
    assert set(candidate_files(p.ws, 1)) == {"a.py", "b.py", "shared.txt"}


def test_the_planner_is_told_about_packages_only_when_developers_may_work_at_once(make_project):
    p = make_project({"schema_version": 1, "loops": {1: two_packages(shared=False)}})
    assert p.build(sets={"policy.developers": 3}).status == "finished"
    prompt = (p.ws / "state/loops/0001/roles/planner/attempt-1/prompt.md").read_text()
    assert "up to 3 Developers at once" in prompt
    q = make_project({"schema_version": 1, "loops": {1: mini_loop(1)}}, name="q")
    assert q.build().status == "finished"
    assert "## Work packages" not in (q.ws / "state/loops/0001/roles/planner/attempt-1/prompt.md").read_text()


def test_developers_out_of_range_is_one_line(tmp_path):
    result = run_hoh("build", EXAMPLE / "spec.md", "--developers", "0", "-w", tmp_path / "ws", "-q")
    assert result.returncode == 2 and "developers" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "ws").exists()


def test_resume_developers_sets_the_policy(make_project):
    p = make_project({"schema_version": 1, "loops": {1: mini_loop(1), 2: two_packages(shared=False)}})
    assert p.build().status == "finished"
    result = run_hoh("resume", "-w", p.ws, "--loops", "1", "--developers", "2", "-q")
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load((p.ws / "hoh.yaml").read_text())["policy"]["developers"] == 2
    assert p.loop_json(2, "candidate")["packages"] == ["P1", "P2"]


def test_every_developer_failing_stops_the_run_and_the_resume_runs_them_again(make_project):
    loop = two_packages(shared=False, sleep=0.1)
    script = {"schema_version": 1, "loops": {1: copy.deepcopy(loop)}}
    for pid in ("P1", "P2"):
        script["loops"][1][f"developer@{pid}"] = {"reply_text": "not json"}
    p = make_project(script)
    report = p.build(sets={"policy.developers": 2, "policy.max_retries": 0})
    assert report.status == "failed" and "package P2: its Developer failed" in report.error
    [failed] = [e for e in journal(p.ws) if e["event"] == "role_failed" and "package" not in e]
    assert [e.split(":")[0] for e in failed["errors"]] == ["package P1", "package P2"]
    assert not any(e["event"] == "step_finished" and e["step"] in ("package:P1", "package:P2", "merge")
                   for e in journal(p.ws))
    p.script = {"schema_version": 1, "loops": {1: loop}}  # the Developers do their work this time
    (p.ws / "script.yaml").write_text(yaml.safe_dump(p.script, sort_keys=False))
    assert api.resume(p.ws).status == "finished"
    assert set(candidate_files(p.ws, 1)) == {"a.py", "b.py", "shared.txt"}
    roles = sorted(d.name for d in (p.ws / "state/loops/0001/roles").iterdir())
    assert "developer-P1.interrupted-1" in roles and "developer-P2.interrupted-1" in roles


def test_one_developer_failing_drops_its_package_and_the_other_goes_on(make_project):
    loop = two_packages(shared=False, sleep=0.1)
    loop["developer@P2"] = {"reply_text": "not json"}
    p = make_project({"schema_version": 1, "loops": {1: loop}})
    assert p.build(sets={"policy.developers": 2, "policy.max_retries": 0}).status == "finished"
    [dropped] = p.loop_json(1, "merge")["dropped"]
    assert dropped["package"] == "P2" and "its Developer failed after 1 attempt(s)" in dropped["reason"]
    assert set(candidate_files(p.ws, 1)) == {"a.py", "shared.txt"}
