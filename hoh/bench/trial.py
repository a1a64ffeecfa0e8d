"""One trial: one task becomes one hoh run in its own workspace, graded after every loop.

The run advances one loop at a time (`hoh.api.build` with one loop, then `resume` by one), and
after each loop t the newest frozen candidate ≤ t is exported to a disposable copy and graded:
the scores of loops 1..T are the trial's HoH@1..@T curve. Grades are stored per loop with the
commit they graded, so a trial that was interrupted resumes its hoh run where the journal says
and re-grades nothing that was graded. Failures are recorded as data, never raised.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import api
from ..config import HohConfig
from ..errors import StateError
from ..fsutil import atomic_write_json, atomic_write_text
from ..harness.process import reap
from ..paths import WorkspacePaths
from ..runtime.git import History
from ..runtime.journal import Journal, RunHistory
from ..runtime.workspace import is_workspace
from .results import (
    GRADE_SCHEMA_VERSION,
    TRIAL_SCHEMA_VERSION,
    TrialPaths,
    read_json,
    read_progress,
    read_record,
    write_progress,
    write_record,
)
from .tasks import Task
from .verifier import Grade, grade_harbor, unavailable_reasons


class TrialStopped(Exception):
    """The hoh run stopped (a role failed under the stop policy); resumable with --retry-errors."""


@dataclass(frozen=True)
class TrialSpec:
    """Everything a worker needs to run one trial; plain data, so it crosses to Ray workers."""

    task: Task
    root: Path
    """OUT/trials/<task-id>."""
    config: dict[str, Any]
    """The run's hoh config (mode, loops, mechanisms, harness); the task's script/solution are added here."""
    grade_on_host: bool = False
    labels: dict[str, Any] = field(default_factory=dict)
    """suite, mode, ablate: copied into the record."""


def trial_config(spec: TrialSpec) -> HohConfig:
    """The run's config plus what this task brings: the scripted agent's script, the oracle's solution."""
    config = HohConfig.model_validate(spec.config)
    harness = config.harness
    if harness.name == "scripted":
        script = spec.task.scripted_script
        if script is None:
            raise ValueError("the scripted harness needs the task's scripted/script.yaml, and this task has none")
        harness = harness.model_copy(update={"script": str(script)})
    elif harness.name == "oracle":
        solution = spec.task.solution_dir
        if solution is None:
            raise ValueError("the oracle harness needs the task's solution/solve.sh, and this task has none")
        harness = harness.model_copy(update={"extra_args": [*harness.extra_args, "--solution", str(solution)]})
    return config.model_copy(update={"harness": harness})


def spec_text(task: Task) -> str:
    """The trial's spec: the task's instruction, told where its work directory is in a hoh run."""
    text = task.instruction_text()
    if task.workdir not in text:
        return text
    # Harbor instructions name the container's work directory; a hoh harness works in the project.
    note = (f"> Where this task says `{task.workdir}`, use your project directory: it is what the "
            f"verifier sees as `{task.workdir}`.\n\n")
    return note + text


def base_record(task: Task, config: dict[str, Any], labels: dict[str, Any]) -> dict[str, Any]:
    harness = config.get("harness", {})
    return {"schema_version": TRIAL_SCHEMA_VERSION, "task": task.id, "task_name": task.name, "kind": task.kind,
            **labels, "harness": harness.get("name"), "model": harness.get("model"), "loops": config.get("loops"),
            "scores": [], "final_score": None, "tokens": None, "cost_usd": None, "wall_seconds": 0.0,
            "outcome": None, "error": None}


def invalid_record(task: Task, config: dict[str, Any], labels: dict[str, Any]) -> dict[str, Any]:
    return {**base_record(task, config, labels), "outcome": "invalid", "error": "; ".join(task.problems)}


# ---- reading the hoh workspace -----------------------------------------------------------------
def loop_statuses(ws: Path) -> dict[int, str]:
    """loop → its hoh status (pass, partial, fail, unverified, developer_failed, …), per the journal."""
    if not is_workspace(ws):
        return {}
    history = RunHistory.read(Journal(WorkspacePaths(ws).journal))
    return {t: stats.status for t, stats in history.loops.items() if stats.status != "running"}


def candidate_at(ws: Path, t: int) -> tuple[str, str | None]:
    """(commit, candidate id) of the newest frozen candidate ≤ t; the empty root commit when none."""
    paths = WorkspacePaths(ws)
    for loop in range(t, 0, -1):
        path = paths.loop(loop).candidate
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            return data["commit"], data["candidate_id"]
    return json.loads(paths.identity.read_text(encoding="utf-8"))["root_commit"], None


EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def export(repo: History, commit: str, dest: Path) -> None:
    """A plain copy of `commit`; an empty tree (nothing built yet) is an empty directory, since
    `git archive` of an empty tree writes no tar at all."""
    if repo.tree_of(commit) == EMPTY_TREE:
        dest.mkdir(parents=True, exist_ok=True)
    else:
        repo.export(commit, dest)


