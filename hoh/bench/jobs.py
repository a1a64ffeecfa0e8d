"""Harbor jobs as `hoh bench` runs them: a JobConfig file, `harbor run -c FILE`, and what it left.

Each job is a plain `harbor run -c CONFIG` of this Python's Harbor (`python -m harbor.cli.main`),
so the job dir is Harbor's own (`harbor view OUT/jobs` shows it); a job Harbor started before is
continued with `harbor job resume`: finished trials are kept, unfinished and cancelled ones rerun.
A job whose every trial finished is not started again at all, so an identical rerun of
`hoh bench run` is immediate.

The job's output goes to a log beside its config; when Harbor stops with an error, the error's
last line (Harbor's own message) is what the trial records show.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any

from ..fsutil import atomic_write_json
from ..harness.process import run_process
from .results import JobFiles, last_error


@dataclass(frozen=True)
class JobOutcome:
    exit_code: int | None
    error: str | None
    """Harbor's own last error line when it stopped with an error; None when the job ran through."""


class Running:
    """Process groups of the `harbor run`s in flight, so an interrupt can stop them (they are
    their own sessions and do not get the terminal's Ctrl-C)."""

    def __init__(self) -> None:
        self.pids: set[int] = set()
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def add(self, pid: int) -> None:
        with self.lock:
            self.pids.add(pid)
        if self.stopping.is_set():
            self.stop()

    def discard(self, pid: int) -> None:
        with self.lock:
            self.pids.discard(pid)

    def stop(self) -> None:
        """Ask every running Harbor to stop as on Ctrl-C: it cancels its trials and writes what it has."""
        self.stopping.set()
        with self.lock:
            pids = list(self.pids)
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGINT)
            except ProcessLookupError:
                pass


def harbor_env() -> dict[str, str]:
    """This process's environment, with plain tracebacks (so the last line is the error) and no wrapping."""
    return {**os.environ, "_TYPER_STANDARD_TRACEBACK": "1", "COLUMNS": "4000", "TERM": "dumb"}


def run_job(files: JobFiles, config: dict[str, Any], running: Running) -> JobOutcome:
    """Run the job with Harbor, or resume it when Harbor has started it before: `harbor job resume`
    keeps every finished trial and reruns the unfinished and the cancelled ones, with the config
    the job started with (so a rerun with another --jobs resumes it too)."""
    if files.stored_config() is None:
        atomic_write_json(files.config, config)
        argv = [sys.executable, "-m", "harbor.cli.main", "run", "-c", str(files.config), "-y"]
    else:
        argv = [sys.executable, "-m", "harbor.cli.main", "job", "resume", "-p", str(files.dir)]
    pid_box: list[int] = []

    def spawned(pid: int) -> None:
        pid_box.append(pid)
        running.add(pid)

    try:
        result = run_process(argv, cwd=files.out, env=harbor_env(), stdin=None, stdout_path=files.stdout,
                             stderr_path=files.stderr, wall_timeout=float("inf"), idle_timeout=float("inf"),
                             on_spawn=spawned)
    finally:
        for pid in pid_box:
            running.discard(pid)
    if result.spawn_error:
        return JobOutcome(None, f"harbor could not start: {result.spawn_error}")
    if result.exit_code == 0:
        return JobOutcome(0, None)
    return JobOutcome(result.exit_code, last_error(files) or f"harbor run exited with {result.exit_code}")
