"""Runs left alone for days: a graceful stop (`hoh stop`, a first Ctrl-C), patience, the Planner's
`spec_complete`, waiting out a usage limit, hooks, per-role harnesses and models, and a status that reads
in an 80-column terminal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone

import pytest
from conftest import DEMO, Project, mini_loop, mini_script, run_hoh
from test_budgets import attempts, events, metered, new_project, reference_run, status
from test_resume import snapshot

from hoh import api
from hoh.evidence.ledger import Ledger
from hoh.harness.quota import reset_time


def start_build(p: Project, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hoh", "build", str(p.spec), "-H", "scripted", "-w", str(p.ws), "-q", *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(p: Project, predicate, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if p.state("journal.jsonl").exists():
            found = next((e for e in events(p.ws) if predicate(e)), None)
            if found:
                return found
        time.sleep(0.1)
    raise AssertionError("the journal never showed the awaited event")


def started(role: str, loop: int = 1):
    return lambda e: e["event"] == "process_started" and e["role"] == role and e["loop"] == loop


# ---- a graceful stop ------------------------------------------------------------------------------
def test_hoh_stop_ends_the_run_after_the_running_role_with_nothing_lost(tmp_path):
    script = mini_script(2)
    script["loops"][1]["developer"]["actions"].insert(0, {"sleep": 3})
    reference = reference_run(tmp_path, script, 2)
    p = new_project(tmp_path, script)
    build = start_build(p, "--loops", "2")
    wait_for(p, started("developer"))
    asked = run_hoh("stop", "-w", p.ws)
    assert asked.returncode == 0 and "stop requested" in asked.stdout
    _, err = build.communicate(timeout=60)
    assert build.returncode == 4, err
    assert "stopped after 0/2 loops" in err and f"hoh resume -w {p.ws}" in err
    journal = [e["event"] for e in events(p.ws)]
    # The Developer's attempt ran to its end and was recorded, the candidate frozen (and its replay, of no checks,
    # done); QA never started.
    assert journal[-6:] == ["attempt_finished", "step_finished", "step_finished", "step_finished", "stop_requested",
                            "run_finished"]
    assert events(p.ws)[-1]["status"] == "stopped" and not (p.ws / "hoh.stop").exists()
    assert [a["role"] for a in attempts(p.ws)] == ["planner", "developer"] and attempts(p.ws)[-1]["ok"]
    assert status(p.ws)["state"] == "stopped"

    resumed = run_hoh("resume", "-w", p.ws, "-q")
    assert resumed.returncode == 0, resumed.stderr
    assert [a["role"] for a in attempts(p.ws) if a["loop"] == 1] == ["planner", "developer", "qa"]  # not redone
    assert snapshot(p.ws) == snapshot(reference)


def test_stop_when_nothing_runs_is_a_usage_error(project):
    project.build()
    result = run_hoh("stop", "-w", project.ws)
    assert result.returncode == 2 and "no hoh is running" in result.stderr and not (project.ws / "hoh.stop").exists()


def test_a_first_ctrl_c_finishes_the_attempt_and_a_second_stops_at_once(tmp_path):
    script = mini_script(1)
    script["loops"][1]["developer"]["actions"].insert(0, {"sleep": 2})
    p = new_project(tmp_path, script, "graceful")
    build = start_build(p, "--loops", "1")
    wait_for(p, started("developer"))
    build.send_signal(signal.SIGINT)
    _, err = build.communicate(timeout=60)
    assert build.returncode == 4 and "stopping after the current role attempt (SIGINT)" in err
    assert attempts(p.ws)[-1]["role"] == "developer" and attempts(p.ws)[-1]["ok"]
    assert events(p.ws)[-1]["status"] == "stopped"

    script["loops"][1]["developer"]["actions"][0] = {"sleep": 60}
    q = new_project(tmp_path, script, "at-once")
    build = start_build(q, "--loops", "1")
    wait_for(q, started("developer"))
    build.send_signal(signal.SIGINT)
    time.sleep(0.5)
    build.send_signal(signal.SIGINT)
    assert build.wait(timeout=20) == 130
    assert events(q.ws)[-1]["status"] == "interrupted"


# ---- when more loops stop paying off ---------------------------------------------------------------
def test_patience_ends_a_run_whose_loops_make_no_progress(tmp_path):
    p = new_project(tmp_path, mini_script(6))  # every loop re-plans the same greeter: only loop 1 adds anything
    built = run_hoh("build", p.spec, "-w", p.ws, "--loops", "6", "--set", "policy.patience=2")
    assert built.returncode == 0, built.stderr
    assert "stalled after 3/6 loops" in built.stdout
    loops = status(p.ws)["loops"]
    assert [lp["progress"] for lp in loops] == [{"behaviours_added": 1, "reverified": 0, "issues_closed": 0}] + \
        [{"behaviours_added": 0, "reverified": 0, "issues_closed": 0}] * 2
    shown = status(p.ws)
    assert shown["state"] == "stalled" and "no progress in loops 2–3" in shown["stop_reason"]["error"]
    again = run_hoh("resume", "-w", p.ws, "-q")  # nothing more was asked for
    assert again.returncode == 0 and status(p.ws)["loops_finished"] == 3
    more = run_hoh("resume", "-w", p.ws, "-q", "--loops", "1")  # the user's own decision to go on
    assert more.returncode == 0 and status(p.ws)["loops_finished"] == 4


def complete_loop() -> dict:
    """A Planner with nothing left to plan; QA's re-verification of V-0001 runs for real."""
    loop = mini_loop(2)
    loop["planner"] = {"reply": {"schema_version": 2, "goal": "nothing left to build", "tasks": [], "preserve": [],
                                 "out_of_scope": [], "spec_complete": True}}
    loop["developer"] = {"reply_text": "the Developer must not run in a complete loop"}
    loop["qa"] = {"preserve_checks": [{"id": "V-0001", "run": "python3 greet.py bob", "expect_stdout": "hello bob"}]}
    return loop


