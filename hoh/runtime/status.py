"""A read-only summary of a workspace for `hoh status`: loops, verdicts, attempts, time, issues, tokens.

The figures come from the journal's one fold (`RunHistory`) and the per-loop state files; this
module only shapes them. Nothing is written.
"""

from __future__ import annotations

from typing import Any

from .journal import Journal, LoopStats, RunHistory
from .lock import lock_held as _lock_held
from .workspace import Workspace


def lock_held(ws: Workspace) -> bool:
    """Whether a hoh process is working in the workspace right now."""
    return _lock_held(ws.paths.root)


def run_state(history: RunHistory, ws: Workspace) -> str:
    if history.run_started is None:
        return "not started"
    if history.run_finished is not None:
        return history.run_finished.status
    return "running" if lock_held(ws) else "interrupted"


VERDICTS = ("pass", "partial", "fail")


def _loop_entry(stats: LoopStats) -> dict[str, Any]:
    """One loop's figures, all from the journal's fold: no state file is opened (QA covers every
    acceptance condition of the plan once, so its criteria count is the plan's)."""
    return {
        "loop": stats.loop, "status": stats.status, "verdict": stats.status if stats.status in VERDICTS else None,
        "candidate_id": stats.candidate_id, "criteria_verified": stats.verified, "criteria_total": stats.criteria,
        "attempts": dict(stats.attempts), "seconds": stats.seconds, "role_seconds": dict(stats.role_seconds),
        "issues": stats.issues, "violations": dict(stats.violations),
        "usage": {role: usage.to_json() for role, usage in stats.usage.items()},
    }


def workspace_status(ws: Workspace) -> dict[str, Any]:
    history = RunHistory.read(Journal(ws.paths.journal))
    loops = history.loop_list()
    return {
        "schema_version": 1,
        "workspace": str(ws.paths.root),
        "harness": ws.config.harness.name,
        "sandbox": ws.config.sandbox.mode,
        "spec_sha256": ws.identity["spec_sha256"],
        "state": run_state(history, ws),
        "target_loops": history.run_started.target_loops if history.run_started else ws.config.loops,
        "loops_finished": sum(1 for s in loops if s.status != "running"),
        "usage": history.usage.to_json(),
        "loops": [_loop_entry(stats) for stats in loops],
    }
