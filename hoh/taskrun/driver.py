"""Drive a hoh build inside a task environment, loop by loop, under the task's time budget.

Each loop is one `hoh build`/`hoh resume --loops 1` subprocess, so a loop that would overrun the
budget is stopped the way a user stops hoh (SIGTERM: the harness's process group is killed and
the journal records it), and the workdir is put back to the last finished loop's candidate
before the budget ends. After every finished loop its candidate is exported as an artifact and
the summary is rewritten, so whatever cuts the run short, every finished loop stays gradable.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .. import api
from ..config import load_config
from ..errors import HohError, TaskEnvironmentError
from ..fsutil import atomic_write_json
from ..harness.process import reap, run_process
from ..paths import TaskRunPaths, WorkspacePaths
from ..records import LoopSummary
from ..statuses import LoopStatus, RunStatus
from ..store.journal import Journal, RunHistory
from ..store.workspace import Workspace, is_workspace, open_workspace
from .candidates import export_candidate, frozen_candidate, restore_workdir
from .endpoint import check_reachable, resolve_base_url

SUMMARY_SCHEMA_VERSION = 1


class Interrupted(Exception):
    """The driver itself got SIGTERM (Harbor cancelled the agent): stop like at the deadline."""


@dataclass(frozen=True)
class TaskRunSettings:
    spec: Path
    """The task's instruction, hoh's spec."""
    project: Path
    """The task's working directory: the project hoh builds."""
    config: Path
    """The hoh.yaml to start from (harness, model, loops, policies)."""
    loops: int
    paths: TaskRunPaths
    budget_seconds: float | None = None
    """The whole run's time, from the driver's start; None runs every loop."""
    mock_llm: Path | None = None
    """Serve this hoh.testing.mock_llm script inside the environment and point the harness at it."""


