"""The Runtime's contracts, each shown with the scripted agent misbehaving in a real subprocess."""

from __future__ import annotations

import os

from conftest import GREET, mini_script

from hoh.resources import schema_errors

# These tests exercise hoh's guard by itself: with the OS jail on, the writes would not even happen
# (tests/test_hostile.py holds the same behaviours jailed).
GUARD_ONLY = {"sandbox.mode": "off"}


def test_a_clean_loop_persists_valid_state(project):
    report = project.build()
    assert report.status == "finished"
    for name, schema in (("plan", "plan"), ("developer", "developer"), ("candidate", "candidate"), ("qa", "qa")):
        assert schema_errors(schema, project.loop_json(1, name)) == []
    candidate = project.loop_json(1, "candidate")
    assert project.loop_json(1, "qa")["candidate_id"] == candidate["candidate_id"]
    assert candidate["candidate_id"] == f"loop-0001-{candidate['tree'][:12]}"
    assert (project.ws / "project" / "greet.py").read_text().startswith(GREET)
    assert (project.state("loops", "0001", "evidence", "T1.A1.txt")).read_text().count("hello bob") == 1
    manifest = project.state("loops", "0001", "roles", "qa", "attempt-1", "inputs.json")
    assert schema_errors("inputs", __import__("json").loads(manifest.read_text())) == []


def test_schema_violation_is_retried_with_the_errors_then_accepted(make_project):
    script = mini_script(1)
    good = script["loops"][1]["developer"]
    script["loops"][1]["developer"] = [{"reply_text": "I am done!"},
                                       {**good, "reply": {**good["reply"], "summary": ""}},
                                       {**good, "fenced": True}]
    p = make_project(script)
    assert p.build().status == "finished"
    first, second, third = (p.attempt_result(1, "developer", n) for n in (1, 2, 3))
    assert not first["ok"] and "not a JSON object" in first["errors"][0]
    assert not second["ok"] and any("summary" in e for e in second["errors"])
    assert third["ok"]
    retry_prompt = p.state("loops", "0001", "roles", "developer", "attempt-2", "prompt.md").read_text()
    assert "not a JSON object" in retry_prompt and "hoh:role=developer loop=1 attempt=2" in retry_prompt
    assert p.loop_json(1, "developer")["summary"] == "wrote greet.py"


def test_retries_exhausted_stops_the_run_and_passes_nothing(make_project):
    script = mini_script(1)
    script["loops"][1]["qa"] = {"reply_text": "{not json"}
    p = make_project(script)
    report = p.build(sets={"policy.max_retries": 1})
    assert report.status == "failed" and "qa failed in loop 1" in report.error
    assert not p.state("loops", "0001", "qa.json").exists()
    assert [p.attempt_result(1, "qa", n)["ok"] for n in (1, 2)] == [False, False]
    events = [e["event"] for e in p.journal()]
    assert "role_failed" in events and "loop_finished" not in events
    assert p.state("ledger.json").exists() is False


def test_retries_exhausted_under_continue_policy_records_a_failed_loop(make_project):
    script = mini_script(2)
    script["loops"][1]["qa"] = {"reply_text": "nope"}
    p = make_project(script)
    report = p.build(loops=2, sets={"policy.max_retries": 0, "policy.on_role_failure": "continue"})
    assert report.status == "finished"
    finished = [e for e in p.journal() if e["event"] == "loop_finished"]
    assert [(e["loop"], e["status"]) for e in finished] == [(1, "qa_failed"), (2, "pass")]


def test_wrong_candidate_id_is_rejected(make_project):
    script = mini_script(1)
    qa = script["loops"][1]["qa"]
    script["loops"][1]["qa"] = [{**qa, "reply": {"candidate_id": "loop-0001-000000000000"}}, qa]
    p = make_project(script)
    assert p.build().status == "finished"
    rejected = p.attempt_result(1, "qa", 1)
    assert any("frozen candidate is" in e for e in rejected["errors"])
    assert p.loop_json(1, "qa")["candidate_id"] == p.loop_json(1, "candidate")["candidate_id"]


def test_planner_write_into_project_is_detected_and_reverted(make_project):
    script = mini_script(2)
    planner = script["loops"][2]["planner"]
    script["loops"][2]["planner"] = [{**planner, "actions": [{"write": {"path": "greet.py", "content": "hacked"}},
                                                             {"write": {"path": "new.txt", "content": "x"}}]},
                                     planner]
    p = make_project(script)
    assert p.build(loops=2, sets=GUARD_ONLY).status == "finished"
    result = p.attempt_result(2, "planner", 1)
    assert not result["ok"] and result["violations"][0]["area"] == "project"
    assert set(result["violations"][0]["changes"]) == {"modified greet.py", "created new.txt"}
    # The Developer of loop 2 started from the real A_1, not from the Planner's edit.
    assert p.loop_json(2, "candidate")["parent"] == p.loop_json(1, "candidate")["commit"]
    assert not (p.ws / "project" / "new.txt").exists()
    assert "hacked" not in (p.ws / "project" / "greet.py").read_text()


