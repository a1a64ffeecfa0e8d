"""One record per task, read from its Harbor jobs: HoH@1..@T with every reward key, each loop's state, errors
with their cause, the task's calibration, tokens and cost. Also what a task's grade job must cover.

HoH@t is the grade of loop t's candidate. Every loop is in one state (`LoopState`):
- graded: its own candidate, graded by the task's verifier;
- carried: it left no candidate of its own although no role failed (hoh stopped before it: the spec was
  complete, the time budget ended the run) and carries the grade of the newest candidate before it
  (`graded_loop`; 0 is A_0, the task's files as shipped, graded with Harbor's nop agent);
- failed: a role of the loop failed (a harness error, a model it never reached, a crash): an error with the
  role's reason, never a grade;
- not_run: the trial ended (Harbor recorded its exception) before hoh finished the loop;
- ungraded: its candidate could not be graded (Harbor's reason); pending: not graded yet.
A task is `completed` when every loop is graded or carried; one loop in error makes the task an `error`
(listed with its cause, left out of the means); a task whose reference solution cannot reach the maximum here
is `not_gradable` (see calibrate.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from ..paths import AgentRunPaths
from ..statuses import LoopStatus
from .calibrate import Calibration, CalibrationResult, calibration_of
from .causes import cause_of
from .results import (
    TASKS_SCHEMA_VERSION,
    RunPaths,
    grade,
    grades_of,
    harbor_error,
    last_error,
    read_json,
    rewards_of,
    score_of,
    seconds_between,
    trial_results,
)
from .settings import BenchSettings

RECORD_SCHEMA_VERSION = 2
FAILED_STATUSES = frozenset({LoopStatus.PLANNER_FAILED, LoopStatus.DEVELOPER_FAILED, LoopStatus.QA_FAILED})


class LoopState(StrEnum):
    GRADED = "graded"
    CARRIED = "carried"
    FAILED = "failed"
    NOT_RUN = "not_run"
    UNGRADED = "ungraded"
    PENDING = "pending"

    @property
    def is_error(self) -> bool:
        return self in (LoopState.FAILED, LoopState.NOT_RUN, LoopState.UNGRADED)


class Outcome(StrEnum):
    COMPLETED = "completed"
    ERROR = "error"
    PENDING = "pending"
    NOT_GRADABLE = "not_gradable"


@dataclass(frozen=True)
class PlannedLoop:
    """What the agent trial says of loop t: its state, and which loop's candidate grades it (0: A_0)."""

    loop: int
    state: LoopState
    source: int | None = None
    hoh: dict[str, Any] | None = None
    why: str | None = None


def own_candidates(trial: Path, loops: int) -> list[int]:
    """Loops ≤ `loops` whose candidate artifact Harbor collected into the trial dir."""
    paths = AgentRunPaths.for_trial(trial)
    return [t for t in range(1, loops + 1) if Path(paths.candidate_record(t)).is_file()]


