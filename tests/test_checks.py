"""Executable checks: QA attaches them, the Runtime admits, keeps and replays them before every QA, model-free.

Real builds with the scripted agent; each check really runs in QA's jail on the frozen candidate. The hostile
checks (a hang, an escape, a check that does not reproduce) are in test_trust_checks.py, which also runs as an
unprivileged user.
"""

from __future__ import annotations

import json
import socket
import threading

import pytest
from conftest import DEMO, Project, run_hoh

from hoh import api
from hoh.evidence.checks import Expect, Match, mismatch, spec_errors
from hoh.runtime.validate import Expectations, validate_output

GREET_V = '''import sys
VERSION = "{version}"
if sys.argv[1:] == ["--version"]:
    print("greet " + VERSION)
else:
    print("hello " + (sys.argv[1] if len(sys.argv) > 1 else "world"))
'''


def greeter_loop(loop: int, version: str, acceptance: list[tuple[str, str]], qa: dict) -> dict:
    return {
        "planner": {"reply": {
            "goal": f"greeter {version}", "preserve": [], "out_of_scope": [],
            "tasks": [{"id": "T1", "title": "Greet", "details": "print hello NAME; --version", "issues": [],
                       "acceptance": [{"id": i, "condition": c, "method": "black-box"} for i, c in acceptance]}]}},
        "developer": {
            "actions": [{"write": {"path": "greet.py", "content": GREET_V.format(version=version)}}],
            "reply": {"summary": "greet.py", "tasks": [{"id": "T1", "status": "done", "notes": ""}],
                      "self_tests": [], "known_gaps": []}},
        "qa": qa,
    }


class FlakyService:
    """A TCP service that answers `bad` to its n-th connection and `ok` to every other: a real flaky dependency."""

    def __init__(self, bad_on: int):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.bad_on, self.served = bad_on, 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            conn, _ = self.sock.accept()
            self.served += 1
            with conn:
                conn.sendall(b"bad\n" if self.served == self.bad_on else b"ok\n")


def replay_of(project: Project, loop: int) -> dict[str, str]:
    return {r["id"]: r["status"] for r in project.loop_json(loop, "replay")["results"]}


# ---- must show 1: the demo's regressions are caught by the replay, before QA ------------------------------------
@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    ws = tmp_path_factory.mktemp("demo") / "ws"
    result = run_hoh("build", DEMO / "spec.md", "--harness", "scripted", "--loops", "4", "-w", ws, "-q", timeout=300)
    assert result.returncode == 0, result.stderr
    return ws


def test_the_demo_regressions_are_caught_by_the_replay_before_qa(demo):
    journal = [json.loads(line) for line in (demo / "state" / "journal.jsonl").read_text().splitlines()]
    ledger = json.loads((demo / "state" / "ledger.json").read_text())
    issues = {i["id"]: i for i in ledger["issues"]}
    assert sorted(issues) == ["I-0001", "I-0002"]  # one defect, one issue, replay or not
    for loop, check, issue_id, status in ((2, "C-0002", "I-0002", "open"), (3, "C-0005", "I-0001", "reopened")):
        seq = {e["event"] + ("/" + e.get("role", "") if e["event"] == "attempt_started" else ""): e["seq"]
               for e in journal if e.get("loop") == loop and e["event"] in ("checks_replayed", "attempt_started")}
        assert seq["checks_replayed"] < seq["attempt_started/qa"], f"loop {loop}: the replay ran after QA started"
        replayed = next(e for e in journal if e["event"] == "checks_replayed" and e["loop"] == loop)
        assert replayed["failed"] == 1 and replayed["flaky"] == 0
        entry = next(h for h in issues[issue_id]["history"] if h["loop"] == loop)
        assert entry["status"] == status
        ref = f"loops/{loop:04d}/replay/{check}.txt"
        assert entry["evidence"][0] == f"replay:{ref}", entry
        output = (demo / "state" / ref).read_text()
        assert "result: failed" in output and output.startswith("$ python3 calc.py")
    assert "exit code 1, expected 2" in (demo / "state/loops/0003/replay/C-0005.txt").read_text()
    assert "Traceback" in (demo / "state/loops/0003/replay/C-0005.txt").read_text()


def test_qa_is_told_the_replay_and_the_planner_reads_it_in_the_index(demo):
    prompt = (demo / "state/loops/0003/roles/qa/attempt-1/prompt.md").read_text()
    assert "hoh replayed 5 recorded check(s) on this candidate: 1 failed" in prompt
    assert "C-0005 (V-0005): failed: exit code 1, expected 2" in prompt
    # Loop 3's Planner read the index after loop 2: its replay's failure is there.
    planner = (demo / "state/loops/0003/roles/planner/attempt-1/prompt.md").read_text()
    assert "replay on loop 2's candidate: 2 checks, 1 failed" in planner
    assert "C-0002 (V-0002) failed: exit code 0" not in planner  # it printed 3: the stdout differs, not the exit
    assert "C-0002 (V-0002) failed: stdout does not match" in planner