def test_spec_complete_ends_the_run_after_qa_re_verifies_everything(tmp_path):
    script = mini_script(1)
    script["loops"][2] = complete_loop()
    p = new_project(tmp_path, script)
    built = run_hoh("build", p.spec, "-w", p.ws, "--loops", "5")
    assert built.returncode == 0, built.stderr
    assert "complete after 2/5 loops" in built.stdout
    shown = status(p.ws)
    assert shown["state"] == "complete" and [lp["status"] for lp in shown["loops"]] == ["pass", "complete"]
    plan, qa = p.loop_json(2, "plan"), p.loop_json(2, "qa")
    assert plan["preserve"] == [{"id": "V-0001", "behaviour": "`python greet.py bob` prints hello bob"}]
    assert [(i["id"], i["status"]) for i in qa["preserved"]] == [("V-0001", "verified")]
    assert [a["role"] for a in attempts(p.ws) if a["loop"] == 2] == ["planner", "qa"]
    tree = p.loop_json(1, "candidate")["tree"]
    assert p.loop_json(2, "candidate")["tree"] == tree  # QA judged the last candidate itself
    assert run_hoh("resume", "-w", p.ws, "-q").returncode == 0 and status(p.ws)["loops_finished"] == 2


def test_a_failed_re_verification_does_not_end_the_run(tmp_path):
    script = mini_script(3)
    script["loops"][2] = complete_loop()
    script["loops"][2]["qa"]["preserve_checks"][0]["expect_stdout"] = "hello alice"
    p = new_project(tmp_path, script)
    assert p.build(3).status == "finished"
    assert [lp["status"] for lp in api.status(p.ws)["loops"]] == ["pass", "fail", "pass"]
    ledger = Ledger.load(p.state("ledger.json"))
    assert ledger.behaviour("V-0001")["status"] == "verified" and ledger.issues[0]["behaviour_id"] == "V-0001"


def test_spec_complete_with_open_issues_is_asked_again():
    from hoh.runtime.validate import Expectations, validate_output
    plan = {"schema_version": 2, "loop": 3, "goal": "done", "tasks": [], "preserve": [], "out_of_scope": [],
            "spec_complete": True}
    _, errors = validate_output("planner", json.dumps(plan), Expectations(
        loop=3, issue_ids={"I-0001"}, behaviour_ids={"V-0001"}, active_issue_ids={"I-0001"}, verified_ids={"V-0001"}))
    assert errors == ["spec_complete is impossible while issues are open: plan tasks for I-0001 first"]
    _, errors = validate_output("planner", json.dumps({**plan, "schema_version": 1}), Expectations(loop=3))
    assert errors == ["schema: schema_version: 2 was expected"]


