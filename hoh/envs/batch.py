"""Many short runs in one `exec`: a check step's checks (admission, replay) in QA's Docker or Podman container.

Run as attempts, each check costs an engine call, python3's start there, the view checked and placed and the
collecting steps: ~0.15 s a check here, against ~25 ms in the local jail. A batch sends the view's changes and
every run's files once, and `inside.py batch` places the view, then runs the checks in turn as attempts run
(each its own supervisor session, its own limits, its own stdin and variables), killing every process a run
left and emptying /tmp after it. The streams and results come back in one tar, written member by member as each
run ends; what did not come back whole runs again alone, as does the rest of a batch that stopped.

Why one check cannot change what a later one sees or reports (each is QA's, a root process there):
- What comes back is believed only from a process no role can reach into (`guarded=1` first, as for an attempt
  collected by its own `exec`); else nothing is run in the batch and every check runs alone.
- Each run's stdin, variables and supervisor come from that process's memory, read before any check ran, into
  a directory it makes afresh (none of its ancestors a link).
- Before each run, the view and hoh's programs are listed against the listing taken as they were placed (every
  change to an entry moves its ctime, which a process cannot set back): a difference stops the batch there, is
  journaled, and the rest run alone, each with the view put right first.
- After the batch, the engine is asked what changed in the rest of the container (`verify.Watch`), as between
  two attempts: any change discards every result of the batch, journaled, and the checks run again alone in a
  fresh container.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from . import supervise, sync, transfer, verify
from .base import CommandRecord, Execution, Queued
from .channel import Step, add, pack, unpack, usable
from .install import stage_programs
from .moving import Move

if TYPE_CHECKING:
    from .role import RoleEnvironment

SLACK_SECONDS = 2.0
"""Per run, beyond its own timeout, before hoh stops waiting for the batch's `exec`."""


def run_batch(where: "RoleEnvironment", runs: Sequence[Queued], deadline: float | None) -> list[Execution | None]:
    """The runs in one `exec` where that is sound; None for each that must run alone (or was never started)."""
    none: list[Execution | None] = [None] * len(runs)
    where.start()
    where._check_between(runs[0].attempt_dir)
    where._verified.discard(runs[0].attempt_dir)
    paths = where.paths(runs[0].launch)
    with where._lock:
        env = where.env
        if (len(runs) < 2 or where.inflight or not where.owned or env is None or where.watch is None
                or (channel := usable(env, where.container, where.python, where.session)) is None
                or any(r.request.egress_token or where.paths(r.launch) != paths for r in runs) or paths[0]):
            return none
        where.inflight += 1
        first = where.runs + 1
        where.runs += len(runs)
        where.held = where.held or sync.Held()
        attempts = [supervise.Attempt(first + i) for i in range(len(runs))]
        move = Move(attempts[0], transfer.outermost(paths[1]), [], paths[2], where.held, where.cache, where.views)
    scratch = Path(tempfile.mkdtemp(prefix="hoh-env-batch-"))
    try:
        return _batch(where, channel, move, attempts, runs, deadline, scratch)
    except (OSError, TimeoutError, RuntimeError, shutil.Error):
        where._server_killed()
        with where._lock:  # what the environment holds is not known: the next attempt sends all of it
            where.held = None
        return none
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        with where._lock:
            where.inflight -= 1


