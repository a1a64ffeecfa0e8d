"""The OUT directory of a benchmark run: the one place that builds its paths, and its records.

    OUT/
      run.json                    settings of the run (BenchSettings); a rerun must match them
      bench.lock                  held by the one `hoh bench run` working here
      summary.json summary.md     the summary, rewritten after every run and by `hoh bench report`
      trials/<task-id>/
        trial.json                the trial's record (TRIAL_SCHEMA_VERSION), written when it ends
        progress.json             what the trial is doing now (for live progress; not a record)
        spec.md                   the task's instruction, frozen: the hoh spec
        workspace/                the trial's hoh workspace (hoh status -w … works on it)
        grades/loop-0001/
          grade.json              the verifier's verdict on loop 1's frozen candidate
          logs/verifier/          what the verifier wrote (reward.txt / reward.json, its own logs)
          verifier-stdout.txt     tests/test.sh's output

A trial record: task, suite, mode, ablate, harness, model, loops, `scores` (one entry per
graded loop: loop, hoh status, candidate, score, grade status), final_score, tokens, cost_usd,
wall_seconds, outcome (completed | error | grader_unavailable | invalid), error.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .. import __version__
from ..errors import StateError, UsageError
from ..fsutil import atomic_write_json
from .modes import BenchSettings

RUN_SCHEMA_VERSION = 1
TRIAL_SCHEMA_VERSION = 1
GRADE_SCHEMA_VERSION = 1
FINISHED = ("completed",)
"""Outcomes a rerun keeps; `error` is kept unless --retry-errors; the rest are re-evaluated."""


@dataclass(frozen=True)
class TrialPaths:
    root: Path

    @property
    def record(self) -> Path:
        return self.root / "trial.json"

    @property
    def progress(self) -> Path:
        return self.root / "progress.json"

    @property
    def spec(self) -> Path:
        return self.root / "spec.md"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    def grade_dir(self, loop: int) -> Path:
        return self.root / "grades" / f"loop-{loop:04d}"

    def grade(self, loop: int) -> Path:
        return self.grade_dir(loop) / "grade.json"


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def settings(self) -> Path:
        return self.root / "run.json"

    @property
    def lock(self) -> Path:
        return self.root / "bench.lock"

    @property
    def summary_json(self) -> Path:
        return self.root / "summary.json"

    @property
    def summary_md(self) -> Path:
        return self.root / "summary.md"

    @property
    def trials(self) -> Path:
        return self.root / "trials"

    def trial(self, task_id: str) -> TrialPaths:
        return TrialPaths(self.trials / task_id)


def read_json(path: Path, what: str, newest: int) -> dict[str, Any]:
    """A persisted JSON object; corrupt or newer-than-us files are refused, never overwritten."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        raise StateError(f"{path}: corrupt {what} (not JSON); nothing was overwritten") from None
    if not isinstance(data, dict) or not isinstance(data.get("schema_version"), int):
        raise StateError(f"{path}: corrupt {what} (no schema_version); nothing was overwritten")
    if data["schema_version"] > newest:
        raise StateError(f"{path}: {what} written by a newer hoh; upgrade hoh")
    return data


def _differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    diffs = []
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            diffs += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            diffs.append(f"{prefix}{key}: {json.dumps(a)} in OUT, {json.dumps(b)} now")
    return diffs


def open_run(out: Path, settings: BenchSettings) -> RunPaths:
    """Start OUT, or continue it when its settings equal these; a mismatch is refused with the difference."""
    paths = RunPaths(out.expanduser().resolve())
    if paths.settings.exists():
        diffs = _differences(normalized(_stored_settings(paths)), normalized(settings))
        if diffs:
            raise UsageError(f"{paths.root} holds a run with other settings ({'; '.join(diffs)}); "
                             "use another -o, or the same options as before")
        return paths
    if paths.root.exists() and not paths.root.is_dir():
        raise UsageError(f"-o {paths.root} exists and is not a directory")
    if paths.root.exists() and any(paths.root.iterdir()):
        raise UsageError(f"-o {paths.root} is not empty and holds no benchmark run (no run.json); choose another -o")
    try:
        paths.trials.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"cannot create -o {paths.root}: {err.strerror}") from None
    atomic_write_json(paths.settings, {"schema_version": RUN_SCHEMA_VERSION, "created_by": f"hoh {__version__}",
                                       "settings": settings.model_dump(mode="json")})
    return paths


def _stored_settings(paths: RunPaths) -> BenchSettings:
    stored = read_json(paths.settings, "run settings", RUN_SCHEMA_VERSION)
    try:
        settings = BenchSettings.model_validate(stored.get("settings"))
        settings.base_config()
        return settings
    except ValidationError as err:
        raise StateError(f"{paths.settings}: unreadable run settings ({err.errors()[0]['msg']}); "
                         "nothing was overwritten") from None


def normalized(settings: BenchSettings) -> dict[str, Any]:
    """Settings with the hoh config's defaults filled in, so a default added by a newer hoh is no difference."""
    data = settings.model_dump(mode="json")
    data["hoh"] = settings.base_config().model_dump(mode="json")
    return data


def load_run(out: Path) -> tuple[RunPaths, BenchSettings]:
    paths = RunPaths(out.expanduser().resolve())
    if not paths.settings.is_file():
        raise UsageError(f"{paths.root} is not a benchmark run (no run.json); "
                         f"create one with: hoh bench run SUITE -o {out}")
    return paths, _stored_settings(paths)


def read_record(paths: TrialPaths) -> dict[str, Any] | None:
    if not paths.record.is_file():
        return None
    return read_json(paths.record, "trial record", TRIAL_SCHEMA_VERSION)


def write_record(paths: TrialPaths, record: dict[str, Any]) -> None:
    atomic_write_json(paths.record, record)


def records(paths: RunPaths) -> list[dict[str, Any]]:
    """Every trial record of the run, sorted by task id."""
    if not paths.trials.is_dir():
        return []
    found = [read_record(paths.trial(d.name)) for d in sorted(paths.trials.iterdir()) if d.is_dir()]
    return [r for r in found if r is not None]


def write_progress(paths: TrialPaths, **fields: Any) -> None:
    """Live state for the progress display: cheap (no fsync), and never read back as truth."""
    tmp = paths.progress.with_name(f".progress.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(fields), encoding="utf-8")
        os.replace(tmp, paths.progress)
    except OSError:
        pass


def read_progress(paths: TrialPaths) -> dict[str, Any]:
    try:
        return json.loads(paths.progress.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
