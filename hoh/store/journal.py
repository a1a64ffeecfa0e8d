"""The append-only, fsynced event log that is the truth for resume, and the one fold over it.

Each line is one event of `events.py` with a sequence number and wall time. A line cut short by
a crash is ignored on read (it never completed); everything before it stands. `RunHistory.fold`
is the only reader that derives state from the events: resume progress and per-loop figures
(`hoh status`, reports, budgets) all come from it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..errors import StateError
from ..fsutil import atomic_write_bytes
from ..paths import ROLES
from ..summary import LoopSummary
from ..statuses import LoopStatus, RunStatus
from ..usage import Usage
from .events import (AttemptFinished, AttemptStarted, BudgetStop, ChecksAdmitted, ChecksReplayed, EnvironmentStarted,
                     EnvironmentStopped, Event, EventError, LoopFinished, LoopStarted, ProcessStarted, QuotaWait,
                     RoleFailed, RunFinished, RunStarted, StepFinished, StopRequested, ViolationBetweenRoles)

JOURNAL_SCHEMA_VERSION = 1
BETWEEN_ROLES = "between roles"
"""The key of `LoopStats.violations` for changes found while no role ran."""
_TAIL_PROBE = 64 * 1024
UNSYNCED = (AttemptStarted, ProcessStarted)
"""Lines appended without an fsync of their own: they matter only while the machine runs (what is in flight, the
processes a killed hoh left to reap), and the next line's fsync makes them durable in their order."""


def _stat_key(st: os.stat_result) -> tuple[int, ...]:
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode


@dataclass(frozen=True)
class Record:
    """One journal line: the event with its sequence number and wall time."""

    seq: int
    time: float
    event: Event


def parse_lines(path: Path, lines: list[str], before: int = 0) -> Iterator[Record]:
    """The records of `lines`, the journal's after its first `before`; a last one that is not JSON is left out."""
    last = before + len(lines)
    for number, line in enumerate(lines, before + 1):
        try:
            raw = json.loads(line)
        except ValueError:
            if number == last:  # torn final write from a crash
                return
            raise StateError(f"{path}: line {number} is corrupt; restore it from a backup") from None
        if not isinstance(raw, dict):
            raise StateError(f"{path}: line {number} is not an event; restore it from a backup")
        if isinstance(raw.get("v"), int) and raw["v"] > JOURNAL_SCHEMA_VERSION:
            raise StateError(f"{path}: written by a newer hoh (v{raw['v']}); upgrade hoh")
        try:
            yield Record(int(raw["seq"]), float(raw["time"]), Event.from_json(raw))
        except (EventError, KeyError, TypeError, ValueError) as err:
            raise StateError(f"{path}: line {number}: {err}; restore the journal from a backup") from None


