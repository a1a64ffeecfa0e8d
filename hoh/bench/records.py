"""One record per task, read from its Harbor jobs: HoH@1..@T with every reward key, errors with
Harbor's reason, tokens and cost. Also what a task's grade job must cover (`grading_plan`).

HoH@t is the grade of loop t's candidate. A loop that left no candidate of its own (the run
stopped, the time budget ended it, or its Developer failed and the run went on) carries the
grade of the newest candidate before it, marked by `graded_loop`; before any candidate the
project is still A_0, the task's files as shipped, graded as such (loop 0, Harbor's nop agent).
An agent trial that ended before hoh finished any loop has no candidate to grade: each loop is
an error with the trial's own Harbor reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..paths import AgentRunPaths
from .results import (
    TASKS_SCHEMA_VERSION,
    RunPaths,
    grade,
    grades_of,
    harbor_error,
    last_error,
    read_json,
    rewards_of,
    seconds_between,
    trial_results,
)
from .settings import BenchSettings

RECORD_SCHEMA_VERSION = 1


def own_candidates(trial: Path, loops: int) -> list[int]:
    """Loops ≤ `loops` whose candidate artifact Harbor collected into the trial dir."""
    paths = AgentRunPaths.for_trial(trial)
    return [t for t in range(1, loops + 1) if Path(paths.candidate_record(t)).is_file()]


def hoh_loops(result: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The finished loops hoh reported into Harbor's agent context (status, verdict, candidate id)."""
    meta = ((result.get("agent_result") or {}).get("metadata") or {}).get("hoh") or {}
    return {int(entry["loop"]): entry for entry in meta.get("loops") or [] if "loop" in entry}


def grading_plan(trial: Path, result: dict[str, Any], loops: int) -> list[int]:
    """The loops a grade job must verify: every loop with a candidate of its own, and 0 (A_0) when
    hoh finished a loop before its first candidate."""
    own = own_candidates(trial, loops)
    needs_a0 = bool(hoh_loops(result)) and (not own or own[0] > 1)
    return ([0] if needs_a0 else []) + own


def usage(result: dict[str, Any]) -> tuple[dict[str, int] | None, float | None]:
    agent = result.get("agent_result") or {}
    if agent.get("n_input_tokens") is None and agent.get("n_output_tokens") is None:
        return None, agent.get("cost_usd")
    return ({"input": agent.get("n_input_tokens") or 0, "cached_input": agent.get("n_cache_tokens") or 0,
             "output": agent.get("n_output_tokens") or 0}, agent.get("cost_usd"))


def base_record(key: str, settings: BenchSettings) -> dict[str, Any]:
    return {"schema_version": RECORD_SCHEMA_VERSION, "task": key, "task_name": None, "outcome": "pending",
            "harness": settings.harness, "model": settings.model, "mode": settings.mode,
            "ablate": list(settings.ablate), "loops": [], "scores": [None] * settings.loops, "final_score": None,
            "live_rewards": None, "tokens": None, "cost_usd": None, "wall_seconds": None, "error": None,
            "agent_trial": None, "note": None}


def task_record(paths: RunPaths, settings: BenchSettings, entry: dict[str, Any]) -> dict[str, Any]:
    """The record of one task (an entry of tasks.json), from whatever its jobs have left so far."""
    key = entry["key"]
    record = base_record(key, settings)
    if entry.get("error"):  # refused before any job started (e.g. a ProgramBench image missing here)
        return {**record, "outcome": "error", "error": entry["error"],
                "loops": [_loop(t, None, {"rewards": None, "score": None, "error": entry["error"], "trial": None})
                          for t in range(1, settings.loops + 1)]}
    agent = trial_results(paths.agent_job(key).dir)
    if not agent:
        crash = last_error(paths.agent_job(key)) if paths.agent_job(key).config.exists() else None
        if crash is None:
            return record
        why = f"Harbor stopped before the trial finished: {crash}"
        return {**record, "outcome": "error", "error": why,
                "loops": [_loop(t, None, {"rewards": None, "score": None, "error": why, "trial": None})
                          for t in range(1, settings.loops + 1)]}
    trial, result = agent[-1]
    tokens, cost = usage(result)
    record.update(task_name=result.get("task_name"), live_rewards=rewards_of(result), tokens=tokens, cost_usd=cost,
                  wall_seconds=seconds_between(result), agent_trial=str(trial), note=harbor_error(result))
    if settings.is_oracle:
        loops = [_loop(1, None, grade(rewards_of(result), harbor_error(result), str(trial)), graded_loop=1)]
    else:
        loops = hoh_grades(paths, key, trial, result, settings.loops)
    record["loops"] = loops
    record["scores"] = [entry["score"] for entry in loops]
    record["final_score"] = record["scores"][-1] if record["scores"] else None
    errors = [entry["error"] for entry in loops if entry["error"]]
    pending = [entry for entry in loops if entry.get("pending")]
    record["outcome"] = "pending" if pending and not errors else "error" if errors else "completed"
    record["error"] = errors[0] if errors else None
    return record


def hoh_grades(paths: RunPaths, key: str, trial: Path, result: dict[str, Any], loops: int) -> list[dict[str, Any]]:
    finished = hoh_loops(result)
    own = set(own_candidates(trial, loops))
    grades = grades_of(paths, key)
    job = paths.grade_job(key)
    crash = last_error(job) if job.config.exists() and not job.complete() else None
    out, graded = [], None
    for t in range(1, loops + 1):
        if t in own:
            graded = t
        elif graded is None and finished:
            graded = 0
        if graded is None:  # hoh never finished a loop: nothing to grade, the trial's own error says why
            why = harbor_error(result) or "hoh finished no loop and left no candidate"
            out.append(_loop(t, finished.get(t), {"rewards": None, "score": None, "error": why, "trial": None}))
            continue
        g = grades.get(graded)
        if g is None:  # not graded (yet): Harbor stopped in the grade job, or it has not run
            g = {"rewards": None, "score": None, "trial": None,
                 "error": f"Harbor stopped before grading it: {crash}" if crash else None, "pending": not crash}
        out.append(_loop(t, finished.get(t), g, graded_loop=graded))
    return out


def _loop(t: int, hoh: dict[str, Any] | None, g: dict[str, Any], graded_loop: int | None = None) -> dict[str, Any]:
    hoh = hoh or {}
    return {"loop": t, "hoh_status": hoh.get("status"), "verdict": hoh.get("verdict"),
            "candidate_id": hoh.get("candidate_id"), "graded_loop": graded_loop, **g}


def records_of(paths: RunPaths, settings: BenchSettings) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Every planned task's record, and the task dirs Harbor would skip (with its reason)."""
    stored = read_json(paths.tasks, "task list", TASKS_SCHEMA_VERSION) if paths.tasks.exists() else {"tasks": []}
    return [task_record(paths, settings, e) for e in stored["tasks"]], stored.get("invalid", [])
