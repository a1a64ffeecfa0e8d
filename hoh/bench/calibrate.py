"""Calibration: can this task be graded *here*? Its reference solution, graded once in the run's environment.

A verifier that cannot run (it downloads `uv` from the internet, needs a Python package, Godot 4 or a judge
model that this machine lacks) usually still writes a 0, and a 0 from a broken grader looks like an agent
that failed. Where a task ships a reference solution (`solution/solve.sh`), `hoh bench run` first runs
Harbor's oracle agent on it, in the same environment the agents get (OUT/jobs/KEY.calibrate). A reference
that scores below the task's maximum on any key is *not gradable here*: the task is reported with the
verifier's own telling lines (`Could not resolve host`, `No module named …`) and left out of every mean,
and its agent trial is not run (it could not be graded either).

The maximum is 1.0 per reward key, unless the task's task.toml says otherwise in its `[metadata]`:
`max_reward = X` (every key) or `max_rewards = {key = X, …}`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from .causes import cause_of, telling_lines
from .results import RunPaths, harbor_error, last_error, rewards_of, trial_results

ORACLE_AGENT = {"name": "oracle"}
DEFAULT_MAX = 1.0


class Calibration(StrEnum):
    GRADABLE = "gradable"
    """The reference solution reaches the maximum on every key."""
    NOT_GRADABLE = "not_gradable"
    """It does not: the verifier cannot grade this task here."""
    NO_SOLUTION = "no_solution"
    """The task ships no reference solution: its grades are not calibrated."""
    OFF = "off"
    """--no-calibrate, the oracle's own run, or a suite graded by its own package."""
    PENDING = "pending"
    """Not run yet."""


@dataclass(frozen=True)
class CalibrationResult:
    state: Calibration
    rewards: dict[str, float] | None = None
    short: list[str] = field(default_factory=list)
    """The keys whose reference reward is below the maximum."""
    reason: str | None = None
    """Why the task is not gradable here, in one line."""
    telling: list[str] = field(default_factory=list)
    """The verifier's (and the solution's) own lines that say why."""
    trial: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state.value, "rewards": self.rewards, "short": list(self.short), "reason": self.reason,
                "telling": list(self.telling), "trial": self.trial}


def maximum(entry: dict[str, Any], key: str) -> float:
    """The most a task's `key` can score: its task.toml's own metric, else 1.0."""
    limits = entry.get("reward_max") or {}
    return float(limits.get(key, limits.get("*", DEFAULT_MAX)))


def reward_max(metadata: dict[str, Any]) -> dict[str, float]:
    """A task's `[metadata]` maxima as {key: max} ("*": every key); {} for the default 1.0."""
    out: dict[str, float] = {}
    if isinstance(metadata.get("max_reward"), (int, float)):
        out["*"] = float(metadata["max_reward"])
    if isinstance(metadata.get("max_rewards"), dict):
        out.update({str(k): float(v) for k, v in metadata["max_rewards"].items() if isinstance(v, (int, float))})
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def trial_output(trial: Path) -> str:
    """What the verifier and the reference solution printed in a trial (Harbor's files), as one text."""
    return "\n".join(_read(trial / rel) for rel in ("verifier/test-stdout.txt", "verifier/test-stderr.txt",
                                                    "agent/oracle.txt", "exception.txt"))


def calibration_of(paths: RunPaths, entry: dict[str, Any]) -> CalibrationResult:
    """What the task's calibration job (if any) says, read from Harbor's files."""
    if entry.get("solution") is False:
        return CalibrationResult(Calibration.NO_SOLUTION)
    job = paths.calibration_job(entry["key"])
    trials = trial_results(job.dir)
    if not trials:  # Harbor stopped before the trial ended (its environment could not start, say), or not run yet
        crash = last_error(job) if job.config.exists() else None
        if crash is None:
            return CalibrationResult(Calibration.PENDING)
        return CalibrationResult(Calibration.NOT_GRADABLE, reason=f"Harbor stopped grading the reference solution: "
                                 f"{cause_of(crash)}", telling=telling_lines(crash))
    trial, result = trials[-1]
    rewards, error = rewards_of(result), harbor_error(result)
    if error and error.startswith("CancelledError"):  # an interrupted run: the rerun grades it
        return CalibrationResult(Calibration.PENDING, trial=str(trial))
    if error and "Solution script not found" in error:
        return CalibrationResult(Calibration.NO_SOLUTION, trial=str(trial))
    output = trial_output(trial)
    if rewards is None:
        why = f"the reference solution was not graded: {cause_of(error) or 'the verifier produced no reward'}"
        return CalibrationResult(Calibration.NOT_GRADABLE, reason=why, telling=telling_lines(f"{output}\n{error}"),
                                 trial=str(trial))
    short = sorted(k for k, v in rewards.items() if float(v) < maximum(entry, k))
    if not short:
        return CalibrationResult(Calibration.GRADABLE, rewards, trial=str(trial))
    scored = ", ".join(f"{k} {float(rewards[k]):g} of {maximum(entry, k):g}" for k in short)
    telling = telling_lines(output)
    why = f"the reference solution scores {scored} here" + (f" ({telling[0]})" if telling else "")
    return CalibrationResult(Calibration.NOT_GRADABLE, rewards, short, why, telling, str(trial))
