"""Hostile executable checks: QA is untrusted, so is every check it hands the Runtime to run, forever.

A check that does not reproduce QA's own observation, one that tries to leave its jail (write the candidate,
write the host, reach the network), one that hangs: each is rejected with its reason (QA is told next loop),
never silently dropped, and the loop goes on. Runs as root and, through test_as_user.py, as a user.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import GREET, Project

SYSTEM_TARGET = "/usr/hoh-check-escaped"


def plan_of(acceptance: list[str]) -> dict:
    return {"goal": "greeter", "preserve": [], "out_of_scope": [],
            "tasks": [{"id": "T1", "title": "Greet", "details": "print hello NAME", "issues": [],
                       "acceptance": [{"id": a, "condition": f"condition {a}", "method": "black-box"}
                                      for a in acceptance]}]}


def greeter_loop(acceptance: list[str], checks: list[dict]) -> dict:
    return {"planner": {"reply": plan_of(acceptance)},
            "developer": {"actions": [{"write": {"path": "greet.py", "content": GREET}}],
                          "reply": {"summary": "greet.py", "tasks": [{"id": "T1", "status": "done", "notes": ""}],
                                    "self_tests": [], "known_gaps": []}},
            "qa": {"checks": checks}}


def test_hostile_checks_are_rejected_with_their_reason_and_the_loop_goes_on(tmp_path):
    host_target = tmp_path / "escaped-to-the-host"
    ok = {"run": "python3 greet.py bob", "expect_stdout": "hello bob"}
    checks = [
        {"id": "A1", **ok, "attach": {"expect": {"stdout": "hello alice"}}},  # not what QA saw
        {"id": "A2", **ok, "attach": {"command": "python3 greet.py bob && echo pwned > greet.py"}},
        # The first path is in the jail's private /tmp (the host's stays untouched); /usr is the host's, read-only.
        {"id": "A3", **ok, "attach": {"command": f"touch {host_target} {SYSTEM_TARGET} && python3 greet.py bob"}},
        {"id": "A4", **ok, "attach": {"command": "sleep 600; python3 greet.py bob", "timeout_s": 1}},
        {"id": "A5", **ok, "attach": {"command": "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 3)\""
                                                 " && python3 greet.py bob"}},
        {"id": "A7", **ok, "attach": True},  # the one honest check
    ]
    ids = [c["id"] for c in checks]
    honest = dict(checks[0], id="B1", attach=False)
    script = {"schema_version": 1, "loops": {1: greeter_loop(ids, checks), 2: greeter_loop(["B1"], [honest])}}
    project = Project(tmp_path, script)
    assert project.build(loops=2).status == "finished"

    first = project.loop_json(1, "qa")
    assert [c["id"] for c in first["criteria"] if "check" in c] == ids
    admitted = {a["item"]: a for a in project.loop_json(1, "checks")["checks"]}
    for item in ("A1", "A2", "A3", "A5"):
        assert not admitted[item]["admitted"]
        assert admitted[item]["reason"].startswith("it did not reproduce QA's observation on the candidate"), admitted[item]
    assert "expected 'hello alice'" in admitted["A1"]["reason"]
    assert "did not finish within its timeout of 1s" in admitted["A4"]["reason"]
    assert admitted["A7"]["admitted"] and admitted["A7"]["check_id"] == "C-0001"
    # Nothing left the jail: the candidate, the project and the host are as they were.
    assert not host_target.exists() and not Path(SYSTEM_TARGET).exists()
    assert (project.ws / "project" / "greet.py").read_text() == GREET
    assert "Read-only file system" in project.state("loops/0001/admit/A2.txt").read_text()
    register = json.loads(project.state("checks.json").read_text())
    assert [c["id"] for c in register["checks"]] == ["C-0001"]
    # QA is told, next loop, which checks were not kept and why.
    prompt = project.state("loops/0002/roles/qa/attempt-1/prompt.md").read_text()
    assert "Checks hoh did not keep last loop" in prompt
    assert "A4 (loop 1): it did not reproduce QA's observation on the candidate: it did not finish within its " \
           "timeout of 1s" in prompt
    assert project.loop_json(2, "replay")["results"][0]["status"] == "passed"
    admitted_event = next(e for e in project.journal() if e["event"] == "checks_admitted")
    assert admitted_event["added"] == 1 and admitted_event["rejected"] == 5


def test_a_stdin_file_outside_the_evidence_dir_is_a_re_ask(tmp_path):
    ok = {"run": "python3 greet.py bob", "expect_stdout": "hello bob"}
    sneaky = {"id": "A1", **ok, "attach": {"stdin_file": "../../../../../etc/passwd"}}
    script = {"schema_version": 1, "loops": {1: {**greeter_loop(["A1"], [sneaky]),
                                                 "qa": [{"checks": [sneaky]}, {"checks": [dict(ok, id="A1")]}]}}}
    project = Project(tmp_path, script)
    assert project.build(loops=1).status == "finished"
    first = project.attempt_result(1, "qa", 1)
    assert any("stdin_file" in e and "relative path inside the evidence dir" in e
               for e in first["violations"] + first.get("errors", [])), first
    assert not project.state("checks.json").exists() or \
        json.loads(project.state("checks.json").read_text())["checks"] == []


def test_qa_cannot_make_a_loop_last_with_slow_checks_the_budget_bounds_the_admission(tmp_path):
    slow = [{"id": f"A{n}", "run": "true", "attach": {"command": f"sleep 1.5; echo {n}", "timeout_s": 5}}
            for n in (1, 2, 3)]
    project = Project(tmp_path, {"schema_version": 1, "loops": {1: greeter_loop(["A1", "A2", "A3"], slow)}})
    assert project.build(loops=1, sets={"checks.replay_budget_s": 1}).status == "finished"
    admitted = project.loop_json(1, "checks")["checks"]
    assert admitted[0]["admitted"]  # the first one runs: the budget is checked before each
    assert [a["admitted"] for a in admitted[1:]] == [False, False]
    assert all("check budget of 1s was spent" in a["reason"] for a in admitted[1:])