# ---- a usage limit ---------------------------------------------------------------------------------
USAGE_LIMIT = "You've hit your usage limit. Upgrade to Pro or try again in 8 seconds."


def test_a_usage_limit_pauses_the_run_until_its_reset_then_it_goes_on(tmp_path):
    script = mini_script(1)
    script["loops"][1]["developer"]["fail_runs"] = {"times": 1, "message": USAGE_LIMIT}
    p = new_project(tmp_path, script)
    build = start_build(p, "--loops", "1", "--set", "policy.transient_retries=0")
    wait = wait_for(p, lambda e: e["event"] == "quota_wait")
    human = run_hoh("status", "-w", p.ws)
    shown = json.loads(run_hoh("status", "-w", p.ws, "--json").stdout)
    _, err = build.communicate(timeout=60)
    assert build.returncode == 0, err
    assert shown["state"] == "running" and shown["paused_until"] is not None
    assert "paused until" in human.stdout
    assert wait["role"] == "developer" and wait["error"] == USAGE_LIMIT and 7 < wait["until"] - wait["time"] <= 9
    dev = [a for a in attempts(p.ws) if a["role"] == "developer"]
    assert len(dev) == 1 and dev[0]["ok"]  # the wait cost no attempt and no retry
    attempt = p.ws / "state/loops/0001/roles/developer/attempt-1"
    assert "usage limit" in (attempt / "events.quota-1.jsonl").read_text()
    assert status(p.ws)["state"] == "finished" and status(p.ws)["paused_until"] is None


def test_a_reset_beyond_the_wait_limit_stops_the_run_and_resume_continues(tmp_path):
    script = mini_script(1)
    script["loops"][1]["developer"]["fail_runs"] = {"times": 1, "message": USAGE_LIMIT}
    p = new_project(tmp_path, script)
    built = run_hoh("build", p.spec, "-w", p.ws, "-n", "1", "--set", "policy.max_quota_wait_hours=0")
    assert built.returncode == 5 and "quota_exhausted" in built.stderr
    result = json.loads((p.ws / "state/loops/0001/roles/developer/attempt-1/result.json").read_text())
    assert result["harness"]["outcome"] == "quota_exhausted"
    assert run_hoh("resume", "-w", p.ws, "-q").returncode == 0 and status(p.ws)["state"] == "finished"


@pytest.mark.parametrize("message,expected", [
    ("You've hit your limit · resets 8pm (Africa/Cairo)", "2026-07-04T20:00:00+03:00"),
    ("You’ve hit your session limit · resets 12:50am (America/Los_Angeles)", "2026-07-05T00:50:00-07:00"),
    ("You've hit your limit · resets Jan 30, 11:30am (Asia/Calcutta)", "2027-01-30T11:30:00+05:30"),
    ("You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again in 5 days "
     "22 hours 11 minutes.", "2026-07-10T08:11:00+00:00"),
    ("You've hit your usage limit. Upgrade to Plus to continue using Codex (https://chatgpt.com/explore/plus), "
     "or try again at Jul 5th, 2026 8:19 PM.", None),
])
def test_reset_times_of_the_real_clis(message, expected):
    now = datetime(2026, 7, 4, 10, 0, tzinfo=timezone.utc)
    when = reset_time(message, now)
    if expected is None:  # no zone named: the machine's own
        local = when.astimezone(now.astimezone().tzinfo)
        assert (local.month, local.day, local.hour, local.minute) == (7, 5, 20, 19)
    else:
        assert when.isoformat() == expected


def test_each_adapter_types_its_usage_limit_message():
    from hoh.config import HarnessConfig
    from hoh.harness import registry
    from hoh.harness.attempt import Outcome
    for name in ("codex", "claude", "pi", "opencode", "scripted"):
        adapter = registry.create(HarnessConfig(name=name))
        assert adapter.outcome_of("You've hit your limit · resets 1pm", status=429) is Outcome.quota_exhausted
        assert adapter.outcome_of("429 Too Many Requests", status=429) is Outcome.rate_limited