class Journal:
    def __init__(self, path: Path):
        self.path = path
        self.listeners: list[Callable[[Record], None]] = []
        """Called with every record appended (the Runtime keeps its fold current this way)."""
        self._seq = self._last_seq()
        self._content: bytearray | None = None  # the file as hoh left it, once the guard asks
        self._stat: tuple[int, ...] | None = None
        self._lock = threading.RLock()
        """Developers working at once append from their own threads, and each one's guard asks `untouched`:
        an append and its stat are one step for every other thread."""

    def _last_seq(self) -> int:
        """The last complete line's sequence number, read from the end of the file (not the whole log)."""
        if not self.path.exists():
            return 0
        with open(self.path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            probe = min(size, _TAIL_PROBE)
            while True:
                fh.seek(size - probe)
                lines = fh.read(probe).split(b"\n")
                complete = lines[1:-1] if probe < size else lines[:-1]
                for line in reversed(complete):
                    try:
                        return int(json.loads(line)["seq"])
                    except (ValueError, KeyError, TypeError):
                        continue  # a torn line; the one before it is the last complete one
                if probe >= size:
                    return 0
                probe = min(size, probe * 4)

    def records(self) -> Iterator[Record]:
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8") as fh:
            lines = fh.readlines()
        yield from parse_lines(self.path, lines)

    def append(self, event: Event) -> Record:
        with self._lock:
            return self._append(event)

    def _append(self, event: Event) -> Record:
        self._seq += 1
        record = Record(self._seq, round(time.time(), 3), event)
        line = {"v": JOURNAL_SCHEMA_VERSION, "seq": record.seq, "time": record.time, **event.to_json()}
        data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
        self._repair_torn_tail()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            if not isinstance(event, UNSYNCED):
                os.fsync(fd)
            if self._content is not None:
                self._content += data
                self._stat = _stat_key(os.fstat(fd))
        finally:
            os.close(fd)
        for listener in self.listeners:
            listener(record)
        return record

    # ---- for the guard: was the journal changed by anyone but hoh? -------------------------------
    def _baseline(self) -> None:
        if self._content is None:
            self._content = bytearray(self.path.read_bytes()) if self.path.exists() else bytearray()
            self._stat = _stat_key(os.stat(self.path)) if self.path.exists() else None

    def untouched(self) -> bool:
        """One stat: the file is exactly as hoh's last append left it."""
        with self._lock:
            self._baseline()
            try:
                return _stat_key(os.stat(self.path)) == self._stat
            except FileNotFoundError:
                return self._stat is None

    def restore(self) -> None:
        """Put back the journal as hoh wrote it."""
        with self._lock:
            self._baseline()
            atomic_write_bytes(self.path, bytes(self._content))
            self._stat = _stat_key(os.stat(self.path))

    def _repair_torn_tail(self) -> None:
        """Drop a partial last line so the next event starts on its own line."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) == b"\n":
                return
            size = fh.seek(0, os.SEEK_END)
            probe = min(size, _TAIL_PROBE)
            while True:
                fh.seek(size - probe)
                cut = fh.read(probe).rfind(b"\n")
                if cut >= 0 or probe >= size:
                    break
                probe = min(size, probe * 4)
            fh.truncate(size - probe + cut + 1)
            fh.flush()
            os.fsync(fh.fileno())
        self._content = None  # read again when the guard next asks


@dataclass
class LoopStats:
    """What the journal says about one loop."""

    loop: int
    status: LoopStatus = LoopStatus.RUNNING
    """Running until LoopFinished."""
    candidate_id: str | None = None
    verified: int = 0
    criteria: int = 0
    issues: dict[str, int] | None = None
    attempts: dict[str, int] = field(default_factory=lambda: {r: 0 for r in ROLES})
    usage: dict[str, Usage] = field(default_factory=lambda: {r: Usage() for r in ROLES})
    role_seconds: dict[str, float] = field(default_factory=lambda: {r: 0.0 for r in ROLES})
    """Time inside the harness, per role, summed over attempts."""
    violations: dict[str, int] = field(default_factory=lambda: {r: 0 for r in ROLES})
    """Protected areas a role changed (each found by the guard and put back), per role."""
    started: float | None = None
    finished: float | None = None
    active: float = 0.0
    """Seconds the loop ran in closed spans: a span ends with its session (a stop, a crash) or the loop."""
    span_start: float | None = None
    """When the loop's current span began (None: not running in the session the fold ended in)."""
    reason: str | None = None
    """Why it fell short of `pass` (`LoopFinished.reason`)."""
    progress: dict[str, int] | None = None
    """behaviours_added, reverified, issues_closed (None in journals before progress was recorded)."""
    failure: str | None = None
    """Why a role of this loop failed (its role and last error), when one did."""
    checks: dict[str, int] | None = None
    """The replay's and the admission's counts (`LoopSummary.checks`); None before any ran."""
    check_step_seconds: dict[str, float] = field(default_factory=dict)
    """replay / admit → its time (a step run again after a crash replaces its figure, never adds to it)."""

    @property
    def made_progress(self) -> bool:
        return any((self.progress or {}).values())

    @property
    def seconds(self) -> float:
        """A finished loop's time: the sum of its spans, so the days a stopped run waited for its resume are
        not in it."""
        return round(self.active, 2) if self.finished is not None else 0.0

    def seconds_so_far(self, now: float | None) -> float:
        """Its time until now: a finished loop's, or an unfinished one's closed spans plus the open one."""
        if self.finished is not None:
            return self.seconds
        open_part = max(0.0, now - self.span_start) if now is not None and self.span_start is not None else 0.0
        return round(self.active + open_part, 2)

    def close_span(self, at: float) -> None:
        if self.span_start is not None:
            self.active += max(0.0, at - self.span_start)
            self.span_start = None

    @property
    def total_usage(self) -> Usage:
        return Usage.sum(self.usage.values())

    def summary(self) -> LoopSummary:
        total = self.total_usage
        return LoopSummary(
            loop=self.loop, status=self.status, candidate_id=self.candidate_id, criteria_verified=self.verified,
            criteria_total=self.criteria, issues=self.issues, progress=self.progress, seconds=self.seconds,
            reason=self.reason,
            role_seconds=dict(self.role_seconds), attempts=dict(self.attempts), violations=dict(self.violations),
            tokens=total.total_tokens, cost_usd=total.cost_usd,
            usage={role: usage.to_json() for role, usage in self.usage.items()}, error=self.failure,
            checks=dict(self.checks) if self.checks is not None else None,
            check_seconds=round(sum(self.check_step_seconds.values()), 3))


@dataclass
class RunHistory:
    """The fold of the whole journal: what has completed (for resume) and the figures of every loop."""

    steps: dict[tuple[int, str], StepFinished] = field(default_factory=dict)
    """(loop, step) → the event that finished it."""
    loops: dict[int, LoopStats] = field(default_factory=dict)
    run_started: RunStarted | None = None
    run_finished: RunFinished | None = None
    live_processes: list[tuple[int, int | None]] = field(default_factory=list)
    live_environments: dict[str, EnvironmentStarted] = field(default_factory=dict)
    """Role environments started and not (yet) stopped, by session id: across sessions, a crash's leftovers."""
    """Harness processes started since the last run began and never seen to finish: after a
    crash of hoh itself they may still be running."""
    in_flight: AttemptStarted | None = None
    """The attempt running now (or cut off by a crash), if any."""
    largest_attempt: dict[str, dict[str, float]] = field(
        default_factory=lambda: {r: {"tokens": 0, "cost_usd": 0.0, "seconds": 0.0} for r in ROLES})
    """Per role, the most tokens, cost and wall seconds any one attempt took (each apart): what the role's
    next attempt is expected to take at most (the budgets' estimate)."""
    role_setting: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    """Per role, the harness and model of its latest attempt."""
    no_progress_streak: int = 0
    """Finished loops in a row without progress, counted since the last `stalled` end."""
    quota_wait: QuotaWait | None = None
    """The usage-limit reset the run waits for right now, if any."""
    budget_stop: BudgetStop | None = None
    stop_request: StopRequested | None = None
    """Of the current (or last) session."""
    sessions: int = 0
    _closed_seconds: float = 0.0
    _session_start: float | None = None
    _last_time: float | None = None

    @classmethod
    def read(cls, journal: Journal) -> "RunHistory":
        return cls.fold(journal.records())

    @classmethod
    def fold(cls, records: Iterable[Record]) -> "RunHistory":
        history = cls()
        for record in records:
            history.apply(record)
        return history

    def _loop(self, t: int) -> LoopStats:
        return self.loops.setdefault(t, LoopStats(t))

    def apply(self, record: Record) -> None:
        """Fold one more record in (in journal order)."""
        ev = record.event
        if isinstance(ev, RunStarted):
            self._close_loop_spans(self._last_time)  # a session killed without a run_finished: to its last event
            self._close_session()
            for stats in self.loops.values():  # the unfinished loop goes on in this session
                if stats.started is not None and stats.finished is None:
                    stats.span_start = record.time
            self.run_started, self.run_finished, self.live_processes = ev, None, []
            self.stop_request, self.budget_stop, self.quota_wait = None, None, None
            self.sessions += 1
            self._session_start = record.time
        elif isinstance(ev, RunFinished):
            self.run_finished, self.in_flight, self.quota_wait = ev, None, None
            if ev.status == RunStatus.STALLED:
                self.no_progress_streak = 0  # a resume past `stalled` is the user's decision to go on
            self._last_time = record.time
            self._close_loop_spans(record.time)
            self._close_session()
        elif isinstance(ev, LoopStarted):
            stats = self._loop(ev.loop)
            stats.started = stats.started if stats.started is not None else record.time
            stats.close_span(record.time)
            stats.span_start = record.time
        elif isinstance(ev, AttemptStarted):
            self.in_flight = ev
        elif isinstance(ev, ProcessStarted):
            self.live_processes.append((ev.pid, ev.start_ticks))
            self.quota_wait = None
        elif isinstance(ev, EnvironmentStarted):
            self.live_environments[ev.session_id] = ev
        elif isinstance(ev, EnvironmentStopped):
            self.live_environments.pop(ev.session_id, None)
        elif isinstance(ev, AttemptFinished):
            self._attempt(ev)
        elif isinstance(ev, StepFinished):
            self.steps[(ev.loop, ev.step)] = ev
        elif isinstance(ev, LoopFinished):
            stats = self._loop(ev.loop)
            stats.status, stats.candidate_id, stats.issues = LoopStatus(ev.status), ev.candidate_id, ev.issues
            stats.verified, stats.criteria, stats.finished = ev.verified, ev.criteria, record.time
            stats.progress, stats.reason = ev.progress, ev.reason
            stats.close_span(record.time)
            # A loop from a journal that did not record progress is not counted against patience.
            self.no_progress_streak = 0 if ev.progress is None or stats.made_progress else self.no_progress_streak + 1
        elif isinstance(ev, ChecksReplayed):
            stats = self._loop(ev.loop)
            stats.checks = {**(stats.checks or {}), "replayed": ev.replayed, "failed": ev.failed, "flaky": ev.flaky,
                            "skipped": ev.skipped}
            stats.check_step_seconds["replay"] = ev.seconds
        elif isinstance(ev, ChecksAdmitted):
            stats = self._loop(ev.loop)
            stats.checks = {**(stats.checks or {}), "added": ev.added, "rejected": ev.rejected, "retired": ev.retired}
            stats.check_step_seconds["admit"] = ev.seconds
        elif isinstance(ev, RoleFailed):
            last = ev.errors[-1] if ev.errors else "no error message"
            self._loop(ev.loop).failure = f"{ev.role} failed after {ev.attempts} attempt(s): {last}"
        elif isinstance(ev, QuotaWait):
            self.quota_wait = ev
        elif isinstance(ev, BudgetStop):
            self.budget_stop = ev
        elif isinstance(ev, StopRequested):
            self.stop_request = ev
        elif isinstance(ev, ViolationBetweenRoles):
            stats = self._loop(ev.loop)
            stats.violations[BETWEEN_ROLES] = stats.violations.get(BETWEEN_ROLES, 0) + 1
        self._last_time = record.time

    def _attempt(self, ev: AttemptFinished) -> None:
        if ev.package is None:  # a package's Developer ends beside others still running: their processes stay
            self.live_processes = []
        self.in_flight, self.quota_wait = None, None
        stats = self._loop(ev.loop)
        usage = Usage.from_json(ev.usage)
        stats.attempts[ev.role] += 1
        stats.usage[ev.role] = stats.usage[ev.role] + usage
        stats.role_seconds[ev.role] = round(stats.role_seconds[ev.role] + ev.seconds, 3)
        stats.violations[ev.role] += ev.violations
        largest = self.largest_attempt[ev.role]
        for key, value in (("tokens", usage.total_tokens), ("cost_usd", usage.cost_usd or 0.0),
                           ("seconds", float(ev.seconds))):
            largest[key] = max(largest[key], value)
        if ev.harness is not None:
            self.role_setting[ev.role] = (ev.harness, ev.model)

    def _close_loop_spans(self, at: float | None) -> None:
        if at is not None:
            for stats in self.loops.values():
                stats.close_span(at)

    def _close_session(self) -> None:
        if self._session_start is not None and self._last_time is not None:
            self._closed_seconds += max(0.0, self._last_time - self._session_start)
        self._session_start = None

    def wall_seconds(self, now: float | None = None) -> float:
        """Wall time of all sessions: each from its start to its end (a crashed one: to its last event);
        the open one up to `now` (default: its last event)."""
        open_part = 0.0
        if self._session_start is not None:
            open_part = max(0.0, (now if now is not None else self._last_time or self._session_start)
                            - self._session_start)
        return round(self._closed_seconds + open_part, 3)

    def done(self, loop: int, step: str) -> StepFinished | None:
        return self.steps.get((loop, step))

    @property
    def last_finished_loop(self) -> int:
        return max((t for t, s in self.loops.items() if s.status.finished), default=0)

    @property
    def usage(self) -> Usage:
        return Usage.sum(s.total_usage for s in self.loops.values())

    def loop_list(self) -> list[LoopStats]:
        return [self.loops[t] for t in sorted(self.loops)]