def _batch(where: "RoleEnvironment", channel, move: Move, attempts: list[supervise.Attempt],
           runs: Sequence[Queued], deadline: float | None, scratch: Path) -> list[Execution | None]:
    done: list[Execution | None] = [None] * len(runs)
    staging, sent, came = scratch / "staging", scratch / "in.tar", scratch / "came"
    staging.mkdir()
    move.stage(staging)
    programs = stage_programs(where.programs, staging)
    for attempt, run in zip(attempts, runs):
        supervise.stage_stdin(attempt, run.launch.stdin, staging)
        supervise.stage_env(attempt, where.variables(run.launch, run.request), staging)
    pack(staging, sent)
    shutil.rmtree(staging)
    budget = None if deadline is None else max(0.0, deadline - time.monotonic())
    mark = channel.mark()
    job = {"place": move.place_args(), "moves": supervise.moves(attempts[0], programs),
           "roots": [str(r) for r in move.roots], "programs": programs, "supervisor": supervise.SUPERVISOR,
           "mark": mark, "budget": budget,
           "runs": [{"dir": a.dir, "cwd": str(r.launch.cwd), "argv": r.launch.argv, "wall": r.request.wall_timeout,
                     "idle": r.request.idle_timeout, "max_output": r.request.max_output_bytes,
                     "sweep": supervise.sweep(where.spared, empty_tmp=False, ended=a)} for a, r in zip(attempts, runs)]}
    add(sent, "job.json", json.dumps(job).encode())
    longest = sum(min(r.request.wall_timeout, 10**6) for r in runs)
    if budget is not None:
        longest = min(longest, budget + max(r.request.wall_timeout for r in runs))
    command = Step(("batch", attempts[0].incoming), supervise.sweep(where.spared, empty_tmp=False))
    reply = where._run(channel.run(command, sent, scratch / "out", mark,
                                   supervise.EXEC_TIMEOUT + longest + SLACK_SECONDS * len(runs)
                                   + sent.stat().st_size / supervise.SLOWEST_BYTES_PER_SECOND))
    lines = reply.text.splitlines()
    left = int(lines[0][5:]) if lines and lines[0].startswith("left=") and lines[0][5:].isdigit() else 0
    if "guarded=1" not in lines[1:2]:
        return done
    report, _ = supervise.reported("\n".join(lines[2:]), "placed")
    if report is None or report.get("held") is None or report.get("tampered"):
        _unplaced(where, move, report)
        return done
    move.placed(report)
    if reply.tar is None:
        return done
    unpack(scratch / "out", reply.tar, came, whole=False)
    stopped = _json(came / "stopped.json")
    if stopped is not None:  # a change to the view is journaled as the next attempt's place puts it right
        changed = [p for p in stopped.get("changed", []) if isinstance(p, str)
                   and not any(Path(p).is_relative_to(root) for root in move.roots)]
        if changed:
            where._tampered(changes=verify.summary([f"C {p}" for p in changed]))
    for i, (attempt, run) in enumerate(zip(attempts, runs)):
        result = _json(came / str(i) / "result.json")
        if result is None or not _sound(result):
            continue
        left += result["left"]
        done[i] = _adopted(where, attempt, run, came / str(i), result, move.moved_in if i == 0 else 0)
    if left:
        where._tampered(processes=left)
    changes = where._run(where._unexpected(), 300)
    if changes:  # a run changed the container outside what is listed between runs: none of them is believed
        where._tampered(changes=verify.summary(changes))
        with where._lock:
            where._replace()
        return [None] * len(runs)
    asked: Future[list[str]] = Future()
    asked.set_result([])
    where._asked = (where.runs, asked)  # the next attempt need not ask again
    return done


def _unplaced(where: "RoleEnvironment", move: Move, report: dict | None) -> None:
    """The view there was not as hoh's record said: put right by the next attempt alone (as `_start_attempt`)."""
    if report is None:
        raise OSError("hoh's script did not place the view")
    changed = move.placed(report)
    where._tampered(verify.summary([f"C {p}" for p in changed] or ["C hoh's record of the view"]))
    if report.get("held") is None:
        with where._lock:
            where._replace()


def _json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_bytes()) if path.is_file() and not path.is_symlink() else None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _sound(result: dict) -> bool:
    """A run's `result.json` as `inside.py batch` writes it (read as hostile all the same)."""
    code, limit, seconds, left = (result.get(k) for k in ("code", "limit", "seconds", "left"))
    return ((code is None or type(code) is int) and limit in (None, "wall", "idle", "output")
            and (code is None) == (limit is not None) and type(seconds) in (int, float) and math.isfinite(seconds)
            and type(left) is int and left >= 0)


def _adopted(where: "RoleEnvironment", attempt: supervise.Attempt, run: Queued, came: Path, result: dict,
             moved_in: int) -> Execution:
    run_dir = run.attempt_dir
    supervise.adopt_streams(came, run_dir)
    CommandRecord(run.launch.argv, str(run.launch.cwd), sorted(where.variables(run.launch, run.request)),
                  where.spec.name, where.spec.session_id, attempt.dir, batch=True, bytes_in=moved_in,
                  bytes_out=0).write(run_dir)
    return Execution(supervise.result(result["code"], result["limit"], float(result["seconds"]), run_dir / "events.jsonl",
                                      run_dir / "stderr.log", run.launch.argv[0]))
