"""What the overhead benchmarks share: a scripted run whose Developer changes one file per loop, and hoh's own
time in each of its loops, read from the journal."""

from __future__ import annotations

from pathlib import Path


def loop_script(loops: int) -> dict:
    """The scripted agent's script: each loop's Developer changes one file, QA checks it; no role cites an issue."""
    def loop(t: int) -> dict:
        return {
            "planner": {"reply": {"goal": f"change one file ({t})", "preserve": [], "out_of_scope": [], "tasks": [
                {"id": "T1", "title": "touch", "details": "change one file", "issues": [],
                 "acceptance": [{"id": "T1.A1", "condition": "the file holds the loop number", "method": "black-box"}]}]}},
            "developer": {"actions": [{"write": {"path": f"src/d{t % 10}/f{t % 7}.txt", "content": f"loop {t}\n"}}],
                          "reply": {"summary": "one file", "tasks": [{"id": "T1", "status": "done", "notes": ""}],
                                    "self_tests": [], "known_gaps": []}},
            "qa": {"checks": [{"id": "T1.A1", "run": f"grep -q 'loop {t}' src/d{t % 10}/f{t % 7}.txt"}]},
        }
    return {"schema_version": 1, "loops": {t: loop(t) for t in range(1, loops + 1)}}


def overheads(ws: Path) -> dict[int, float]:
    """loop → hoh's own seconds in it, from the journal's one fold: neither a role's attempts nor the replay and
    admission of checks (the project's own tests, run by the Runtime)."""
    from hoh.store.journal import Journal, RunHistory
    history = RunHistory.read(Journal(ws / "state" / "journal.jsonl"))
    return {t: round(s.seconds - sum(s.role_seconds.values()) - sum(s.check_step_seconds.values()), 4)
            for t, s in history.loops.items() if s.finished is not None}
