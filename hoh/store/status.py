"""A read-only summary of a workspace for `hoh status`: loops, verdicts, attempts, time, issues, tokens and
cost (per loop and per role), budgets, the stop reason, a pause for a usage limit, and an ETA.

The figures come from the journal's one fold (`RunHistory`) alone, no per-loop state file; this
module only shapes them. Nothing is written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Union

from ..paths import ROLES
from ..statuses import RunStatus
from ..usage import Usage
from .budget import figures
from .fold import Fold, read_fold
from .journal import LoopStats, RunHistory
from .lock import lock_held as _lock_held
from .notes import NoteBook, queued
from .readview import ReadView, Settings

if TYPE_CHECKING:
    from .workspace import Workspace

Readable = Union[ReadView, "Workspace"]

STATUS_SCHEMA_VERSION = 3
"""2: cost, budget, stop_reason, paused_until, eta, roles, patience; tokens and cost_usd per loop.
3: stop_reason.message; a loop's reason; an unfinished loop of a run nobody holds says how the run ended;
notes."""
ETA_WINDOW = 5
"""The ETA assumes the next loops take as long as the mean of the last this many."""


def lock_held(ws: Readable) -> bool:
    """Whether a hoh process is working in the workspace right now."""
    return _lock_held(ws.paths.root)


def run_state(history: RunHistory, ws: Readable) -> RunStatus:
    if history.run_started is None:
        return RunStatus.NOT_STARTED
    if history.run_finished is not None:
        return RunStatus(history.run_finished.status)
    return RunStatus.RUNNING if lock_held(ws) else RunStatus.INTERRUPTED


def clock(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))


def _roles(settings: Settings, history: RunHistory, loops: list[LoopStats]) -> dict[str, Any]:
    """Per role: the harness and model it ran on (its latest attempt's, else the config's), and its totals."""
    out = {}
    for role in ROLES:
        harness, model = history.role_setting.get(role, settings.roles[role])
        usage = Usage.sum(s.usage[role] for s in loops)
        out[role] = {"harness": harness, "model": model, "attempts": sum(s.attempts[role] for s in loops),
                     "seconds": round(sum(s.role_seconds[role] for s in loops), 3), "tokens": usage.total_tokens,
                     "cost_usd": usage.cost_usd, "usage": usage.to_json()}
    return out


def _eta(history: RunHistory, state: RunStatus, target: int, now: float) -> dict[str, Any] | None:
    if state.ended_as_planned or state is RunStatus.NOT_STARTED:
        return None  # before the loops are looked at: a long finished run has many
    remaining = target - history.last_finished_loop
    finished = [s for s in history.loop_list() if s.status.finished and s.seconds > 0] if remaining > 0 else []
    if not finished:
        return None
    recent = finished[-ETA_WINDOW:]
    per_loop = sum(s.seconds for s in recent) / len(recent)
    seconds = round(per_loop * remaining, 1)
    return {"seconds_per_loop": round(per_loop, 1), "remaining_loops": remaining, "seconds": seconds,
            "at": clock(now + seconds) if state is RunStatus.RUNNING else None}


def stop_message(status: RunStatus, error: str | None) -> str:
    """How a session's end reads for people: `stopped by hoh stop (pid 7) …`, `interrupted (Ctrl-C)`."""
    if status is RunStatus.INTERRUPTED:
        if error in (None, "KeyboardInterrupt"):  # what the Runtime records for a second Ctrl-C or SIGTERM
            return "interrupted (Ctrl-C)"
        return f"interrupted: {error}"
    if status is RunStatus.STOPPED and error and error.startswith("stopped "):
        return error
    return f"{status.value.replace('_', ' ')}: {error}" if error else status.value.replace("_", " ")


KILLED = "interrupted: the hoh process ended without recording why (killed?); continue with hoh resume"


def _stop_reason(history: RunHistory, state: RunStatus) -> dict[str, Any] | None:
    """Why the last session ended short of `finished`: its status and message (with the budget's figures)."""
    ended = history.run_finished
    if ended is None:
        # Nobody holds the workspace and the journal has no end: the process died (kill -9, a reboot).
        return {"status": RunStatus.INTERRUPTED, "error": None, "message": KILLED} \
            if state is RunStatus.INTERRUPTED else None
    if ended.status == RunStatus.FINISHED:
        return None
    reason: dict[str, Any] = {"status": ended.status, "error": ended.error,
                              "message": stop_message(RunStatus(ended.status), ended.error)}
    if ended.status == RunStatus.BUDGET_EXHAUSTED and (stop := history.budget_stop):
        reason.update(budget=stop.budget, limit=stop.limit, spent=stop.spent, estimate=stop.estimate, role=stop.role,
                      loop=stop.loop)
    return reason


