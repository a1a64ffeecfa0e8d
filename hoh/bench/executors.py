"""Executors run trials: the contract, the registry of short names, and the local executor.

An executor takes trial specs and calls back when each starts and ends; the record each trial
returns is the same whichever executor ran it (a trial is a pure function of its spec and its
directory). Trials are agent-bound (they wait on harness CLIs), so the local executor runs N
of them at once in threads of one process; Ray spreads them over a cluster.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Callable, ClassVar

from ..errors import UsageError
from .trial import TrialSpec, run_trial

OnStart = Callable[[TrialSpec], None]
OnDone = Callable[[TrialSpec, dict[str, Any]], None]

EXECUTORS: dict[str, str] = {
    "local": "hoh.bench.executors:LocalExecutor",
    "ray": "hoh.bench.ray_executor:RayExecutor",
}


class Executor(ABC):
    """Runs trial specs, at most `jobs` at a time."""

    name: ClassVar[str]

    def __init__(self, jobs: int = 1, **options: Any):
        if jobs < 1:
            raise UsageError(f"--jobs must be at least 1, got {jobs}")
        self.jobs, self.options = jobs, options

    @abstractmethod
    def run(self, specs: list[TrialSpec], on_start: OnStart, on_done: OnDone) -> list[dict[str, Any]]:
        """Run every spec; return their records in the order of `specs`. Never raises for one trial's failure."""


class LocalExecutor(Executor):
    """N worker threads in this process; each trial's harness runs in its own subprocesses."""

    name = "local"

    def run(self, specs: list[TrialSpec], on_start: OnStart, on_done: OnDone) -> list[dict[str, Any]]:
        def one(spec: TrialSpec) -> dict[str, Any]:
            on_start(spec)
            return run_trial(spec)

        results: dict[int, dict[str, Any]] = {}
        pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="hoh-trial")
        try:
            futures = {pool.submit(one, spec): i for i, spec in enumerate(specs)}
            for future in as_completed(futures):
                i = futures[future]
                results[i] = future.result()
                on_done(specs[i], results[i])
        except BaseException:
            # Ctrl-C: start nothing more; the caller stops what runs (trials resume from their journals).
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
        return [results[i] for i in range(len(specs))]


def names() -> list[str]:
    return sorted(EXECUTORS)


def create(name: str, jobs: int, **options: Any) -> Executor:
    """The executor called `name`, imported only now (ray is an optional extra)."""
    if name not in EXECUTORS:
        raise UsageError(f"unknown executor '{name}'; choose one of: {', '.join(names())}")
    module, _, attr = EXECUTORS[name].partition(":")
    return getattr(importlib.import_module(module), attr)(jobs, **options)
