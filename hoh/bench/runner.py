"""A whole benchmark run: checks → OUT → per task, a Harbor agent job then a Harbor grade job → summary.

Each task runs as its own pair of Harbor jobs (`KEY.agent`, then `KEY.grade` with one trial per
loop to grade), so one task that makes Harbor stop (an environment it cannot provide, say) is an
error of that task with Harbor's reason while the others run on, and each task is graded as soon
as its agent trial ends. `--jobs N` is the number of Harbor trials in flight at once, over all
tasks. Rerunning the same command resumes: complete jobs are not started again, unfinished ones
are resumed by Harbor (finished trials kept, unfinished ones rerun from their start).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml

from .. import __version__
from ..config import load_config
from ..errors import UsageError
from ..fsutil import atomic_write_json, atomic_write_text
from ..harness.registry import choices
from ..store.lock import WorkspaceLock
from . import programbench, suite as suites
from .jobs import Running, run_job
from .calibrate import ORACLE_AGENT, Calibration, CalibrationResult, calibration_of
from .records import grading_plan, records_of, task_record
from .report import check_metric, markdown, summarize
from .results import RUN_SCHEMA_VERSION, TASKS_SCHEMA_VERSION, RunPaths, load_run, read_json, trial_results
from .settings import CANDIDATE_AGENT, ORACLE, BenchSettings, check, check_agent_kwargs, parse_agent_env

OnStart = Callable[[str, str], None]
"""(task key, what starts: "calibrate" | "agent" | "grade")"""
OnDone = Callable[[dict[str, Any]], None]


def bench_settings(suite: str, **options: Any) -> BenchSettings:
    """Settings for a run, checked; a suite given as a path is resolved, so one suite named two ways is one. The
    harness is `harness`, else the --config's `harness.name`; there is no default."""
    options["harness"] = options.get("harness") or ((options.get("hoh") or {}).get("harness") or {}).get("name")
    if not options["harness"]:
        raise UsageError(f"no harness chosen: pass --harness NAME (one of: {choices()}), --harness {ORACLE} for "
                         "Harbor's oracle agent, or a --config whose harness.name is set")
    options["ablate"] = check(options.get("mode", "hoh"), options.get("ablate", []), options["loops"],
                              options["harness"])
    multiplier = options.get("agent_timeout_multiplier")
    if multiplier is not None and not multiplier > 0:
        raise UsageError(f"--agent-timeout-multiplier must be more than 0, got {multiplier:g}")
    check_agent_kwargs(options.get("agent_kwargs") or {}, options["harness"])
    if "agent_env" in options:
        options["agent_env"] = sorted(set(options["agent_env"]))
    if not programbench.is_programbench(suite) and Path(suite).expanduser().exists():
        suite = str(Path(suite).expanduser().resolve())
    return BenchSettings(suite=suite, **options)


class Slots:
    """At most N Harbor trials in flight: an agent job takes one, a grade job one per parallel trial."""

    def __init__(self, n: int):
        self.free, self.size = n, n
        self.cond = threading.Condition()

    @contextmanager
    def take(self, k: int) -> Iterator[None]:
        k = max(1, min(k, self.size))
        with self.cond:
            self.cond.wait_for(lambda: self.free >= k)
            self.free -= k
        try:
            yield
        finally:
            with self.cond:
                self.free += k
                self.cond.notify_all()


@dataclass
class RunResult:
    paths: RunPaths
    records: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    ran: list[str] = field(default_factory=list)
    """Task keys whose jobs were started (or resumed) in this invocation."""


def open_run(out: Path, settings: BenchSettings) -> RunPaths:
    """Start OUT, or continue it when its settings equal these; a mismatch is refused with the difference."""
    paths = RunPaths(out.expanduser().resolve())
    if paths.settings.exists():
        _, stored = load_run(paths.root)
        diffs = [f"{k}: {v!r} in OUT, {getattr(settings, k)!r} now" for k, v in stored.model_dump().items()
                 if getattr(settings, k) != v]
        if diffs:
            raise UsageError(f"{paths.root} holds a run with other settings ({'; '.join(diffs)}); use another -o, "
                             "or the same options as before")
        return paths
    if paths.root.exists() and not paths.root.is_dir():
        raise UsageError(f"-o {paths.root} exists and is not a directory")
    if paths.root.exists() and any(paths.root.iterdir()):
        raise UsageError(f"-o {paths.root} is not empty and holds no benchmark run (no run.json); choose another -o")
    try:
        paths.jobs.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"cannot create -o {paths.root}: {err.strerror}") from None
    if settings.hoh is not None:
        atomic_write_text(paths.hoh_config, yaml.safe_dump(settings.hoh, sort_keys=False))
    atomic_write_json(paths.settings, {"schema_version": RUN_SCHEMA_VERSION, "created_by": f"hoh {__version__}",
                                       "settings": settings.model_dump(mode="json")})
    return paths