@dataclass(frozen=True)
class EarlierLoops:
    """What `hoh status`'s text reads of the loops before those its table shows, which need no entry of their own
    (at 500 loops, making every entry would be most of its time)."""

    count: int
    last_candidate: str | None
    """The latest of their candidates."""
    violations: list[tuple[int, str, int]]
    """(loop, role, count) for each role that wrote into a protected area, in loop order."""

    @classmethod
    def of(cls, loops: Iterable[tuple[int, str | None, Mapping[str, int]]]) -> "EarlierLoops":
        """From each loop's number, candidate and violations per role, in loop order."""
        count, last, violations = 0, None, []
        for loop, candidate_id, by_role in loops:
            count += 1
            last = candidate_id or last
            violations += [(loop, role, n) for role, n in by_role.items() if n]
        return cls(count, last, violations)


def workspace_status(ws: Readable, shown: int | None = None, fold: Fold | None = None) -> dict[str, Any]:
    """The summary `hoh status --json` prints, of a workspace opened for reading (or opened whole). With `shown`
    (`hoh status` without --json), only the last `shown` loops have an entry in `loops`, and `earlier_loops` (an
    `EarlierLoops`) says what the text shows of the others. `fold` is the journal's, when the caller keeps it
    (`hoh view` follows the journal); else it is read, from its checkpoint on."""
    settings = ws.settings if isinstance(ws, ReadView) else Settings.of(ws.config)
    fold = fold or read_fold(ws.paths, steps=False)  # the journal read once: the run and its notes
    history = fold.history
    loops = history.loop_list()
    state = run_state(history, ws)
    now = time.time()
    target = history.run_started.target_loops if history.run_started else settings.loops
    live = state is RunStatus.RUNNING
    paused = history.quota_wait if live and history.quota_wait and history.quota_wait.until > now \
        else None
    usage = history.usage  # a sum over every loop: once
    entries = loops if shown is None else loops[max(0, len(loops) - shown):]
    data = {
        "schema_version": STATUS_SCHEMA_VERSION,
        "workspace": str(ws.paths.root),
        "harness": settings.harness,
        "sandbox": settings.sandbox,
        "spec_sha256": ws.identity["spec_sha256"],
        "state": state.value,
        "target_loops": target,
        "loops_finished": sum(1 for s in loops if s.status.finished),
        "usage": usage.to_json(),
        "tokens": usage.total_tokens,
        "cost_usd": usage.cost_usd,
        "wall_hours": round(history.wall_seconds(now if live else None) / 3600, 4),
        "budget": figures(settings.budget, history, now if live else None),
        "stop_reason": _stop_reason(history, state),
        "paused_until": clock(paused.until) if paused else None,
        "eta": _eta(history, state, target, now),
        "patience": {"limit": settings.patience, "loops_without_progress": history.no_progress_streak}
        if settings.patience else None,
        "roles": _roles(settings, history, loops),
        "notes": _notes(ws, fold.notes),
        "loops": loop_entries(entries, state, now),
    }
    if shown is not None:
        data["earlier_loops"] = EarlierLoops.of((stats.loop, stats.candidate_id, stats.violations)
                                                for stats in loops[:len(loops) - len(entries)])
    return data


def _notes(ws: Readable, book: NoteBook) -> list[dict[str, Any]]:
    """Every note: stored ones with the loop that took each (None: the next loop that plans), then those still
    waiting in the inbox for the live run (no id yet)."""
    out: list[dict[str, Any]] = []
    for note_id in book.stored:
        try:
            text = ws.paths.note(note_id).read_text(encoding="utf-8").strip()
        except OSError:
            text = None
        out.append({"id": note_id, "loop": book.taken_by.get(note_id), "state": "taken" if note_id in book.taken_by
                    else "pending", "text": text})
    out += [{"id": None, "loop": None, "state": "queued", "text": text} for text in queued(ws.paths, book)]
    return out


def loop_entries(loops: Iterable[LoopStats], state: RunStatus, now: float) -> list[dict[str, Any]]:
    """Each loop's figures, in a run in `state` at `now`: an unfinished one's time so far (up to `now` while the
    run is live), and, when no hoh works on it, how its run ended (`ended`: `stopped`, `interrupted`, …). `status`
    stays a loop status: run and loop statuses share names (`complete`), and the bench, the Harbor agent and the
    report read it as one."""
    live = state is RunStatus.RUNNING
    out = []
    for stats in loops:
        entry = stats.summary().to_json()
        if not stats.status.finished:
            entry["seconds"] = stats.seconds_so_far(now if live else None)
            if not live:
                entry["ended"] = state.value
        out.append(entry)
    return out
