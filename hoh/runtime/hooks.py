"""Hooks for runs left alone for days: `hooks.on_loop_end` and `hooks.on_stop`, each a command that gets a
JSON summary on stdin. A hook that fails or runs past `hooks.timeout_seconds` is recorded in the journal
(and its output kept in `state/hooks/`); it never stops the run."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from ..config import HookCommand, HooksConfig
from ..fsutil import note_written
from ..harness.process import run_process
from ..paths import WorkspacePaths
from ..store.events import HookRan
from ..store.journal import LoopStats, RunHistory

MAX_HOOK_OUTPUT = 1024 * 1024


def argv_of(command: HookCommand) -> list[str]:
    return shlex.split(command) if isinstance(command, str) else list(command)


def loop_summary(stats: LoopStats) -> dict[str, Any]:
    total = stats.total_usage
    return {"loop": stats.loop, "status": stats.status, "candidate_id": stats.candidate_id,
            "criteria_verified": stats.verified, "criteria": stats.criteria, "issues": stats.issues,
            "progress": stats.progress, "seconds": stats.seconds, "tokens": total.total_tokens,
            "cost_usd": total.cost_usd, "usage": {role: u.to_json() for role, u in stats.usage.items()}}


def run_summary(paths: WorkspacePaths, history: RunHistory, budgets: dict[str, Any]) -> dict[str, Any]:
    usage = history.usage
    return {"workspace": str(paths.root), "loops_finished": history.last_finished_loop,
            "target_loops": history.run_started.target_loops if history.run_started else None,
            "tokens": usage.total_tokens, "cost_usd": usage.cost_usd,
            "wall_hours": round(history.wall_seconds() / 3600, 4), "budget": budgets}


def run_hook(name: str, config: HooksConfig, paths: WorkspacePaths, payload: dict[str, Any],
             loop: int | None, tag: str) -> HookRan | None:
    """Run hook `name` (if configured) with `payload` on stdin; the event to journal, or None."""
    command = getattr(config, name)
    if command is None:
        return None
    out = paths.hooks / f"{tag}-{name}"
    env = {**os.environ, "HOH_WORKSPACE": str(paths.root), "HOH_HOOK": name}
    note_written(Path(f"{out}.out"))
    note_written(Path(f"{out}.err"))
    proc = run_process(argv_of(command), cwd=paths.root, env=env, stdin=json.dumps(payload).encode(),
                       stdout_path=Path(f"{out}.out"), stderr_path=Path(f"{out}.err"),
                       wall_timeout=config.timeout_seconds, idle_timeout=config.timeout_seconds,
                       max_output=MAX_HOOK_OUTPUT)
    error = None
    if proc.spawn_error:
        error = f"could not start: {proc.spawn_error}"
    elif proc.timed_out:
        error = f"killed after {config.timeout_seconds:g}s" if proc.timed_out != "output" else "printed too much"
    elif proc.exit_code != 0:
        last = proc.stderr_excerpt.strip().splitlines()[-1:] or ["no stderr"]
        error = f"exit code {proc.exit_code}: {last[0][:300]}"
    return HookRan(hook=name, loop=loop, exit_code=proc.exit_code, seconds=proc.duration_s, error=error)
