"""`hoh note`: a human's note reaches the next loop's Planner, frozen with its inputs, journaled, listed by
`hoh status`; a note written while the run is live never changes a loop already planning; a resume after a
crash gives the Planner the same prompt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from conftest import mini_script, run_hoh
from test_budgets import events, new_project
from test_cli import _fails_cleanly
from test_long_runs import start_build, started, wait_for


def prompt(ws, loop: int, attempt_dir: str = "planner") -> str:
    return (ws / "state" / "loops" / f"{loop:04d}" / "roles" / attempt_dir / "attempt-1" / "prompt.md").read_text()


def frozen_paths(ws, loop: int) -> list[str]:
    manifest = ws / "state" / "loops" / f"{loop:04d}" / "roles" / "planner" / "attempt-1" / "inputs.json"
    return [f["path"] for f in json.loads(manifest.read_text())["files"]]


def status(ws) -> dict:
    return json.loads(run_hoh("status", "-w", ws, "--json").stdout)


def test_a_note_reaches_the_next_planner_only(tmp_path):
    p = new_project(tmp_path, mini_script(3))
    assert run_hoh("build", p.spec, "-w", p.ws, "--loops", "1", "-q").returncode == 0
    assert "Note from a human" not in prompt(p.ws, 1)  # autonomous when nobody writes one
    added = run_hoh("note", "-w", p.ws, "Keep the greeting lower-case.")
    assert added.returncode == 0 and "note N-0001 added" in added.stdout, added.stderr
    assert (p.ws / "state" / "notes" / "N-0001.md").read_text() == "Keep the greeting lower-case.\n"
    assert [e for e in events(p.ws) if e["event"] == "note_added"][0]["note"] == "N-0001"
    assert status(p.ws)["notes"] == [{"id": "N-0001", "loop": None, "state": "pending",
                                      "text": "Keep the greeting lower-case."}]
    assert "note N-0001 for the next loop that plans: Keep the greeting" in run_hoh("status", "-w", p.ws).stdout

    assert run_hoh("resume", "-w", p.ws, "--loops", "2", "-q").returncode == 0
    assert "## Note from a human" in prompt(p.ws, 2) and "Keep the greeting lower-case." in prompt(p.ws, 2)
    assert "state/notes/N-0001.md" in frozen_paths(p.ws, 2)
    assert "Note from a human" not in prompt(p.ws, 3) and "state/notes/N-0001.md" not in frozen_paths(p.ws, 3)
    assert status(p.ws)["notes"][0]["loop"] == 2
    assert run_hoh("status", "-w", p.ws, "--verify").returncode == 0


def test_bad_notes_are_one_line_errors(tmp_path, project):
    project.build()
    journal = (project.ws / "state" / "journal.jsonl").read_bytes()
    _fails_cleanly(run_hoh("note", "-w", project.ws, "   "), "the note is empty")
    _fails_cleanly(run_hoh("note", "-w", tmp_path / "nowhere", "hello"), "not a hoh workspace")
    assert (project.ws / "state" / "journal.jsonl").read_bytes() == journal
    assert not (project.ws / "state" / "notes").exists() and not (project.ws / "hoh.notes").exists()


def test_a_note_written_during_a_live_run_waits_for_the_next_loop_that_plans(tmp_path):
    script = mini_script(3)
    script["loops"][1]["developer"]["actions"].insert(0, {"sleep": 3})
    script["loops"][2]["planner"]["actions"] = [{"sleep": 3}]
    p = new_project(tmp_path, script)
    build = start_build(p, "--loops", "3")
    wait_for(p, started("developer", 1))
    first = run_hoh("note", "-w", p.ws, "NOTE-ONE for loop 2")
    assert first.returncode == 0 and "note queued" in first.stdout, first.stderr
    assert status(p.ws)["notes"] == [{"id": None, "loop": None, "state": "queued", "text": "NOTE-ONE for loop 2"}]
    wait_for(p, started("planner", 2))  # loop 2's inputs are frozen: a note now is loop 3's
    assert run_hoh("note", "-w", p.ws, "NOTE-TWO for loop 3").returncode == 0
    _, err = build.communicate(timeout=120)
    assert build.returncode == 0, err

    assert "NOTE-ONE" in prompt(p.ws, 2) and "NOTE-TWO" not in prompt(p.ws, 2)
    assert "NOTE-TWO" in prompt(p.ws, 3) and "NOTE-ONE" not in prompt(p.ws, 3)
    assert [(n["id"], n["loop"]) for n in status(p.ws)["notes"]] == [("N-0001", 2), ("N-0002", 3)]
    assert not list((p.ws / "hoh.notes").glob("*.json"))
    # The run stored them itself, between role attempts: the guard saw nothing written into state/.
    assert all(not any(loop["violations"].values()) for loop in status(p.ws)["loops"])
    taken = [(e["loop"], e["notes"]) for e in events(p.ws) if e["event"] == "notes_taken"]
    assert taken == [(2, ["N-0001"]), (3, ["N-0002"])]


def test_a_resume_after_a_crash_gives_the_planner_the_same_notes(tmp_path):
    script = mini_script(2)
    script["loops"][2]["planner"]["actions"] = [{"sleep": 4}]
    p = new_project(tmp_path, script)
    assert run_hoh("build", p.spec, "-w", p.ws, "--loops", "1", "-q").returncode == 0
    assert run_hoh("note", "-w", p.ws, "before the crash").returncode == 0
    resume = subprocess.Popen([sys.executable, "-m", "hoh", "resume", "-w", str(p.ws), "-n", "1", "-q"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(p, started("planner", 2))
    frozen = prompt(p.ws, 2)
    os.kill(resume.pid, signal.SIGKILL)  # hoh only; its Planner is left running, as in a real crash
    resume.wait()
    agent = next(e["pid"] for e in events(p.ws) if e["event"] == "process_started" and e["loop"] == 2)
    try:
        os.killpg(agent, signal.SIGKILL)
    except ProcessLookupError:
        pass
    # Loop 2's notes were fixed before the crash: this one is for the loop after.
    assert "note N-0002 added" in run_hoh("note", "-w", p.ws, "after the crash").stdout

    resumed = run_hoh("resume", "-w", p.ws, "-q")
    assert resumed.returncode == 0, resumed.stderr
    assert prompt(p.ws, 2) == frozen and prompt(p.ws, 2, attempt_dir="planner.interrupted-1") == frozen
    assert "before the crash" in frozen and "after the crash" not in frozen
    assert [(n["id"], n["loop"], n["state"]) for n in status(p.ws)["notes"]] == [("N-0001", 2, "taken"),
                                                                                ("N-0002", None, "pending")]


def test_note_help():
    result = run_hoh("note", "--help")
    assert result.returncode == 0 and "next loop's Planner" in result.stdout
