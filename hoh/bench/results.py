"""The OUT directory of a benchmark run, and the per-task records read back from Harbor's job dirs.

    OUT/
      run.json                  the run's settings (BenchSettings); a rerun must match them
      tasks.json                the suite's tasks as planned (key, Harbor task config) and the dirs
                                Harbor would skip, with its reason
      hoh.yaml                  the --config every trial starts from (when one was given)
      bench.lock                held by the one `hoh bench run` working here
      jobs/KEY.calibrate/       Harbor's job: the task's reference solution graded by its verifier (the oracle),
                                before anything else; a task it cannot bring to the maximum is not gradable here
      jobs/KEY.agent/           Harbor's job: the task's agent trial (hoh in its mode, or Harbor's oracle)
      jobs/KEY.grade/           Harbor's job: one trial per loop that left a candidate of its own, each
                                loop's candidate replayed into a fresh environment and verified
                                (loop 0, A_0 as the task ships it, with Harbor's nop agent, when needed)
      harbor/KEY.agent.json .log .err   the JobConfig hoh bench gave `harbor run -c`, and its output
      grades/KEY/loop-000T.json  ProgramBench only: the package's grade of loop T's candidate
      summary.json summary.md   written after every run and by `hoh bench report`

Nothing here imports Harbor: records are read from the JSON Harbor writes, so `hoh bench report`
works wherever hoh does. A loop's grade is Harbor's verifier result of that loop's candidate
(`rewards`, every key kept); a loop that left no candidate of its own carries the grade of the
newest one before it (its tree did not change); a grade Harbor could not compute is an error with
Harbor's exception type and message, never a score.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import StateError, UsageError
from .causes import EXCEPTION_LINE
from .settings import CANDIDATE_AGENT, BenchSettings

RUN_SCHEMA_VERSION = 2
TASKS_SCHEMA_VERSION = 1
GRADE_SCHEMA_VERSION = 1
SCORE_KEY = "reward"


def _cancelled(path: Path) -> bool:
    try:
        info = json.loads(path.read_text(encoding="utf-8")).get("exception_info") or {}
    except (OSError, ValueError):
        return True
    return info.get("exception_type") == "CancelledError"


@dataclass(frozen=True)
class JobFiles:
    """One Harbor job of a run: OUT/jobs/NAME (Harbor's) and OUT/harbor/NAME.{json,log,err} (hoh bench's)."""

    out: Path
    name: str

    @property
    def dir(self) -> Path:
        return self.out / "jobs" / self.name

    @property
    def jobs_dir(self) -> Path:
        return self.out / "jobs"

    @property
    def config(self) -> Path:
        return self.out / "harbor" / f"{self.name}.json"

    @property
    def stdout(self) -> Path:
        return self.out / "harbor" / f"{self.name}.log"

    @property
    def stderr(self) -> Path:
        return self.out / "harbor" / f"{self.name}.err"

    def trial_dirs(self) -> list[Path]:
        """Trial dirs holding a result.json, by name."""
        if not self.dir.is_dir():
            return []
        return sorted(d for d in self.dir.iterdir() if (d / "result.json").is_file())

    def stored_config(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.dir / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def complete(self) -> bool:
        """Harbor finished this job, every trial it planned has a result, and none was cancelled
        (an interrupted run leaves cancelled trials, which `harbor job resume` reruns)."""
        try:
            result = json.loads((self.dir / "result.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        trials = self.trial_dirs()
        if not result.get("finished_at") or len(trials) < int(result.get("n_total_trials") or 0):
            return False
        return not any(_cancelled(trial / "result.json") for trial in trials)


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def settings(self) -> Path:
        return self.root / "run.json"

    @property
    def tasks(self) -> Path:
        return self.root / "tasks.json"

    @property
    def hoh_config(self) -> Path:
        return self.root / "hoh.yaml"

    @property
    def lock(self) -> Path:
        return self.root / "bench.lock"

    @property
    def jobs(self) -> Path:
        return self.root / "jobs"

    @property
    def summary_json(self) -> Path:
        return self.root / "summary.json"

    @property
    def summary_md(self) -> Path:
        return self.root / "summary.md"

    def agent_job(self, key: str) -> JobFiles:
        return JobFiles(self.root, f"{key}.agent")

    def grade_job(self, key: str) -> JobFiles:
        return JobFiles(self.root, f"{key}.grade")

    def calibration_job(self, key: str) -> JobFiles:
        return JobFiles(self.root, f"{key}.calibrate")

    def package_grade(self, key: str, loop: int) -> Path:
        return self.root / "grades" / key / f"loop-{loop:04d}.json"


def read_json(path: Path, what: str, newest: int | None = None) -> dict[str, Any]:
    """A persisted JSON object; corrupt or newer-than-us files are refused, never overwritten."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        raise StateError(f"{path}: corrupt {what} (not JSON); nothing was overwritten") from None
    if not isinstance(data, dict):
        raise StateError(f"{path}: corrupt {what} (not an object); nothing was overwritten")
    if newest is not None:
        if not isinstance(data.get("schema_version"), int):
            raise StateError(f"{path}: corrupt {what} (no schema_version); nothing was overwritten")
        if data["schema_version"] > newest:
            raise StateError(f"{path}: {what} written by a newer hoh; upgrade hoh")
    return data