def frozen_config(config: Path | None) -> dict[str, Any] | None:
    """The --config file as data (checked now), to be frozen into OUT."""
    if config is None:
        return None
    return load_config(config).model_dump(mode="json")


def _nothing(*_: Any) -> None:
    return None


class Bench:
    """One invocation of `hoh bench run` on one OUT."""

    def __init__(self, settings: BenchSettings, paths: RunPaths, jobs: int, on_start: OnStart, on_done: OnDone,
                 agent_env: dict[str, str] | None = None):
        self.settings, self.paths = settings, paths
        self.slots = Slots(jobs)
        self.jobs = jobs
        self.running = Running(agent_env or {})
        self.on_start, self.on_done = on_start, on_done
        config = str(paths.hoh_config) if settings.hoh is not None else None
        self.agent = settings.agent_config(config)

    def job(self, name: str, agents: list[dict[str, Any]], task: dict[str, Any], n: int,
            verify: bool = True) -> dict[str, Any]:
        config: dict[str, Any] = {"job_name": name, "jobs_dir": str(self.paths.jobs), "n_concurrent_trials": n,
                                  "quiet": True, "environment": self.settings.environment_config(),
                                  "agents": agents, "tasks": [task]}
        if not verify:
            config["verifier"] = {"disable": True}
        # The multiplier times the agent under test: the agent job's. A grade job's agents only replay a
        # recorded candidate, and its verifier must run under the same timeout as the agent job's (whose
        # verifier grades the final workdir), so grade jobs keep the task's own timeouts.
        if self.settings.agent_timeout_multiplier is not None and agents == [self.agent]:
            config["agent_timeout_multiplier"] = self.settings.agent_timeout_multiplier
        return config

    def run_task(self, entry: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Run (or resume) one task's jobs; its record, and whether anything was started."""
        key, started = entry["key"], False
        if entry.get("error"):
            return task_record(self.paths, self.settings, entry), started
        calibration, started = self.calibrate(entry)
        if self.settings.check_only or calibration.state in (Calibration.NOT_GRADABLE, Calibration.PENDING):
            return task_record(self.paths, self.settings, entry), started
        graded_by_package = programbench.is_programbench(self.settings.suite)
        agent = self.paths.agent_job(key)
        if not agent.complete() and not self.running.stopping.is_set():
            with self.slots.take(1):
                self.on_start(key, "agent")
                started = True
                run_job(agent, self.job(agent.name, [self.agent], entry["config"], 1, verify=not graded_by_package),
                        self.running)
        trials = trial_results(agent.dir)
        if trials and not self.settings.is_oracle and not self.running.stopping.is_set():
            trial, result = trials[-1]
            plan = grading_plan(trial, result, self.settings.loops)
            if plan and graded_by_package:
                started |= programbench.grade_loops(self.paths, self.settings, key, trial, plan, self.slots)
            elif plan and not self.paths.grade_job(key).complete():
                n = min(len(plan), self.jobs)
                agents = [{"name": "nop"} if t == 0 else
                          {"import_path": CANDIDATE_AGENT, "kwargs": {"trial": str(trial), "loop": t}} for t in plan]
                with self.slots.take(n):
                    self.on_start(key, "grade")
                    started = True
                    run_job(self.paths.grade_job(key), self.job(f"{key}.grade", agents, entry["config"], n),
                            self.running)
        return task_record(self.paths, self.settings, entry), started

    def calibrate(self, entry: dict[str, Any]) -> tuple[CalibrationResult, bool]:
        """The task's reference solution graded once in the run's environment (Harbor's oracle), unless it has
        none or the run does not calibrate; the result, and whether a job was started."""
        if not self.settings.calibrates:
            return CalibrationResult(Calibration.OFF), False
        if entry.get("solution") is False:
            return CalibrationResult(Calibration.NO_SOLUTION), False
        job = self.paths.calibration_job(entry["key"])
        started = False
        if not job.complete() and not self.running.stopping.is_set():
            with self.slots.take(1):
                self.on_start(entry["key"], "calibrate")
                started = True
                run_job(job, self.job(job.name, [ORACLE_AGENT], entry["config"], 1), self.running)
        return calibration_of(self.paths, entry), started

    def run(self, entries: list[dict[str, Any]]) -> RunResult:
        result = RunResult(self.paths)
        records: dict[str, dict[str, Any]] = {}
        pool = ThreadPoolExecutor(max_workers=max(1, min(self.jobs, len(entries))), thread_name_prefix="hoh-bench")
        try:
            futures = {pool.submit(self.run_task, entry): entry["key"] for entry in entries}
            for future in as_completed(futures):
                record, started = future.result()
                records[futures[future]] = record
                if started:
                    result.ran.append(record["task"])
                self.on_done(record)
        except BaseException:
            # Ctrl-C: every Harbor in flight is asked to stop as on its own Ctrl-C (it cancels its
            # trials and removes their environments); a rerun resumes their jobs.
            self.running.stop()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown()
        result.records = [records[e["key"]] for e in entries]
        return result


def plan_tasks(settings: BenchSettings, paths: RunPaths, found: suites.Suite) -> list[dict[str, Any]]:
    """tasks.json: what this run covers. Kept from the first run, so a rerun covers the same tasks."""
    if paths.tasks.exists():
        stored = read_json(paths.tasks, "task list", TASKS_SCHEMA_VERSION)
        return stored["tasks"]
    entries = [t.entry() for t in found.tasks]
    atomic_write_json(paths.tasks, {"schema_version": TASKS_SCHEMA_VERSION, "suite": found.spec, "tasks": entries,
                                    "invalid": [{"task": name, "reason": why} for name, why in found.invalid]})
    return entries


def run_bench(settings: BenchSettings, out: Path, *, jobs: int = 1, agent_env: dict[str, str] | None = None,
              on_plan: Callable[[int, int], None] = _nothing, on_start: OnStart = _nothing,
              on_done: OnDone = _nothing, metric: str | None = None) -> RunResult:
    """Run (or continue) the benchmark in OUT. Everything that can be refused is refused before OUT is touched.
    `agent_env`: the values of settings.agent_env (a name without one takes its value here); they reach Harbor's
    process only. `metric` (a reward key) is the summary's headline."""
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    given = agent_env or {}
    agent_env = {**parse_agent_env([n for n in settings.agent_env if n not in given]),
                 **{n: v for n, v in given.items() if n in settings.agent_env}}
    suites.harbor()
    paths = RunPaths(out.expanduser().resolve())
    config = str(paths.hoh_config) if settings.hoh is not None else None
    agent = settings.agent_config(config)
    suites.preflight(settings, {**agent, "env": agent_env} if agent_env else agent)  # in memory only
    packaged = programbench.is_programbench(settings.suite)
    found = programbench.suite(settings, paths) if packaged else suites.resolve(settings)
    if settings.check_only and not settings.calibrates:
        raise UsageError(f"{settings.suite} is graded by its own package, which ships no reference solutions: "
                         "there is nothing to calibrate")
    if settings.check_only and all(t.solution is False for t in found.tasks):
        raise UsageError(f"no task of {settings.suite} ships a reference solution (solution/solve.sh): there is "
                         "nothing to calibrate")
    paths = open_run(out, settings)
    with WorkspaceLock(paths.lock):  # two runners on one OUT would start the same jobs twice
        entries = plan_tasks(settings, paths, found)
        if packaged:
            programbench.materialize(settings, paths, entries)
        bench = Bench(settings, paths, jobs, on_start, on_done, agent_env)
        on_plan(len(entries), sum(1 for e in entries if paths.agent_job(e["key"]).complete()))
        result = bench.run(entries)
        result.summary = write_summary(paths, settings, metric)
    return result


def write_summary(paths: RunPaths, settings: BenchSettings, metric: str | None = None) -> dict[str, Any]:
    """Recompute the run's summary from its Harbor jobs with the headline `metric`, and write summary.json/.md
    (a --metric no task reports is refused before anything is written)."""
    found, invalid = records_of(paths, settings, metric)
    check_metric(metric, found)
    summary = summarize(found, settings.model_dump(mode="json"), invalid, metric)
    atomic_write_json(paths.summary_json, summary)
    atomic_write_text(paths.summary_md, markdown(summary))
    return summary


def report_run(out: Path, metric: str | None = None) -> tuple[RunPaths, dict[str, Any]]:
    """Recompute a run's summary from its Harbor jobs (and rewrite summary.json/.md)."""
    paths, settings = load_run(out)
    return paths, write_summary(paths, settings, metric)