# ---- hooks ----------------------------------------------------------------------------------------
def test_hooks_get_the_summary_and_a_failing_hook_never_stops_the_run(tmp_path):
    p = new_project(tmp_path, metered(2))
    log = tmp_path / "hook.jsonl"
    on_loop_end = json.dumps(["sh", "-c", f"cat >> {log}; echo >> {log}"])
    built = run_hoh("build", p.spec, "-w", p.ws, "-n", "2", "--set", f"hooks.on_loop_end={on_loop_end}",
                    "--set", "hooks.on_stop=sh -c 'echo the pager is down >&2; exit 3'")
    assert built.returncode == 0, built.stderr
    assert "hooks.on_stop failed (exit code 3: the pager is down); the run goes on" in built.stderr
    summaries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(s["event"], s["loop"], s["status"], s["tokens"]) for s in summaries] == \
        [("loop_end", 1, "pass", 4000), ("loop_end", 2, "pass", 4000)]
    assert summaries[1]["run"]["tokens"] == 8000 and summaries[1]["run"]["loops_finished"] == 2
    ran = [e for e in events(p.ws) if e["event"] == "hook_ran"]
    assert [(e["hook"], e["exit_code"]) for e in ran] == [("on_loop_end", 0), ("on_loop_end", 0), ("on_stop", 3)]
    assert (p.ws / "state/hooks/stop-1-on_stop.err").read_text() == "the pager is down\n"

    q = new_project(tmp_path, metered(1), "slow")
    slow = run_hoh("build", q.spec, "-w", q.ws, "-n", "1", "--set", "hooks.on_loop_end=sleep 30",
                   "--set", "hooks.timeout_seconds=0.5", "--set", "hooks.on_stop=/no/such/hook")
    assert slow.returncode == 0, slow.stderr
    ran = {e["hook"]: e for e in events(q.ws) if e["event"] == "hook_ran"}
    assert ran["on_loop_end"]["exit_code"] is None and "killed after 0.5s" in ran["on_loop_end"]["error"]
    assert ran["on_stop"]["exit_code"] is None and "could not start" in ran["on_stop"]["error"]


# ---- per-role harnesses and models ----------------------------------------------------------------
def test_per_role_models_are_recorded_with_their_tokens_and_cost(tmp_path):
    p = new_project(tmp_path, metered(2))
    built = run_hoh("build", p.spec, "-w", p.ws, "-n", "2", "-q", "--set", "harness.model=gpt-4o",
                    "--set", "roles.planner.model=gpt-4o-mini", "--set", "roles.qa.model=house-model",
                    "--set", "roles.qa.price={input: 1, output: 2}")
    assert built.returncode == 0, built.stderr
    roles = status(p.ws)["roles"]
    assert {r: (v["harness"], v["model"], v["attempts"], v["tokens"]) for r, v in roles.items()} == {
        "planner": ("scripted", "gpt-4o-mini", 2, 2000), "developer": ("scripted", "gpt-4o", 2, 4000),
        "qa": ("scripted", "house-model", 2, 2000)}
    by_role = {a["role"]: a for a in attempts(p.ws)}
    assert {r: a["cost_source"] for r, a in by_role.items()} == {"planner": "table", "developer": "table",
                                                                  "qa": "price"}
    assert roles["qa"]["cost_usd"] == pytest.approx(2 * (600 * 1 + 400 * 2) / 1e6)
    assert roles["planner"]["cost_usd"] < roles["developer"]["cost_usd"]  # mini is cheaper per token
    loops = status(p.ws)["loops"]
    assert loops[0]["usage"]["qa"]["cost_usd"] == pytest.approx((600 + 800) / 1e6)
    assert sum(lp["cost_usd"] for lp in loops) == pytest.approx(status(p.ws)["cost_usd"])
    from hoh.report.data import read_run
    run = read_run(p.ws)
    assert {r: (s.harness, s.model) for r, s in run.roles.items()} == {
        "planner": ("scripted", "gpt-4o-mini"), "developer": ("scripted", "gpt-4o"), "qa": ("scripted", "house-model")}