class TaskRun:
    def __init__(self, settings: TaskRunSettings, out: Callable[[str], None] = print):
        self.s = settings
        self.root = Path(settings.paths.workspace).resolve()
        self.ws = WorkspacePaths(self.root)
        """Paths of the workspace's own files; its project dir is read from it (`workspace()`)."""
        self.out = out
        self.started = time.monotonic()
        self.deadline = self.started + settings.budget_seconds if settings.budget_seconds else None
        self.status: RunStatus = RunStatus.RUNNING
        self.error: str | None = None
        self.base_url: str | None = None

    # ---- entry point -------------------------------------------------------------------------
    def run(self) -> int:
        """0: at least one loop finished (all of them, or the budget ran out later); 1: hoh stopped,
        or the budget ran out before the first loop finished; 2: the environment cannot run hoh."""
        previous = signal.signal(signal.SIGTERM, _raise_interrupted)
        try:
            with ExitStack() as stack:
                self.base_url = self.endpoint(stack)
                self.write_summary()
                return self.loops()
        except Interrupted:  # between loops: nothing runs, the workdir is already a candidate
            self.status = RunStatus.INTERRUPTED
            return 0 if self.finished_loops() else 1
        except TaskEnvironmentError as err:
            self.status, self.error = RunStatus.FAILED, str(err)
            self.say(f"hoh cannot run here: {err}")
            return 2
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.write_summary()

    def endpoint(self, stack: ExitStack) -> str | None:
        """The model endpoint the harness will use, reachable from here, or None (the harness's own)."""
        if self.s.mock_llm is not None:
            from ..testing.mock_llm import MockLLM
            mock = stack.enter_context(MockLLM(script=str(self.s.mock_llm), log_path=Path(self.s.paths.mock_log)))
            self.say(f"serving the mock model {self.s.mock_llm} at {mock.base_url}")
            return mock.base_url
        url = load_config(self.s.config).harness.base_url
        if url is None:
            return None
        resolved = resolve_base_url(url)
        check_reachable(resolved, given=url)
        return resolved

    def loops(self) -> int:
        for t in range(self.finished_loops() + 1, self.s.loops + 1):
            try:
                code, message = self.run_loop(t)
            except Interrupted:  # the choke point has stopped hoh already
                self.reap_harness()
                self.status = RunStatus.INTERRUPTED
                return self.cut(t, "Harbor stopped the agent")
            if code is None:
                self.status = RunStatus.OUT_OF_TIME
                return self.cut(t, "the time budget ran out")
            if code == 0:
                self.loop_done(t)
                continue
            self.restore()
            if code == 2:  # hoh refused its input here: the harness is missing, the workspace foreign
                raise TaskEnvironmentError(message)
            self.status, self.error = RunStatus.STOPPED, message
            self.say(f"hoh stopped in loop {t}: {message}")
            return 1
        self.status = RunStatus.FINISHED
        self.say(f"hoh finished {self.s.loops} loops in {self.elapsed():.0f}s")
        return 0

    # ---- one loop ----------------------------------------------------------------------------
    def hoh_argv(self, t: int) -> list[str]:
        argv = [sys.executable, "-m", "hoh"]
        if not is_workspace(self.ws.root):
            argv += ["build", str(self.s.spec), "-w", str(self.ws.root), "--project", str(self.s.project),
                     "--config", str(self.s.config), "--loops", "1"]
            if self.base_url:
                argv += ["--set", f"harness.base_url={self.base_url}"]
            argv += self.sandbox_setting()
        else:
            argv += ["resume", "-w", str(self.ws.root), "--loops", "1"]
        return argv + ["-q"]

    def sandbox_setting(self) -> list[str]:
        """The OS jail where this environment allows one; else say plainly what protects each area."""
        from ..harness.jail import probe
        if load_config(self.s.config).sandbox.mode == "off" or (problem := probe()) is None:
            return []
        self.say(f"no OS jail in this environment ({problem}); running with sandbox.mode=off: the container "
                 "bounds every role, the harness's own flags apply, and hoh's guard checks the project, the "
                 "history, state/ and the journal after every attempt and puts back any change")
        return ["--set", "sandbox.mode=off"]

    def run_loop(self, t: int) -> tuple[int | None, str]:
        """Run loop t; (exit code, hoh's first error line), or (None, "") when the budget ran out.

        At the deadline the choke point sends hoh SIGTERM (hoh then kills its harness and journals
        the interruption) and SIGKILL a moment later; a harness the journal still names is reaped."""
        out = Path(self.s.paths.hoh_output(t))
        remaining = self.remaining()
        # The deadline is hard: hoh's first SIGTERM stops it at once, not after the running attempt.
        env = {**os.environ, "HOH_STOP_AT_ONCE": "1"}
        result = run_process(self.hoh_argv(t), cwd=Path(self.s.paths.logs), env=env, stdin=None,
                             stdout_path=out.with_suffix(".out"), stderr_path=out.with_suffix(".err"),
                             wall_timeout=float("inf") if remaining is None else remaining,
                             idle_timeout=float("inf"))
        if result.exit_code is None:
            self.reap_harness()
            if result.spawn_error:
                raise TaskEnvironmentError(f"hoh could not start here: {result.spawn_error}")
            return None, ""
        lines = [line.removeprefix("hoh: ") for line in result.stderr_excerpt.splitlines() if line.startswith("hoh: ")]
        detail = lines[0] if lines else (result.stderr_excerpt.strip()[-300:] or f"exit code {result.exit_code}")
        return result.exit_code, detail

    def reap_harness(self) -> None:
        if self.ws.journal.exists():
            for pid, ticks in self.history().live_processes:
                reap(pid, ticks)

    def loop_done(self, t: int) -> None:
        entry = self.loop_entry(t)
        if entry.candidate_id:
            export_candidate(self.workspace(), t, entry.status, self.s.paths)
        self.write_summary()
        self.say(describe_loop(entry, self.s.loops))

    def cut(self, t: int, why: str) -> int:
        self.restore()
        done = self.finished_loops()
        if done:
            self.say(f"{why} in loop {t}; the workdir holds loop {done}'s candidate")
            return 0
        self.error = f"{why} ({self.budget_text()}) {self.first_loop_stage()}"
        self.say(self.error)
        return 1

    # ---- the workdir -------------------------------------------------------------------------
    def workspace(self) -> Workspace:
        return open_workspace(self.root)

    def restore(self) -> None:
        """After a cut or a stop: the workdir is the last finished loop's candidate, or A_0 (the
        task's files as they were) when no loop finished."""
        if not is_workspace(self.root):
            return
        ws = self.workspace()
        for t in range(self.finished_loops(), 0, -1):
            if ws.paths.loop(t).candidate.exists():
                return restore_workdir(ws, frozen_candidate(ws, t).commit, publish=True)
        restore_workdir(ws, ws.identity["root_commit"], publish=False)

    # ---- reading the run ---------------------------------------------------------------------
    def history(self) -> RunHistory:
        return RunHistory.read(Journal(self.ws.journal))

    def finished_loops(self) -> int:
        return self.history().last_finished_loop if is_workspace(self.ws.root) else 0

    def loop_entry(self, t: int) -> LoopSummary:
        return next(LoopSummary.from_json(e) for e in api.status(self.ws.root)["loops"] if e["loop"] == t)

    def first_loop_stage(self) -> str:
        steps = self.history().steps if is_workspace(self.ws.root) else {}
        if (1, "planner") not in steps:
            return "before hoh's first role (the planner of loop 1) finished; give the task a longer " \
                   "[agent] timeout_sec, or run harbor with --agent-timeout-multiplier"
        stage = "verified" if (1, "freeze") in steps else "frozen"
        return f"in loop 1 before its candidate was {stage}; no loop finished, give the task a longer " \
               "[agent] timeout_sec, or run harbor with --agent-timeout-multiplier"

    def remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def budget_text(self) -> str:
        return f"{self.s.budget_seconds:.0f}s for hoh" if self.s.budget_seconds else "no budget"

    def say(self, line: str) -> None:
        with open(Path(self.s.paths.log), "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
        self.out(line)

    def write_summary(self) -> None:
        status = api.status(self.ws.root) if is_workspace(self.ws.root) else None
        loops = [e for e in (status or {}).get("loops", []) if e["status"] != LoopStatus.RUNNING]
        for entry in loops:
            if Path(self.s.paths.candidate_record(entry["loop"])).exists():
                entry["artifact"] = str(self.s.paths.candidate_dir(entry["loop"]))
        atomic_write_json(Path(self.s.paths.summary), {
            "schema_version": SUMMARY_SCHEMA_VERSION, "status": self.status, "error": self.error,
            "target_loops": self.s.loops, "loops_finished": len(loops), "budget_seconds": self.s.budget_seconds,
            "seconds": round(self.elapsed(), 2), "workdir": str(self.s.project), "workspace": str(self.ws.root),
            "harness": status["harness"] if status else None, "base_url": self.base_url,
            "usage": status["usage"] if status else None, "loops": loops})


def describe_loop(entry: LoopSummary, target: int) -> str:
    """One line per finished loop, for Harbor's log and hoh-run.log."""
    usage = {k: sum(u.get(k, 0) or 0 for u in entry.usage.values()) for k in ("input_tokens", "output_tokens")}
    return (f"hoh loop {entry.loop}/{target}: {entry.verdict or entry.status}, {entry.criteria_verified}/"
            f"{entry.criteria_total} criteria verified, candidate {entry.candidate_id or 'none'}, {entry.seconds:.1f}s, "
            f"tokens in {usage['input_tokens']} out {usage['output_tokens']}")


def _raise_interrupted(signum, frame) -> None:
    raise Interrupted()


def run(settings: TaskRunSettings) -> int:
    try:
        return TaskRun(settings).run()
    except HohError as err:  # a corrupt or foreign workspace: one line, as the CLI does
        print(f"hoh: {err}", file=sys.stderr)
        return err.exit_code