def test_qa_writes_into_project_and_candidate_are_reverted(make_project):
    script = mini_script(1)
    qa = script["loops"][1]["qa"]
    script["loops"][1]["qa"] = [
        {**qa, "actions": [{"write": {"path": "${project_dir}/greet.py", "content": "fixed by QA"}}]},
        {**qa, "actions": [{"write": {"path": "greet.py", "content": "patched copy"}}]},
        qa]
    p = make_project(script)
    assert p.build(sets=GUARD_ONLY).status == "finished"
    first, second = p.attempt_result(1, "qa", 1), p.attempt_result(1, "qa", 2)
    assert first["violations"] == [{"area": "project", "changes": ["modified greet.py"]}]
    assert second["violations"] == [{"area": "candidate copy", "changes": ["modified greet.py"]}]
    assert (p.ws / "project" / "greet.py").read_text().startswith(GREET)
    assert p.loop_json(1, "qa")["verdict"] == "pass"


def test_any_role_writing_state_is_reverted(make_project):
    script = mini_script(1)
    dev = script["loops"][1]["developer"]
    script["loops"][1]["developer"] = [
        {**dev, "actions": dev["actions"] + [{"write": {"path": "${workspace}/state/loops/0001/plan.json", "content": "{}"}},
                                             {"run": "echo forged >> ${workspace}/state/journal.jsonl"}]},
        dev]
    p = make_project(script)
    assert p.build(sets=GUARD_ONLY).status == "finished"
    result = p.attempt_result(1, "developer", 1)
    changes = sorted(c for v in result["violations"] for c in v["changes"])
    assert changes == ["modified journal.jsonl", "modified loops/0001/plan.json"]
    assert p.loop_json(1, "plan")["goal"] == "greeter, loop 1"
    assert "forged" not in p.state("journal.jsonl").read_text()


def test_evidence_refs_escaping_the_evidence_dir_are_rejected(make_project, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    script = mini_script(1)
    qa = script["loops"][1]["qa"]

    def citing(ref):
        return {**qa, "reply": {"findings": [{"title": "look", "severity": "note", "repro": "-",
                                              "evidence": [{"kind": "file", "ref": ref, "detail": ""}]}]}}
    link = {**citing("link.txt"), "actions": [{"run": f"ln -s {outside} ${{evidence_dir}}/link.txt"}]}
    script["loops"][1]["qa"] = [citing("../../../../spec.md"), citing(str(outside)), link, citing("missing.txt"), qa]
    p = make_project(script)
    assert p.build(sets={"policy.max_retries": 4}).status == "finished"
    errors = [p.attempt_result(1, "qa", n)["errors"] for n in (1, 2, 3, 4)]
    assert "must be a relative path" in errors[0][0]
    assert "must be a relative path" in errors[1][0]
    assert "is a symlink" in errors[2][0]
    assert "does not exist" in errors[3][0]


def test_pass_verdict_with_a_failed_criterion_is_rejected(make_project):
    script = mini_script(1)
    script["loops"][1]["qa"] = [
        {"checks": [{"id": "T1.A1", "run": "python3 greet.py bob", "expect_stdout": "nope"}], "reply": {"verdict": "pass"}},
        {"checks": [{"id": "T1.A1", "run": "python3 greet.py bob", "expect_stdout": "nope"}]}]
    p = make_project(script)
    assert p.build().status == "finished"
    assert any("verdict 'pass' is impossible" in e for e in p.attempt_result(1, "qa", 1)["errors"])
    assert p.loop_json(1, "qa")["verdict"] == "fail"


def test_qa_must_cover_each_acceptance_id_once(make_project):
    script = mini_script(1)
    qa = script["loops"][1]["qa"]
    script["loops"][1]["qa"] = [{"checks": qa["checks"] * 2}, {"checks": []}, qa]
    p = make_project(script)
    assert p.build().status == "finished"
    assert any("more than once" in e for e in p.attempt_result(1, "qa", 1)["errors"])
    assert any("missing: T1.A1" in e for e in p.attempt_result(1, "qa", 2)["errors"])


def test_crash_and_idle_hang_are_typed_outcomes_and_retried(make_project):
    script = mini_script(1)
    dev = script["loops"][1]["developer"]
    script["loops"][1]["developer"] = [{"actions": [{"crash": 3}]}, {"actions": [{"hang": True}]}, dev]
    p = make_project(script)
    assert p.build(sets={"timeouts.idle_seconds": 1.5}).status == "finished"
    crashed, hung = p.attempt_result(1, "developer", 1), p.attempt_result(1, "developer", 2)
    assert crashed["harness"]["outcome"] == "crashed" and crashed["harness"]["exit_code"] == 3
    assert hung["harness"]["outcome"] == "idle_timeout"
    assert p.attempt_result(1, "developer", 3)["ok"]


def test_warm_start_off_gives_the_developer_an_empty_project(make_project):
    script = mini_script(2)
    script["loops"][2]["developer"]["actions"] = [{"run": "ls -A | grep -v '^.git$' > /dev/null && exit 0 || touch WAS_EMPTY"},
                                                 *script["loops"][2]["developer"]["actions"]]
    p = make_project(script)
    assert p.build(loops=2, sets={"mechanisms.warm_start": False}).status == "finished"
    assert (p.ws / "project" / "WAS_EMPTY").exists()
    manifest = __import__("json").loads(p.state("loops", "0002", "roles", "developer", "attempt-1", "inputs.json").read_text())
    assert manifest["project"]["warm_start"] == "false" and manifest["mechanisms"]["warm_start"] is False
    assert os.path.exists(p.ws / "project" / "greet.py")
