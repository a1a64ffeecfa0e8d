"""A whole benchmark run: the suite's tasks → the trials still to run → an executor → records, summary.

Rerunning the same command on the same OUT keeps every completed trial, resumes the unfinished
ones from their hoh journals, and reruns errored ones only with `retry_errors`. Invalid tasks
are recorded as such and the rest of the suite runs; a suite with no valid task is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import HohConfig
from ..errors import UsageError
from ..fsutil import atomic_write_json, atomic_write_text
from ..harness import registry
from ..runtime.lock import WorkspaceLock
from . import executors
from .executors import OnDone, OnStart
from .modes import BenchSettings, check, trial_config
from .report import compare, compare_markdown, markdown, summarize
from .results import RunPaths, load_run, open_run, read_record, records, write_record
from .tasks import Suite, load_suite
from .trial import TrialSpec, invalid_record


@dataclass
class RunResult:
    paths: RunPaths
    suite: Suite
    ran: list[str] = field(default_factory=list)
    """Task ids whose trials ran (or resumed) in this invocation."""
    kept: list[str] = field(default_factory=list)
    """Task ids whose earlier records were kept."""
    records: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def bench_settings(suite: str, *, config: HohConfig, mode: str, ablate: list[str], loops: int,
                   task_filter: str | None = None, grade_on_host: bool = False) -> BenchSettings:
    """Settings for a run (mode, ablations and loops checked); the suite path is resolved, so the same
    suite named two ways is one suite."""
    ablate = check(mode, ablate, loops)
    named = suite == "programbench" or suite.startswith("programbench:")
    resolved = suite if named else str(Path(suite).expanduser().resolve())
    return BenchSettings(suite=resolved, task_filter=task_filter, mode=mode, ablate=ablate, loops=loops,
                         grade_on_host=grade_on_host, hoh=config.model_dump(mode="json"))


def _nothing(*_: Any) -> None:
    return None


def plan_trials(settings: BenchSettings, paths: RunPaths, suite: Suite, *,
                retry_errors: bool) -> tuple[list[TrialSpec], list[str]]:
    """The trials to run now, and the ids of those whose records stand."""
    config = trial_config(settings).model_dump(mode="json")
    labels = {"suite": settings.suite, "mode": settings.mode, "ablate": list(settings.ablate)}
    specs, kept = [], []
    for task in suite.tasks:
        trial = paths.trial(task.id)
        if not task.valid:
            trial.root.mkdir(parents=True, exist_ok=True)
            write_record(trial, invalid_record(task, config, labels))
            continue
        record = read_record(trial)
        outcome = record["outcome"] if record else None
        if outcome == "completed" or (outcome == "error" and not retry_errors):
            kept.append(task.id)
            continue
        specs.append(TrialSpec(task=task, root=trial.root, config=config,
                               grade_on_host=settings.grade_on_host, labels=labels))
    return specs, kept


def run_bench(settings: BenchSettings, out: Path, *, executor: str = "local", jobs: int = 1,
              retry_errors: bool = False, executor_options: dict[str, Any] | None = None,
              on_plan=None, on_start: OnStart = _nothing, on_done: OnDone = _nothing) -> RunResult:
    """Run (or continue) the benchmark in OUT; `on_plan(specs, kept)` is told what will run before it does."""
    suite = load_suite(settings.suite, settings.task_filter)
    if not suite.valid:
        reasons = "; ".join(f"{t.id}: {', '.join(t.problems)}" for t in suite.invalid[:5])
        raise UsageError(f"suite {settings.suite} has no valid task ({reasons})")
    runner = executors.create(executor, jobs, **(executor_options or {}))
    registry.create(settings.base_config().harness).check_available()  # refuse before any trial starts
    paths = open_run(out, settings)
    with WorkspaceLock(paths.lock):  # two runners on one OUT would run the same trials twice
        specs, kept = plan_trials(settings, paths, suite, retry_errors=retry_errors)
        if on_plan:
            on_plan(specs, kept)
        if specs:
            runner.run(specs, on_start, on_done)
        result = RunResult(paths, suite, ran=[s.task.id for s in specs], kept=kept)
        result.records, result.summary = write_summary(paths, settings, suite)
    return result


def write_summary(paths: RunPaths, settings: BenchSettings,
                  suite: Suite | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Summarise the records of the suite's tasks (all records when no suite) into summary.json/.md."""
    found = records(paths)
    if suite is not None:
        ids = {t.id for t in suite.tasks}
        found = [r for r in found if r["task"] in ids]
    summary = summarize(found, settings.model_dump(mode="json"))
    atomic_write_json(paths.summary_json, summary)
    atomic_write_text(paths.summary_md, markdown(summary))
    return found, summary


def report_run(out: Path) -> tuple[RunPaths, dict[str, Any]]:
    """Recompute a run's summary from its trial records (and rewrite summary.json/.md)."""
    paths, settings = load_run(out)
    return paths, write_summary(paths, settings)[1]


def compare_runs(out_a: Path, out_b: Path) -> tuple[dict[str, Any], str]:
    """Two runs side by side; written to A's OUT as compare-<B>.json/.md."""
    paths_a, summary_a = report_run(out_a)
    paths_b, summary_b = report_run(out_b)
    cmp = compare(summary_a, summary_b)
    text = compare_markdown(cmp, str(paths_a.root), str(paths_b.root))
    atomic_write_json(paths_a.root / f"compare-{paths_b.root.name}.json", cmp)
    atomic_write_text(paths_a.root / f"compare-{paths_b.root.name}.md", text)
    return cmp, text