def test_each_role_sees_only_its_own_harness_home(tmp_path):
    from hoh.config import apply_overrides
    from hoh.runtime.loop import Runtime
    from hoh.runtime.setup import role_adapters
    from hoh.store.journal import Journal
    from hoh.store.workspace import create_workspace
    p = new_project(tmp_path, metered(1))
    config = apply_overrides(p.config(1), ["roles.planner.harness=pi", "roles.qa.harness=codex"])
    ws = create_workspace(p.ws, p.spec, config)
    runtime = Runtime(ws, Journal(ws.paths.journal), role_adapters(ws.config))
    homes = {role: runtime.runner.home(role) for role in ("planner", "developer", "qa")}
    assert homes == {"planner": ws.paths.scratch / "homes/pi/planner",
                     "developer": ws.paths.scratch / "homes/scripted/developer",
                     "qa": ws.paths.scratch / "homes/codex/qa"}
    for home in homes.values():
        home.mkdir(parents=True)
    from dataclasses import replace

    from hoh.envs.local.jail import bwrap_argv
    for role, own in homes.items():
        jail = runtime.jobs._jail(role, [ws.paths.spec])
        argv = bwrap_argv(replace(jail, writable=(*jail.writable, own)), ["true"], own)  # as the runner adds it
        assert ("--bind", str(own), str(own)) in zip(argv, argv[1:], argv[2:])
        # The other roles' homes are not in its filesystem at all (no hiding needed), nor is the homes dir.
        assert not [a for a in argv if a.startswith(str(ws.paths.scratch / "homes")) and not a.startswith(str(own))]


# ---- status in a narrow terminal ------------------------------------------------------------------
def test_status_reads_whole_in_80_columns(tmp_path):
    p = new_project(tmp_path, metered(3))
    built = run_hoh("build", p.spec, "-w", p.ws, "-n", "3", "-q", "--set", "budget.tokens=100000",
                    "--set", "harness.model=gpt-4o", "--set", "roles.planner.model=gpt-4o-mini",
                    "--set", "policy.patience=5")
    assert built.returncode == 0, built.stderr
    env = {**os.environ, "COLUMNS": "80"}
    shown = subprocess.run([sys.executable, "-m", "hoh", "status", "-w", str(p.ws)], env=env, capture_output=True,
                           text=True)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines) and "…" not in shown.stdout
    data = status(p.ws)
    for loop in data["loops"]:  # every cell of a loop's row, whole on its line
        row = next(line for line in lines if line.split()[:1] == [str(loop["loop"])])
        tree = loop["candidate_id"].rpartition("-")[2][:8]
        cost = f"${loop['cost_usd']:.4f}" if loop["cost_usd"] < 0.1 else f"${loop['cost_usd']:.2f}"
        assert row.split() == [str(loop["loop"]), loop["status"], f"{loop['criteria_verified']}/1", "1/1/1",
                               row.split()[4], "0/0/0", f"{loop['tokens']:,}", cost, tree]
    for role, info in data["roles"].items():
        row = next(line for line in lines if line.startswith(role + " "))
        assert row.split()[:4] == [role, "scripted", info["model"], "3"]
    assert "budget: tokens 12,000 / 100,000" in shown.stdout
    assert "patience: 2 of 5 loops without progress" in shown.stdout


# ---- one defect, one regression issue -------------------------------------------------------------
def test_the_demos_regression_is_one_issue_per_defect(tmp_path):
    ws = tmp_path / "ws"
    assert run_hoh("build", DEMO / "spec.md", "--loops", "2", "-w", ws, "-q").returncode == 0
    ledger = Ledger.load(ws / "state" / "ledger.json")
    qa = json.loads((ws / "state/loops/0002/qa.json").read_text())
    assert [f.get("behaviour_id") for f in qa["findings"]] == ["V-0002"]  # QA named the behaviour it broke
    open_issues = [i for i in ledger.issues if i["status"] in ("open", "reopened")]
    assert [(i["id"], i["behaviour_id"], i["title"]) for i in open_issues] == [
        ("I-0002", "V-0002", "Subtraction drops the sign: 7 - 10 prints 3")]
    assert len(ledger.issues) == 2 and ledger.behaviour("V-0002")["status"] == "broken"