def test_status_shows_the_checks_of_each_loop(demo):
    loops = api.status(demo)["loops"]
    assert loops[0]["checks"] == {"added": 2, "rejected": 0, "retired": 0}
    assert loops[1]["checks"] == {"replayed": 2, "failed": 1, "flaky": 0, "skipped": 0, "added": 3, "rejected": 0,
                                  "retired": 0}
    assert loops[2]["checks"]["replayed"] == 5 and loops[2]["checks"]["failed"] == 1
    assert all(loop["check_seconds"] > 0 for loop in loops)
    text = run_hoh("status", "-w", demo).stdout
    row = next(line.split() for line in text.splitlines() if line.split()[:1] == ["2"])
    assert "2/1/0" in row and "+3" in row, text


# ---- must show 2: timestamps under regex/normalized, a flaky check, a retired one ------------------------------
def test_stable_flaky_and_retired_checks(tmp_path):
    service = FlakyService(bad_on=3)  # 1: QA's own run, 2: its admission, 3: loop 2's replay, 4: the re-run
    call = f"python3 -c \"import socket; print(socket.create_connection(('127.0.0.1', {service.port})).recv(9).decode().strip())\""
    stamp = {"id": "T1.A1", "run": "python3 greet.py bob | sed \"s/^/$(date +%T.%N) /\"", "expect_contains": "hello bob",
             "attach": {"expect": {"match": "regex", "stdout": r"^\d\d:\d\d:\d\d\.\d+ hello bob$"}}}
    spaced = {"id": "T1.A2", "run": "python3 greet.py '  bob  '", "expect_contains": "bob",
              "attach": {"expect": {"match": "normalized", "stdout": "hello bob"}}}
    flaky = {"id": "T1.A3", "run": call, "expect_stdout": "ok", "attach": True}
    version = {"id": "T1.A4", "run": "python3 greet.py --version", "expect_stdout": "greet 1", "attach": True}
    acceptance = [("T1.A1", "stamped"), ("T1.A2", "spaced"), ("T1.A3", "service"), ("T1.A4", "version 1")]
    v2 = {"id": "T1.A1", "run": "python3 greet.py --version", "expect_stdout": "greet 2"}
    script = {"schema_version": 1, "loops": {
        1: greeter_loop(1, "1", acceptance, {"checks": [stamp, spaced, flaky, version]}),
        2: greeter_loop(2, "2", [("T1.A1", "version 2")],
                        {"checks": [v2], "reply": {"retire": [{"id": "C-0004", "reason": "the plan bumps the version"}]}}),
        3: greeter_loop(3, "2", [("T1.A1", "version 2 still")], {"checks": [v2]}),
    }}
    project = Project(tmp_path, script)
    assert project.build(loops=3, sets={"sandbox.network": "shared"}).status == "finished"

    assert replay_of(project, 2) == {"C-0001": "passed", "C-0002": "passed", "C-0003": "flaky", "C-0004": "failed"}
    assert replay_of(project, 3) == {"C-0001": "passed", "C-0002": "passed", "C-0003": "passed"}  # C-0004 retired
    register = {c["id"]: c for c in json.loads(project.state("checks.json").read_text())["checks"]}
    assert register["C-0004"]["status"] == "retired"
    assert register["C-0004"]["retired"] == {"loop": 2, "reason": "the plan bumps the version"}
    assert [h["status"] for h in register["C-0003"]["history"]] == ["flaky", "passed"]
    assert [h["status"] for h in register["C-0001"]["history"]] == ["passed", "passed"]  # a new timestamp each time
    # Neither the flaky check nor the retired one is a regression.
    ledger = json.loads(project.state("ledger.json").read_text())
    assert ledger["issues"] == []
    assert all(b["status"] == "verified" for b in ledger["behaviours"])
    flaky_result = next(r for r in project.loop_json(2, "replay")["results"] if r["id"] == "C-0003")
    assert "then passed on a re-run" in flaky_result["reason"]
    assert "result: failed" in project.state("loops/0002/replay/C-0003.txt").read_text()
    assert "result: passed" in project.state("loops/0002/replay/C-0003.rerun.txt").read_text()
    assert service.served == 5
    loops = api.status(project.ws)["loops"]
    assert loops[1]["checks"]["flaky"] == 1 and loops[1]["checks"]["retired"] == 1


