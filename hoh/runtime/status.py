"""A read-only summary of a workspace for `hoh status`: loops, verdicts, attempts, time, issues, tokens.

Everything is derived from the journal and the per-loop state files; nothing is written.
"""

from __future__ import annotations

import fcntl
import os
from typing import Any

from ..paths import ROLES
from .journal import Journal
from .workspace import Workspace, load_state

USAGE_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")


def _lock_held(ws: Workspace) -> bool:
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


def _empty_usage() -> dict[str, Any]:
    return {**{k: 0 for k in USAGE_KEYS}, "cost_usd": None}


def _add_usage(total: dict[str, Any], usage: dict[str, Any]) -> None:
    for key in USAGE_KEYS:
        total[key] += usage.get(key, 0) or 0
    if usage.get("cost_usd") is not None:
        total["cost_usd"] = (total["cost_usd"] or 0) + usage["cost_usd"]


def workspace_status(ws: Workspace) -> dict[str, Any]:
    loops: dict[int, dict[str, Any]] = {}
    run_usage = _empty_usage()
    state, target = "not started", ws.config.loops

    def loop_entry(t: int) -> dict[str, Any]:
        return loops.setdefault(t, {
            "loop": t, "status": "running", "verdict": None, "candidate_id": None, "criteria_verified": 0,
            "criteria_total": 0, "attempts": {r: 0 for r in ROLES}, "seconds": 0.0, "issues": None,
            "usage": {r: _empty_usage() for r in ROLES}, "_start": None})

    for ev in Journal(ws.paths.journal).events():
        kind = ev["event"]
        if kind == "run_started":
            state, target = "interrupted", ev["target_loops"]
        elif kind == "run_finished":
            state = ev["status"]
        elif kind == "loop_started":
            loop_entry(ev["loop"])["_start"] = ev["time"]
        elif kind == "attempt_finished":
            entry = loop_entry(ev["loop"])
            entry["attempts"][ev["role"]] += 1
            _add_usage(entry["usage"][ev["role"]], ev.get("usage", {}))
            _add_usage(run_usage, ev.get("usage", {}))
        elif kind == "loop_finished":
            entry = loop_entry(ev["loop"])
            entry.update(status=ev["status"], candidate_id=ev["candidate_id"], criteria_verified=ev["verified"],
                         issues=ev.get("issues"))
            if entry["_start"] is not None:
                entry["seconds"] = round(ev["time"] - entry["_start"], 2)

    for t, entry in loops.items():
        plan_path, qa_path = ws.paths.loop(t).plan, ws.paths.loop(t).qa
        if plan_path.exists():
            plan = load_state(plan_path, ("schema_version", "tasks"))
            entry["criteria_total"] = sum(len(task.get("acceptance", [])) for task in plan["tasks"])
        if qa_path.exists():
            entry["verdict"] = load_state(qa_path, ("schema_version", "verdict"))["verdict"]
        del entry["_start"]

    if state == "interrupted" and _lock_held(ws):
        state = "running"
    return {
        "schema_version": 1,
        "workspace": str(ws.paths.root),
        "harness": ws.config.harness.name,
        "spec_sha256": ws.identity["spec_sha256"],
        "state": state,
        "target_loops": target,
        "loops_finished": sum(1 for e in loops.values() if e["status"] != "running"),
        "usage": run_usage,
        "loops": [loops[t] for t in sorted(loops)],
    }