def qa_report(preserved_status: str, findings: list[dict]) -> dict:
    return {"schema_version": 1, "loop": 2, "candidate_id": "loop-0002-000000000000", "verdict": "partial",
            "criteria": [], "preserved": [{"id": "V-0001", "status": preserved_status, "evidence": []}],
            "findings": findings}


def ledger_with_one_behaviour() -> Ledger:
    ledger = Ledger()
    plan = {"tasks": [{"id": "T1", "issues": [], "acceptance": [{"id": "T1.A1", "condition": "adds"}]}],
            "preserve": []}
    ledger.apply_loop(1, plan, None, "loop-0001-000000000000", {"verdict": "pass",
        "criteria": [{"id": "T1.A1", "status": "verified", "evidence": []}], "preserved": [], "findings": []})
    return ledger


def test_a_finding_naming_the_broken_behaviour_is_the_same_regression():
    finding = {"title": "2 + 2 gives 5", "severity": "blocker", "repro": "calc 2 + 2", "evidence": []}
    plan = {"tasks": [], "preserve": [{"id": "V-0001", "behaviour": "adds"}]}
    unnamed = ledger_with_one_behaviour()
    unnamed.apply_loop(2, plan, None, "loop-0002-000000000000", qa_report("failed", [finding]))
    assert [i["title"] for i in unnamed.issues] == ["Regression: adds", "2 + 2 gives 5"]  # one defect, two issues
    named = ledger_with_one_behaviour()
    named.apply_loop(2, plan, None, "loop-0002-000000000000",
                     qa_report("failed", [{**finding, "behaviour_id": "V-0001"}]))
    assert [(i["title"], i["severity"], i["behaviour_id"], i["status"]) for i in named.issues] == [
        ("2 + 2 gives 5", "blocker", "V-0001", "open")]
    # Found again by a probe in a later loop (the behaviour not preserved): the same issue, not a new one.
    named.apply_loop(3, {"tasks": [], "preserve": []}, None, "loop-0003-000000000000",
                     {**qa_report("failed", [{**finding, "behaviour_id": "V-0001"}]), "loop": 3, "preserved": []})
    assert len(named.issues) == 1 and named.issues[0]["history"][-1]["loop"] == 3
    assert named.progress(1) == {"behaviours_added": 1, "reverified": 0, "issues_closed": 0}


def test_qa_cannot_name_a_behaviour_that_does_not_exist(tmp_path):
    from hoh.runtime.validate import Expectations, validate_output
    plan = {"tasks": [], "preserve": []}
    report = {**qa_report("verified", [{"title": "x", "severity": "minor", "repro": "", "evidence": [],
                                        "behaviour_id": "V-0042"}]), "preserved": []}
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    _, errors = validate_output("qa", json.dumps(report), Expectations(
        loop=2, plan=plan, candidate_id="loop-0002-000000000000", evidence_dir=evidence, behaviour_ids={"V-0001"}))
    assert errors == ["findings cite behaviour ids that are not in the register: V-0042"]


def test_new_events_replay_on_resume_after_kill_9(tmp_path):
    """A run killed during a usage-limit pause resumes; the journal's new events fold as they were."""
    script = mini_script(1)
    later = USAGE_LIMIT.replace("8 seconds", "60 seconds")
    script["loops"][1]["developer"]["fail_runs"] = {"times": 1, "message": later}
    p = new_project(tmp_path, script)
    build = start_build(p, "--loops", "1")
    wait_for(p, lambda e: e["event"] == "quota_wait")
    os.kill(build.pid, signal.SIGKILL)
    build.wait()
    from hoh.store.journal import Journal, RunHistory
    history = RunHistory.read(Journal(p.state("journal.jsonl")))
    assert history.quota_wait is not None and history.run_finished is None
    assert status(p.ws)["state"] == "interrupted" and status(p.ws)["paused_until"] is None
    resumed = run_hoh("resume", "-w", p.ws, "-q")
    assert resumed.returncode == 0, resumed.stderr
    assert [a["role"] for a in attempts(p.ws)] == ["planner", "developer", "qa"]