def test_at_risk_checks_run_first_and_a_spent_budget_skips_the_rest(tmp_path):
    slow = {"id": "T1.A1", "run": "echo slow", "expect_stdout": "slow", "attach": {"paths": ["other.txt"]}}
    greets = {"id": "T1.A2", "run": "python3 greet.py bob", "expect_stdout": "hello bob", "attach": {"paths": ["greet.py"]}}
    script = {"schema_version": 1, "loops": {
        1: greeter_loop(1, "1", [("T1.A1", "slow"), ("T1.A2", "greets")], {"checks": [slow, greets]}),
        2: greeter_loop(2, "2", [("T1.A1", "greets again")], {"checks": [dict(greets, id="T1.A1", attach=False)]}),
    }}
    project = Project(tmp_path, script)
    assert project.build(loops=2, sets={"checks.replay_budget_s": None}).status == "finished"
    results = project.loop_json(2, "replay")["results"]
    # greet.py changed in loop 2 and only C-0002 names it: it runs first.
    assert [(r["id"], r["at_risk"], r["status"]) for r in results] == [("C-0002", True, "passed"),
                                                                       ("C-0001", False, "passed")]
    (tmp_path / "b").mkdir()
    project2 = Project(tmp_path / "b", script)
    assert project2.build(loops=1).status == "finished"
    assert api.resume(project2.ws, more_loops=1, overrides=["checks.replay_budget_s=0.001"]).status == "finished"
    results = project2.loop_json(2, "replay")["results"]
    # The budget is spent by the first check: the rest are skipped (said, never a pass or a regression).
    assert [(r["id"], r["status"]) for r in results] == [("C-0002", "passed"), ("C-0001", "skipped")]
    assert "replay budget of 0.001s was spent" in results[1]["reason"]
    assert api.status(project2.ws)["loops"][1]["checks"]["skipped"] == 1


# ---- matching and validation, directly ----------------------------------------------------------------------------
@pytest.mark.parametrize("mode,want,got,ok", [
    ("exact", "5", "5\n", True), ("exact", "5", "6\n", False),
    ("normalized", "a b", "  a\n\tb \n", True), ("normalized", "a b", "ab", False),
    ("regex", r"built at \d+:\d+", "built at 12:01\n", True), ("regex", r"^x$", "y\n", False),
    ("json_subset", '{"a": 1, "l": [2]}', '{"a": 1, "b": 2, "l": [3, 2]}', True),
    ("json_subset", '{"a": true}', '{"a": 1}', False), ("json_subset", '{"a": 1}', "not json", False),
])
def test_match_modes(mode, want, got, ok):
    reason = mismatch(Expect(stdout=want, match=Match(mode)), 0, got, "")
    assert (reason is None) == ok, reason


def test_a_check_spec_qa_cannot_keep_is_a_re_ask():
    assert spec_errors({"command": "x", "cwd": "../..", "expect": {"exit_code": 0}}, "c")
    assert spec_errors({"command": "x", "paths": ["/etc"], "expect": {"exit_code": 0}}, "c")
    assert spec_errors({"command": "x", "env": {"A B": "1"}, "expect": {"exit_code": 0}}, "c")
    assert spec_errors({"command": "x", "expect": {"exit_code": 0, "match": "regex", "stdout": "("}}, "c")
    plan = {"schema_version": 1, "loop": 1, "goal": "g", "preserve": [], "out_of_scope": [],
            "tasks": [{"id": "T1", "title": "t", "details": "d", "issues": [],
                       "acceptance": [{"id": "A1", "condition": "c", "method": "black-box"}]}]}
    report = {"schema_version": 1, "loop": 1, "candidate_id": "loop-0001-000000000000", "verdict": "pass",
              "criteria": [{"id": "A1", "status": "verified", "evidence": [{"kind": "observation", "ref": "x", "detail": ""}],
                            "check": {"command": "true", "cwd": "../up", "expect": {"exit_code": 0}}}],
              "preserved": [], "findings": [], "retire": [{"id": "C-0009", "reason": "r"}]}
    _, errors = validate_output("qa", json.dumps(report), Expectations(loop=1, plan=plan,
                                                                      candidate_id="loop-0001-000000000000",
                                                                      check_ids={"C-0001"}))
    assert any("must be relative" in e for e in errors) and any("C-0009" in e for e in errors), errors
    report["criteria"][0]["check"] = {"command": "true", "timeout_s": 9999, "expect": {"exit_code": 0}}
    _, errors = validate_output("qa", json.dumps(report), Expectations(loop=1, plan=plan,
                                                                      candidate_id="loop-0001-000000000000"))
    assert any(e.startswith("schema:") for e in errors), errors


def test_the_html_report_shows_each_loops_replay_and_admissions(demo, tmp_path):
    out = tmp_path / "report.html"
    result = run_hoh("report", "-w", demo, "-o", out, timeout=180)
    assert result.returncode == 0, result.stderr
    loop3 = (tmp_path / "report-pages" / "loop-0003.html").read_text()  # each loop has its own page
    assert "checks 5 replayed, 1 failed, +1" in " ".join(loop3.split())
    assert "state/loops/0003/replay/C-0005.txt" in loop3 and "exit code 1, expected 2" in loop3
    assert "kept as C-0006" in loop3