def load_run(out: Path) -> tuple[RunPaths, BenchSettings]:
    paths = RunPaths(Path(out).expanduser().resolve())
    if not paths.settings.is_file():
        raise UsageError(f"{paths.root} is not a benchmark run (no run.json); create one with: "
                         f"hoh bench run SUITE -o {out}")
    stored = read_json(paths.settings, "run settings", RUN_SCHEMA_VERSION)
    if stored["schema_version"] < RUN_SCHEMA_VERSION:
        raise UsageError(f"{paths.root} was written by the old hoh bench (before Harbor); rerun it into a new -o")
    try:
        return paths, BenchSettings.model_validate(stored.get("settings"))
    except ValueError as err:
        raise StateError(f"{paths.settings}: unreadable run settings ({str(err).splitlines()[0]}); "
                         "nothing was overwritten") from None


# ---- reading Harbor's trials ---------------------------------------------------------------------
def trial_results(job_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    """(trial dir, result.json) of every finished trial of a Harbor job, by trial name."""
    if not job_dir.is_dir():
        return []
    found = []
    for trial in sorted(d for d in job_dir.iterdir() if (d / "result.json").is_file()):
        found.append((trial, read_json(trial / "result.json", "Harbor trial result")))
    return found


def harbor_error(result: dict[str, Any]) -> str | None:
    info = result.get("exception_info")
    if not info:
        return None
    message = (info.get("exception_message") or "").strip()
    return f"{info.get('exception_type')}: {message}" if message else str(info.get("exception_type"))


def rewards_of(result: dict[str, Any]) -> dict[str, float] | None:
    verifier = result.get("verifier_result") or {}
    rewards = verifier.get("rewards")
    return dict(rewards) if isinstance(rewards, dict) and rewards else None


def score_of(rewards: dict[str, float] | None, metric: str | None = None) -> float | None:
    """The headline score of a grade: `metric` when one is chosen (None when this grade lacks it); else
    `reward` when present, the only key when there is one, and the mean of the keys when there are several
    (each key keeps its own curve beside it)."""
    if not rewards:
        return None
    if metric is not None:
        return float(rewards[metric]) if metric in rewards else None
    if SCORE_KEY in rewards:
        return float(rewards[SCORE_KEY])
    return round(sum(float(v) for v in rewards.values()) / len(rewards), 4)


def seconds_between(result: dict[str, Any]) -> float | None:
    try:
        start = datetime.fromisoformat(str(result["started_at"]).replace("Z", "+00:00"))
        end = datetime.fromisoformat(str(result["finished_at"]).replace("Z", "+00:00"))
    except (KeyError, TypeError, ValueError):
        return None
    return round((end - start).total_seconds(), 2)


def grade_loop(result: dict[str, Any]) -> int | None:
    """Which loop a grade trial graded: its CandidateAgent's `loop`, 0 for Harbor's nop (A_0)."""
    agent = (result.get("config") or {}).get("agent") or {}
    if agent.get("import_path") == CANDIDATE_AGENT:
        return int((agent.get("kwargs") or {}).get("loop", -1))
    if agent.get("name") == "nop":
        return 0
    return None


def grade(rewards: dict[str, float] | None, error: str | None, trial: str | None) -> dict[str, Any]:
    """A loop's grade: Harbor's verifier rewards (every key), or the error that kept it from one."""
    if rewards is None and error is None:
        error = "the verifier produced no reward"
    return {"rewards": rewards, "error": None if rewards else error, "trial": trial}


def grades_of(paths: RunPaths, key: str) -> dict[int, dict[str, Any]]:
    """loop → its grade (Harbor's grade job, or the ProgramBench package's grade files)."""
    found: dict[int, dict[str, Any]] = {}
    for trial, result in trial_results(paths.grade_job(key).dir):
        loop = grade_loop(result)
        if loop is not None:
            found[loop] = grade(rewards_of(result), harbor_error(result), str(trial))
    package = paths.root / "grades" / key
    if package.is_dir():
        for path in sorted(package.glob("loop-*.json")):
            data = read_json(path, "ProgramBench grade", GRADE_SCHEMA_VERSION)
            found[int(data["loop"])] = grade(data.get("rewards"), data.get("error"), None)
    return found




def last_error(files: JobFiles) -> str | None:
    """Harbor's own error: the last exception line of its stderr (a traceback, maybe of an exception
    group), else its last line of output."""
    fallback = None
    for path in (files.stderr, files.stdout):
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        lines = [line.strip().lstrip("|│ ").strip() for line in lines]
        lines = [line for line in lines if line and not set(line) <= set("─╭╮╰╯━+-=^~ ")]
        for line in reversed(lines):
            if EXCEPTION_LINE.match(line):
                return line[:2000]
        fallback = fallback or (lines[-1][:2000] if lines else None)
    return fallback
