"""Hooks for runs left alone for days: `hooks.on_loop_end` and `hooks.on_stop`, each a command that gets a
JSON summary on stdin. A hook that fails or runs past `hooks.timeout_seconds` is recorded in the journal
(and its output kept in `state/hooks/`); it never stops the run.

A hook is the user's own program, run for the user: it gets the user's environment (a webhook's address, a
desktop's session), but never the model's key, which only hoh's egress proxy holds (`hook_env`)."""

from __future__ import annotations

import json
import os
import shlex
from typing import Any, Iterable

from ..config import HohConfig, HookCommand, HooksConfig, role_harness
from ..fsutil import note_written
from ..harness.keys import value as held_key
from ..harness.process import run_process
from ..paths import ROLES, WorkspacePaths
from ..records import LoopSummary
from ..store.events import HookRan
from ..store.journal import RunHistory

MAX_HOOK_OUTPUT = 1024 * 1024


def argv_of(command: HookCommand) -> list[str]:
    return shlex.split(command) if isinstance(command, str) else list(command)


def loop_summary(summary: LoopSummary) -> dict[str, Any]:
    """A loop in a hook's payload: `hoh status`'s loop entry, plus `criteria`, the name hooks knew before
    (the same figure as `criteria_total`), so a hook written for it still reads it."""
    return {**summary.to_json(), "criteria": summary.criteria_total}


def run_summary(paths: WorkspacePaths, history: RunHistory, budgets: dict[str, Any]) -> dict[str, Any]:
    usage = history.usage
    return {"workspace": str(paths.root), "loops_finished": history.last_finished_loop,
            "target_loops": history.run_started.target_loops if history.run_started else None,
            "tokens": usage.total_tokens, "cost_usd": usage.cost_usd,
            "wall_hours": round(history.wall_seconds() / 3600, 4), "budget": budgets}


def key_names(config: HohConfig) -> set[str]:
    """The variables holding a model's key for some role (`api_key_env`, the harness's or a role's own)."""
    return {name for role in ROLES if (name := role_harness(config, role).api_key_env)}


def hook_env(keys: Iterable[str]) -> dict[str, str]:
    """The user's environment without the model's keys: no variable `keys` names, nor any other that holds one
    of their values (the same key exported under a second name)."""
    keys = set(keys)
    secrets = {value for k in keys if (value := held_key(k))}
    return {k: v for k, v in os.environ.items() if k not in keys and v not in secrets}


def run_hook(name: str, config: HooksConfig, paths: WorkspacePaths, payload: dict[str, Any],
             loop: int | None, tag: str, keys: Iterable[str] = ()) -> HookRan | None:
    """Run hook `name` (if configured) with `payload` on stdin, in the user's environment without the variables
    `keys` (`key_names`); the event to journal, or None."""
    command = getattr(config, name)
    if command is None:
        return None
    stdout, stderr = paths.hook_output(tag, name, "out"), paths.hook_output(tag, name, "err")
    env = {**hook_env(keys), "HOH_WORKSPACE": str(paths.root), "HOH_HOOK": name}
    note_written(stdout)
    note_written(stderr)
    proc = run_process(argv_of(command), cwd=paths.root, env=env, stdin=json.dumps(payload).encode(),
                       stdout_path=stdout, stderr_path=stderr,
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