def hoh_loops(result: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The finished loops hoh reported into Harbor's agent context (status, verdict, candidate id)."""
    meta = ((result.get("agent_result") or {}).get("metadata") or {}).get("hoh") or {}
    return {int(entry["loop"]): entry for entry in meta.get("loops") or [] if "loop" in entry}


def hoh_meta(result: dict[str, Any]) -> dict[str, Any]:
    return ((result.get("agent_result") or {}).get("metadata") or {}).get("hoh") or {}


def plan_loops(trial: Path, result: dict[str, Any], loops: int) -> list[PlannedLoop]:
    """Each loop's state as the agent trial left it (see the module's doc)."""
    finished, own = hoh_loops(result), set(own_candidates(trial, loops))
    exception = harbor_error(result)
    meta = hoh_meta(result)
    source: int | None = None
    out = []
    for t in range(1, loops + 1):
        entry = finished.get(t)
        if t in own:
            source = t
        if entry and entry.get("status") in FAILED_STATUSES:
            why = entry.get("error") or str(entry["status"]).replace("_", " ")
            out.append(PlannedLoop(t, LoopState.FAILED, hoh=entry, why=f"loop {t}: {why}"))
        elif entry or (finished and not exception):
            # finished without a candidate of its own, or after hoh stopped as planned or out of time
            out.append(PlannedLoop(t, LoopState.GRADED if t in own else LoopState.CARRIED,
                                   source if source is not None else 0, entry,
                                   None if entry else f"hoh stopped ({meta.get('status')}) before loop {t}"))
        else:
            why = exception or meta.get("error") or "hoh finished no loop and left no candidate"
            out.append(PlannedLoop(t, LoopState.NOT_RUN, hoh=entry,
                                   why=f"loop {t} not run: the trial ended in {why}" if finished else why))
    return out


def grading_plan(trial: Path, result: dict[str, Any], loops: int) -> list[int]:
    """The loops a grade job must verify: each candidate some loop is graded by (0: A_0, with Harbor's nop)."""
    return sorted({p.source for p in plan_loops(trial, result, loops) if p.source is not None})


def usage(result: dict[str, Any]) -> tuple[dict[str, int] | None, float | None]:
    agent = result.get("agent_result") or {}
    if agent.get("n_input_tokens") is None and agent.get("n_output_tokens") is None:
        return None, agent.get("cost_usd")
    return ({"input": agent.get("n_input_tokens") or 0, "cached_input": agent.get("n_cache_tokens") or 0,
             "output": agent.get("n_output_tokens") or 0}, agent.get("cost_usd"))


def base_record(key: str, settings: BenchSettings, metric: str | None) -> dict[str, Any]:
    return {"schema_version": RECORD_SCHEMA_VERSION, "task": key, "task_name": None, "outcome": Outcome.PENDING,
            "harness": settings.harness, "model": settings.model, "mode": settings.mode,
            "ablate": list(settings.ablate), "metric": metric, "loops": [], "scores": [None] * settings.loops,
            "final_score": None, "live_rewards": None, "tokens": None, "cost_usd": None, "wall_seconds": None,
            "error": None, "cause": None, "agent_trial": None, "note": None, "note_cause": None, "calibration": None}


def _not_run(loops: int, why: str) -> list[dict[str, Any]]:
    return [_loop(PlannedLoop(t, LoopState.NOT_RUN, why=why), None, None) for t in range(1, loops + 1)]


def task_record(paths: RunPaths, settings: BenchSettings, entry: dict[str, Any],
                metric: str | None = None) -> dict[str, Any]:
    """The record of one task (an entry of tasks.json), from whatever its jobs have left so far."""
    record = base_record(entry["key"], settings, metric)
    calibration = calibration_of(paths, entry) if settings.calibrates else CalibrationResult(Calibration.OFF)
    record["calibration"] = calibration.to_json()
    if settings.check_only:
        return {**record, "outcome": calibration.state.value, "error": calibration.reason,
                "cause": cause_of(calibration.reason)}
    if entry.get("error"):  # refused before any job started (e.g. a ProgramBench image missing here)
        return _finish(record, _not_run(settings.loops, entry["error"]), metric)
    if calibration.state is Calibration.PENDING:
        return record
    agent = trial_results(paths.agent_job(entry["key"]).dir)
    if calibration.state is Calibration.NOT_GRADABLE and not agent:
        why = f"not gradable here: {calibration.reason}"
        return {**_finish(record, _not_run(settings.loops, why), metric), "outcome": Outcome.NOT_GRADABLE}
    if not agent:
        job = paths.agent_job(entry["key"])
        crash = last_error(job) if job.config.exists() else None
        if crash is None:
            return record
        return _finish(record, _not_run(settings.loops, f"Harbor stopped before the trial finished: {crash}"), metric)
    trial, result = agent[-1]
    tokens, cost = usage(result)
    note = harbor_error(result)
    record.update(task_name=result.get("task_name"), live_rewards=rewards_of(result), tokens=tokens, cost_usd=cost,
                  wall_seconds=seconds_between(result), agent_trial=str(trial), note=note,
                  note_cause=cause_of(note))
    if settings.is_oracle:
        g = grade(rewards_of(result), note, str(trial))
        planned = PlannedLoop(1, LoopState.UNGRADED if g["error"] else LoopState.GRADED, 1)
        loops = [_loop(planned, g, metric)]
    else:
        loops = hoh_grades(paths, entry["key"], trial, result, settings.loops, metric)
    record = _finish(record, loops, metric)
    if calibration.state is Calibration.NOT_GRADABLE:
        record.update(outcome=Outcome.NOT_GRADABLE, error=f"not gradable here: {calibration.reason}")
        record["cause"] = cause_of(record["error"])
    return record


def _finish(record: dict[str, Any], loops: list[dict[str, Any]], metric: str | None) -> dict[str, Any]:
    record["loops"] = loops
    record["scores"] = [entry["score"] for entry in loops]
    record["final_score"] = record["scores"][-1] if record["scores"] else None
    errors = [entry["error"] for entry in loops if entry["error"]]
    pending = any(entry["state"] == LoopState.PENDING for entry in loops)
    record["outcome"] = Outcome.ERROR if errors else Outcome.PENDING if pending else Outcome.COMPLETED
    record["error"] = errors[0] if errors else None
    record["cause"] = cause_of(record["error"])
    return record


def hoh_grades(paths: RunPaths, key: str, trial: Path, result: dict[str, Any], loops: int,
               metric: str | None) -> list[dict[str, Any]]:
    grades = grades_of(paths, key)
    job = paths.grade_job(key)
    crash = last_error(job) if job.config.exists() and not job.complete() else None
    out = []
    for planned in plan_loops(trial, result, loops):
        if planned.source is None:
            out.append(_loop(planned, None, metric))
            continue
        g = grades.get(planned.source)
        if g is None:  # not graded (yet): Harbor stopped in the grade job, or it has not run
            if crash:
                g = {"rewards": None, "trial": None, "error": f"Harbor stopped before grading it: {crash}"}
            else:
                planned = PlannedLoop(planned.loop, LoopState.PENDING, planned.source, planned.hoh)
        if g is not None and g["error"]:
            planned = PlannedLoop(planned.loop, LoopState.UNGRADED, planned.source, planned.hoh)
        out.append(_loop(planned, g, metric))
    return out


def _loop(planned: PlannedLoop, g: dict[str, Any] | None, metric: str | None) -> dict[str, Any]:
    hoh = planned.hoh or {}
    g = g or {"rewards": None, "error": planned.why, "trial": None}
    rewards = g["rewards"] if planned.state in (LoopState.GRADED, LoopState.CARRIED) else None
    error = g["error"] if planned.state.is_error else None
    return {"loop": planned.loop, "state": planned.state, "hoh_status": hoh.get("status"),
            "verdict": hoh.get("verdict"), "candidate_id": hoh.get("candidate_id"), "graded_loop": planned.source,
            "rewards": rewards, "score": score_of(rewards, metric), "error": error, "cause": cause_of(error),
            "note": planned.why if not planned.state.is_error else None, "trial": g.get("trial")}


def records_of(paths: RunPaths, settings: BenchSettings,
               metric: str | None = None) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Every planned task's record, and the task dirs Harbor would skip (with its reason)."""
    stored = read_json(paths.tasks, "task list", TASKS_SCHEMA_VERSION) if paths.tasks.exists() else {"tasks": []}
    return [task_record(paths, settings, e, metric) for e in stored["tasks"]], stored.get("invalid", [])
