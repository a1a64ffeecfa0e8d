"""A read-only summary of a workspace for `hoh status`: loops, verdicts, attempts, time, issues, tokens.

The figures come from the journal's one fold (`RunHistory`) and the per-loop state files; this
module only shapes them. Nothing is written.
"""

from __future__ import annotations

import fcntl
import os
from typing import Any

from ..fsutil import load_state
from .journal import Journal, LoopStats, RunHistory
from .workspace import Workspace


def lock_held(ws: Workspace) -> bool:
    """Whether a hoh process is working in the workspace right now."""
    if not ws.paths.lock.exists():
        return False
    fd = os.open(ws.paths.lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def run_state(history: RunHistory, ws: Workspace) -> str:
    if history.run_started is None:
        return "not started"
    if history.run_finished is not None:
        return history.run_finished.status
    return "running" if lock_held(ws) else "interrupted"


def _loop_entry(ws: Workspace, stats: LoopStats) -> dict[str, Any]:
    lp = ws.paths.loop(stats.loop)
    criteria_total, verdict = 0, None
    if lp.plan.exists():
        plan = load_state(lp.plan, ("schema_version", "tasks"))
        criteria_total = sum(len(task.get("acceptance", [])) for task in plan["tasks"])
    if lp.qa.exists():
        verdict = load_state(lp.qa, ("schema_version", "verdict"))["verdict"]
    return {
        "loop": stats.loop, "status": stats.status, "verdict": verdict, "candidate_id": stats.candidate_id,
        "criteria_verified": stats.verified, "criteria_total": criteria_total, "attempts": dict(stats.attempts),
        "seconds": stats.seconds, "role_seconds": dict(stats.role_seconds), "issues": stats.issues,
        "usage": {role: usage.to_json() for role, usage in stats.usage.items()},
    }


def workspace_status(ws: Workspace) -> dict[str, Any]:
    history = RunHistory.read(Journal(ws.paths.journal))
    loops = history.loop_list()
    return {
        "schema_version": 1,
        "workspace": str(ws.paths.root),
        "harness": ws.config.harness.name,
        "spec_sha256": ws.identity["spec_sha256"],
        "state": run_state(history, ws),
        "target_loops": history.run_started.target_loops if history.run_started else ws.config.loops,
        "loops_finished": sum(1 for s in loops if s.status != "running"),
        "usage": history.usage.to_json(),
        "loops": [_loop_entry(ws, stats) for stats in loops],
    }