# ---- the trial ---------------------------------------------------------------------------------
class Trial:
    def __init__(self, spec: TrialSpec):
        self.spec, self.task = spec, spec.task
        self.paths = TrialPaths(spec.root)
        self.loops = int(spec.config.get("loops", 1))

    def progress(self, **fields: Any) -> None:
        write_progress(self.paths, task=self.task.id, loops=self.loops, **fields)

    def notify(self, kind: str, **f: Any) -> None:
        """Runtime notifications → the live progress file (role and attempt within the loop)."""
        if kind == "attempt":
            self.progress(phase=f["role"], loop=f["loop"], attempt=f["attempt"])

    def advance_to(self, t: int, config: HohConfig) -> None:
        """Make sure loop t of the hoh run has finished: build, or resume the journal's run."""
        ws = self.paths.workspace
        done = max(loop_statuses(ws), default=0)
        if done >= t:
            return
        self.progress(phase="loop", loop=t)
        if not is_workspace(ws):
            report = api.build(self.paths.spec, ws, config.model_copy(update={"loops": 1}), notify=self.notify)
            if report.ended_as_planned and t > 1:
                report = api.resume(ws, more_loops=t - 1, notify=self.notify)
        else:
            report = api.resume(ws, more_loops=t - done, notify=self.notify)
        if not report.ended_as_planned:
            raise TrialStopped(report.error or "the hoh run stopped")

    def grade(self, t: int) -> dict[str, Any]:
        """Grade the newest candidate ≤ t on a fresh copy, unless that very commit was graded already."""
        commit, candidate_id = candidate_at(self.paths.workspace, t)
        path = self.paths.grade(t)
        if path.exists():
            stored = read_json(path, "grade", GRADE_SCHEMA_VERSION)
            if stored.get("commit") == commit:
                return stored
        self.progress(phase="grading", loop=t)
        gdir = self.paths.grade_dir(t)
        shutil.rmtree(gdir, ignore_errors=True)
        copy = gdir / "workspace"
        wpaths = WorkspacePaths(self.paths.workspace)
        export(History(wpaths.history, wpaths.project), commit, copy)
        try:
            if self.task.kind == "programbench":
                from .programbench import grade_programbench
                grade: Grade = grade_programbench(self.task, copy, gdir)
            else:
                grade = grade_harbor(self.task, copy, gdir)
        finally:
            shutil.rmtree(copy, ignore_errors=True)
        stored = {"schema_version": GRADE_SCHEMA_VERSION, "loop": t, "commit": commit, "candidate_id": candidate_id,
                  **grade.to_json()}
        atomic_write_json(path, stored)
        return stored

    def run(self) -> dict[str, Any]:
        self.paths.root.mkdir(parents=True, exist_ok=True)
        try:
            previous = read_record(self.paths) or read_progress(self.paths)
        except StateError:
            previous = {}
        wall_before = float(previous.get("wall_seconds") or 0.0)
        start = time.monotonic()
        record = base_record(self.task, self.spec.config, self.spec.labels)
        try:
            reasons = unavailable_reasons(self.task, grade_on_host=self.spec.grade_on_host)
            if reasons:
                record.update(outcome="grader_unavailable", error="; ".join(reasons))
                return record
            config = trial_config(self.spec)
            if not self.paths.spec.exists():
                atomic_write_text(self.paths.spec, spec_text(self.task))
            for t in range(1, self.loops + 1):
                self.advance_to(t, config)
                self.grade(t)
            record["outcome"] = "completed"
        except TrialStopped as err:
            record.update(outcome="error", error=f"hoh stopped: {err}")
        except Exception as err:  # noqa: BLE001 - a trial's failure is data for its record, never a crash of the run
            record.update(outcome="error", error=f"{type(err).__name__}: {err}")
        finally:
            record["wall_seconds"] = round(wall_before + time.monotonic() - start, 3)
            try:
                self.fill(record)
            except Exception as err:  # noqa: BLE001 - e.g. a corrupt grade.json: say so in the record
                record.update(outcome="error", error=record["error"] or f"{type(err).__name__}: {err}")
            write_record(self.paths, record)
            self.progress(phase="done", outcome=record["outcome"], wall_seconds=record["wall_seconds"])
        return record

    def fill(self, record: dict[str, Any]) -> None:
        """Per-loop scores, tokens and cost, from the grades and the workspace as they are on disk."""
        statuses = loop_statuses(self.paths.workspace)
        for t in range(1, self.loops + 1):
            if not self.paths.grade(t).exists():
                break
            g = read_json(self.paths.grade(t), "grade", GRADE_SCHEMA_VERSION)
            record["scores"].append({"loop": t, "hoh_status": statuses.get(t), "candidate_id": g["candidate_id"],
                                     "score": g["score"], "grade": g["status"], "rewards": g["rewards"],
                                     "detail": g["detail"]})
        if record["scores"]:
            record["final_score"] = record["scores"][-1]["score"]
        if is_workspace(self.paths.workspace):
            try:
                usage = api.status(self.paths.workspace)["usage"]
            except Exception as err:  # noqa: BLE001 - a record without tokens beats no record
                record["error"] = record["error"] or f"could not read usage: {err}"
            else:
                record["tokens"] = {k.removesuffix("_tokens"): usage[k] for k in
                                    ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")}
                record["cost_usd"] = usage.get("cost_usd")
        record["workspace"] = str(self.paths.workspace) if is_workspace(self.paths.workspace) else None


def stop_harness(root: Path) -> int:
    """Kill the harness processes a trial's journal says are running (after an interrupt of the
    runner); returns how many. The trial itself resumes from its journal on the next run."""
    ws = TrialPaths(root).workspace
    if not is_workspace(ws):
        return 0
    live = RunHistory.read(Journal(WorkspacePaths(ws).journal)).live_processes
    return sum(1 for pid, ticks in live if reap(pid, ticks))


def run_trial(spec: TrialSpec) -> dict[str, Any]:
    """Run (or resume) one trial and return its record; the record is also written to trial.json."""
    return Trial(spec).run()
