"""The evidence state: ledger rules, the verified-behaviour register, the index, the mechanism switches."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
from conftest import mini_script, run_hoh

from hoh.errors import StateError
from hoh.evidence.index import render_index
from hoh.evidence.ledger import Ledger

REPO_PERF = Path(__file__).resolve().parents[1] / "benchmarks" / "perf"


def plan(tasks, preserve=()):
    return {"schema_version": 1, "loop": 1, "goal": "g", "out_of_scope": [],
            "preserve": [{"id": v, "behaviour": "b"} for v in preserve],
            "tasks": [{"id": tid, "title": tid, "details": "", "issues": list(issues),
                       "acceptance": [{"id": f"{tid}.A", "condition": cond, "method": "black-box"}]}
                      for tid, issues, cond in tasks]}


def qa(criteria=(), preserved=(), findings=()):
    ev = [{"kind": "observation", "ref": "seen", "detail": ""}]
    return {"schema_version": 1, "loop": 1, "candidate_id": "loop-0001-aaaaaaaaaaaa", "verdict": "partial",
            "criteria": [{"id": i, "status": s, "evidence": ev} for i, s in criteria],
            "preserved": [{"id": i, "status": s, "evidence": ev} for i, s in preserved],
            "findings": [{"title": t, "severity": sev, "repro": "", "evidence": ev, **({"issue_id": iid} if iid else {})}
                         for t, sev, iid in findings]}


def dev(*done):
    return {"tasks": [{"id": t, "status": "done", "notes": ""} for t in done]}


def ledger_with_open_issue() -> Ledger:
    ledger = Ledger()
    ledger.apply_loop(1, plan([("T1", [], "c1")]), dev("T1"), "loop-0001-aaaaaaaaaaaa",
                      qa([("T1.A", "verified")], findings=[("crash on %", "major", None)]))
    assert ledger.issue("I-0001")["status"] == "open"
    return ledger


def statuses(ledger, issue_id):
    return [h["status"] for h in ledger.issue(issue_id)["history"]]


def test_a_developer_claim_never_closes_an_issue():
    ledger = ledger_with_open_issue()
    ledger.apply_loop(2, plan([("T1", ["I-0001"], "c2")]), dev("T1"), "loop-0002-bbbbbbbbbbbb", None)
    assert ledger.issue("I-0001")["status"] == "fixed_pending_verify"
    ledger.apply_loop(3, plan([("T1", ["I-0001"], "c2")]), dev("T1"), "loop-0003-cccccccccccc",
                      qa([("T1.A", "insufficient_evidence")]))
    assert ledger.issue("I-0001")["status"] == "fixed_pending_verify"
    assert statuses(ledger, "I-0001") == ["open", "fixed_pending_verify"]


def test_insufficient_evidence_keeps_an_issue_open():
    ledger = ledger_with_open_issue()
    ledger.apply_loop(2, plan([("T1", ["I-0001"], "c2")]), dev(), "loop-0002-bbbbbbbbbbbb",
                      qa([("T1.A", "insufficient_evidence")]))
    assert ledger.issue("I-0001")["status"] == "open"
    assert not any(b["behaviour"] == "c2" for b in ledger.behaviours)


def test_qa_evidence_closes_and_a_regression_reopens_with_history():
    ledger = ledger_with_open_issue()
    ledger.apply_loop(2, plan([("T1", ["I-0001"], "no crash on %")]), dev("T1"), "loop-0002-bbbbbbbbbbbb",
                      qa([("T1.A", "verified")]))
    assert ledger.issue("I-0001")["status"] == "closed"
    behaviour = next(b for b in ledger.behaviours if b["behaviour"] == "no crash on %")
    assert behaviour["issues"] == ["I-0001"]
    # Loop 3: the behaviour that closed I-0001 breaks again → I-0001 reopens, not a new issue.
    ledger.apply_loop(3, plan([("T9", [], "other")], preserve=[behaviour["id"]]), dev("T9"), "loop-0003-cccccccccccc",
                      qa([("T9.A", "verified")], preserved=[(behaviour["id"], "failed")]))
    issue = ledger.issue("I-0001")
    assert issue["status"] == "reopened" and issue["regressions"] == 1
    assert statuses(ledger, "I-0001") == ["open", "closed", "reopened"]
    assert [h["candidate_id"] for h in issue["history"]] == ["loop-0001-aaaaaaaaaaaa", "loop-0002-bbbbbbbbbbbb",
                                                               "loop-0003-cccccccccccc"]
    assert len(ledger.issues) == 1
    assert ledger.ranked_active_issues()[0]["id"] == "I-0001"


def test_a_broken_behaviour_without_an_issue_becomes_a_regression_issue():
    ledger = Ledger()
    ledger.apply_loop(1, plan([("T1", [], "adds")]), dev("T1"), "loop-0001-aaaaaaaaaaaa", qa([("T1.A", "verified")]))
    ledger.apply_loop(2, plan([("T2", [], "subs")], preserve=["V-0001"]), dev("T2"), "loop-0002-bbbbbbbbbbbb",
                      qa([("T2.A", "verified")], preserved=[("V-0001", "failed")]))
    issue = ledger.issue("I-0001")
    assert issue["title"] == "Regression: adds" and issue["behaviour_id"] == "V-0001" and issue["severity"] == "major"
    assert ledger.verified_behaviours()[0]["id"] == "V-0002"
    # Verifying the behaviour again closes its regression issue.
    ledger.apply_loop(3, plan([("T3", [], "x")], preserve=["V-0001"]), dev(), "loop-0003-cccccccccccc",
                      qa([("T3.A", "verified")], preserved=[("V-0001", "verified")]))
    assert issue["status"] == "closed" and ledger.verified_behaviours()[0]["id"] == "V-0001"


def test_findings_naming_an_issue_update_it_and_failure_beats_success():
    ledger = ledger_with_open_issue()
    ledger.apply_loop(2, plan([("T1", ["I-0001"], "c")]), dev("T1"), "loop-0002-bbbbbbbbbbbb",
                      qa([("T1.A", "verified")], findings=[("still crashes", "major", "I-0001")]))
    assert ledger.issue("I-0001")["status"] == "open" and len(ledger.issues) == 1


def test_ranking_puts_reopened_first_then_severity():
    ledger = Ledger()
    ledger.apply_loop(1, plan([("T1", [], "c")]), dev(), "loop-0001-aaaaaaaaaaaa",
                      qa([("T1.A", "verified")], findings=[("a", "minor", None), ("b", "blocker", None)]))
    assert [i["id"] for i in ledger.ranked_active_issues()] == ["I-0002", "I-0001"]


def test_index_stays_within_its_budget_whatever_the_history():
    ledger = Ledger()
    for t in range(1, 60):
        ledger.apply_loop(t, plan([("T1", [], f"behaviour {t}")]), dev(), f"loop-{t:04d}-aaaaaaaaaaaa",
                          qa([("T1.A", "verified")], findings=[(f"problem {t}.{k}", "major", None) for k in range(20)]))
    text = render_index(spec="# S\n## a\n" * 50, ledger=ledger, loops=[], last_loop=59, budget_bytes=2000,
                        top_issues=8, recent_loops=5)
    assert len(text.encode()) <= 2000
    assert "1180 open" in text and "state/ledger.json" in text


def test_corrupt_and_future_ledgers_stop_the_run_without_overwriting(project):
    project.build()
    ledger_path = project.state("ledger.json")
    for content, needle in (("{broken", "corrupt"), (json.dumps({"schema_version": 99, "issues": [], "behaviours": []}), "newer")):
        ledger_path.write_text(content)
        with pytest.raises(StateError, match=needle):
            Ledger.load(ledger_path)
        project.script["loops"][2] = project.script["loops"][1]
        project.write_script()
        result = run_hoh("resume", "-w", project.ws, "--loops", "1")
        assert result.returncode == 2 and str(ledger_path) in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert ledger_path.read_text() == content
        assert project.journal()[-1]["event"] == "run_finished" and project.journal()[-1]["status"] == "error"


def test_unknown_issue_and_behaviour_ids_are_semantic_violations(make_project):
    script = mini_script(1)
    good_qa, good_plan = script["loops"][1]["qa"], script["loops"][1]["planner"]
    bad_plan = json.loads(json.dumps(good_plan))
    bad_plan["reply"]["tasks"][0]["issues"] = ["I-0042"]
    bad_plan["reply"]["preserve"] = [{"id": "V-0007", "behaviour": "x"}]
    script["loops"][1]["planner"] = [bad_plan, good_plan]
    script["loops"][1]["qa"] = [{**good_qa, "reply": {"findings": [
        {"title": "t", "severity": "minor", "issue_id": "I-0009", "repro": "", "evidence": []}]}}, good_qa]
    p = make_project(script)
    assert p.build().status == "finished"
    planner_errors = p.attempt_result(1, "planner", 1)["errors"]
    assert any("I-0042" in e for e in planner_errors) and any("V-0007" in e for e in planner_errors)
    assert any("I-0009" in e for e in p.attempt_result(1, "qa", 1)["errors"])


def _manifest(p, loop, role):
    return json.loads(p.state("loops", f"{loop:04d}", "roles", role, "attempt-1", "inputs.json").read_text())


def test_evidence_feedback_switch_changes_what_the_planner_receives(make_project):
    on, off = make_project(mini_script(2), "on"), make_project(mini_script(2), "off")
    assert on.build(loops=2).status == "finished"
    assert off.build(loops=2, sets={"mechanisms.evidence_feedback": False}).status == "finished"
    files_on = [f["path"] for f in _manifest(on, 2, "planner")["files"]]
    files_off = [f["path"] for f in _manifest(off, 2, "planner")["files"]]
    assert files_on == ["spec.md", "state/INDEX.md", "state/ledger.json"]
    assert files_off == ["spec.md"]
    assert "Evidence index after loop 1" in on.state("loops", "0002", "roles", "planner", "attempt-1", "prompt.md").read_text()
    assert "Evidence index" not in off.state("loops", "0002", "roles", "planner", "attempt-1", "prompt.md").read_text()


def test_plan_update_switch_reuses_the_first_plan(make_project):
    script = mini_script(2)
    script["loops"][2]["planner"]["reply"]["goal"] = "a different goal"
    p = make_project(script)
    assert p.build(loops=2, sets={"mechanisms.plan_update": False}).status == "finished"
    assert not p.state("loops", "0002", "roles", "planner").exists()
    assert p.loop_json(2, "plan") == {**p.loop_json(1, "plan"), "loop": 2}
    assert _manifest(p, 2, "developer")["files"][1]["path"] == "state/loops/0002/plan.json"
    step = next(e for e in p.journal() if e["event"] == "step_finished" and e["loop"] == 2 and e["step"] == "planner")
    assert step["reused_plan"] is True


# ---- one defect, one issue ------------------------------------------------------------------------------
def test_a_returning_defect_with_id_less_findings_is_one_issue_over_five_loops(make_project):
    """The real-CLI scenario: a defect comes back twice and QA's findings name no id; the ledger reopens
    the one issue each time (titles differing in case, punctuation and spacing) instead of filing copies."""
    titles = {1: "greet.py crashes on an empty name", 3: "Greet.py CRASHES on an empty name!",
              5: "greet.py  crashes -- on an empty name."}
    script = mini_script(5)
    for t, title in titles.items():
        script["loops"][t]["qa"]["probes"] = [{"id": f"probe-{t}", "run": "false",
                                              "finding": {"title": title, "severity": "major"}}]
    for t in (2, 4):  # the fix: a task for I-0001 whose acceptance QA verifies
        script["loops"][t]["planner"]["reply"]["tasks"][0]["issues"] = ["I-0001"]
    p = make_project(script)
    assert p.build(loops=5).status == "finished"
    ledger = json.loads(p.state("ledger.json").read_text())
    assert [i["id"] for i in ledger["issues"]] == ["I-0001"]
    issue = ledger["issues"][0]
    assert [h["status"] for h in issue["history"]] == ["open", "closed", "reopened", "closed", "reopened"]
    assert issue["regressions"] == 2 and issue["status"] == "reopened"


def test_an_id_less_finding_matches_an_issue_closed_within_the_window_only():
    ledger = ledger_with_open_issue()  # I-0001 "crash on %", opened in loop 1
    ledger.apply_loop(2, plan([("T1", ["I-0001"], "no crash on %")]), dev("T1"), "loop-0002-bbbbbbbbbbbb",
                      qa([("T1.A", "verified")]))
    assert ledger.issue("I-0001")["status"] == "closed"
    # 13 loops later, with a window of 10: a new issue of that title, the old one left closed.
    ledger.apply_loop(15, plan([("T2", [], "c")]), dev("T2"), "loop-0015-cccccccccccc",
                      qa([("T2.A", "verified")], findings=[("Crash on %!", "major", None)]), same_defect_loops=10)
    assert ledger.issue("I-0001")["status"] == "closed" and ledger.issue("I-0002")["status"] == "open"
    # Within the window the newest issue of that title reopens; the same title twice in one report is one issue.
    ledger.apply_loop(16, plan([("T3", ["I-0002"], "no crash on % at all")]), dev("T3"), "loop-0016-dddddddddddd",
                      qa([("T3.A", "verified")]))
    ledger.apply_loop(18, plan([("T4", [], "d")]), dev("T4"), "loop-0018-eeeeeeeeeeee",
                      qa([("T4.A", "verified")], findings=[("crash  on %", "major", None), ("CRASH ON %.", "minor", None)]),
                      same_defect_loops=10)
    assert len(ledger.issues) == 2
    assert ledger.issue("I-0002")["status"] == "reopened" and ledger.issue("I-0002")["regressions"] == 1
    assert ledger.issue("I-0001")["status"] == "closed"


def test_an_id_less_finding_matches_an_active_issue_at_any_age_and_a_window_of_zero_only_active():
    ledger = ledger_with_open_issue()
    ledger.apply_loop(40, plan([("T2", [], "c")]), dev("T2"), "loop-0040-cccccccccccc",
                      qa([("T2.A", "verified")], findings=[("CRASH on %", "major", None)]), same_defect_loops=0)
    assert len(ledger.issues) == 1 and len(ledger.issue("I-0001")["history"]) == 2
    ledger.apply_loop(41, plan([("T1", ["I-0001"], "no crash on %")]), dev("T1"), "loop-0041-dddddddddddd",
                      qa([("T1.A", "verified")]))
    ledger.apply_loop(42, plan([("T3", [], "e")]), dev("T3"), "loop-0042-eeeeeeeeeeee",
                      qa([("T3.A", "verified")], findings=[("crash on %", "major", None)]), same_defect_loops=0)
    assert [i["status"] for i in ledger.issues] == ["closed", "open"]


# -- the ledger's indexes and its file ------------------------------------------------------------------------

def _long_ledger(loops: int = 60):
    sys.path.insert(0, str(REPO_PERF))
    from evidence_scaling import loop_reports
    ledger, rng = Ledger(), random.Random(3)
    for t in range(1, loops + 1):
        p, d, q = loop_reports(t, ledger, 4, rng)
        if t % 7 == 0 and ledger.verified_behaviours():  # QA names the behaviour a finding breaks
            q["findings"].append({"title": "it broke", "severity": "major", "repro": "", "evidence": q["findings"][0]["evidence"],
                                  "behaviour_id": ledger.verified_behaviours()[0]["id"]})
        ledger.apply_loop(t, p, d, q["candidate_id"], q)
    return ledger


def test_the_ledgers_indexes_answer_as_a_scan_of_it_would():
    from hoh.evidence.ledger import ACTIVE, SEVERITY_RANK, STATUS_RANK
    from hoh.evidence.shortfall import shortfall
    from hoh.records import QaReport
    ledger = _long_ledger()
    issues, behaviours = ledger.issues, ledger.behaviours
    assert ledger.counts() == {s: sum(i["status"] == s for i in issues) for s in STATUS_RANK}
    ranked = sorted((i for i in issues if i["status"] in ACTIVE),
                    key=lambda i: (STATUS_RANK[i["status"]], SEVERITY_RANK[i["severity"]], i["id"]))
    assert ledger.ranked_active_issues() == ranked and ledger.ranked_active_issues(5) == ranked[:5]
    assert ledger.active_count() == len(ranked)
    assert ledger.verified_behaviours() == [b for b in behaviours if b["status"] == "verified"]
    assert any(i.get("behaviour_id") for i in issues)
    for b in behaviours:
        assert ledger.regression_issues(b["id"]) == [i["id"] for i in issues if i.get("behaviour_id") == b["id"]]
    for t in range(1, 61):
        touched_issues, touched_behaviours = ledger.touched_in(t)
        assert touched_issues == [i for i in issues if any(h["loop"] == t for h in i["history"])]
        assert touched_behaviours == [b for b in behaviours if b["first_verified"]["loop"] == t
                                      or any(h["loop"] == t for h in b["history"])]
    # A fresh ledger of the same data builds the same indexes; a short loop's reason is the same either way.
    fresh = Ledger(json.loads(json.dumps(ledger.data)))
    qa = QaReport.from_json({"schema_version": 1, "loop": 60, "candidate_id": "c", "verdict": "partial",
                             "criteria": [], "preserved": [], "findings": []})
    for t in (7, 14, 59, 60):
        assert fresh.progress(t) == ledger.progress(t) and shortfall(fresh, t, qa) == shortfall(ledger, t, qa)
    assert fresh.ranked_active_issues() == ranked and fresh.counts() == ledger.counts()


def test_a_saved_ledger_is_what_a_whole_dump_would_write_and_loads_back(tmp_path):
    path = tmp_path / "ledger.json"
    ledger = _long_ledger(30)
    ledger.save(path)
    sys.path.insert(0, str(REPO_PERF))
    from evidence_scaling import loop_reports
    for t in (31, 32):  # changed items are written anew, the others from the lines kept
        p, d, q = loop_reports(t, ledger, 3, random.Random(t))
        ledger.apply_loop(t, p, d, q["candidate_id"], q)
        ledger.data["applied_through"] = t
        ledger.save(path)
        assert json.loads(path.read_text()) == json.loads(json.dumps(ledger.data))
        assert Ledger(json.loads(json.dumps(ledger.data))).save(tmp_path / "whole.json") is None
        assert path.read_bytes() == (tmp_path / "whole.json").read_bytes()
    assert Ledger.load(path) is ledger  # unchanged since this process saved it: no read
    text = path.read_text()
    path.write_text(text.replace('"applied_through": 32', '"applied_through": 33'))  # same size, new mtime/ctime
    again = Ledger.load(path)
    assert again is not ledger and again.data["applied_through"] == 33 and again.data["issues"] == ledger.data["issues"]


def test_a_ledger_changed_and_not_saved_is_read_again(tmp_path):
    path = tmp_path / "ledger.json"
    ledger = ledger_with_open_issue()
    ledger.save(path)
    ledger.apply_loop(2, plan([("T1", ["I-0001"], "c1")]), dev("T1"), "loop-0002-bbbbbbbbbbbb", None)  # an error would stop it here
    again = Ledger.load(path)
    assert again is not ledger and again.issue("I-0001")["status"] == "open"


def test_an_old_indented_ledger_still_loads_and_is_saved_in_lines(tmp_path):
    path = tmp_path / "ledger.json"
    old = ledger_with_open_issue().data
    path.write_text(json.dumps(old, indent=2))
    ledger = Ledger.load(path)
    assert ledger.ranked_active_issues()[0]["id"] == "I-0001" and ledger.counts()["open"] == 1
    ledger.save(path)
    assert json.loads(path.read_text()) == old and len(path.read_text().splitlines()) == 5
