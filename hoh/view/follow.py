"""The journal followed: read whole once, then only the lines appended since, for what the view keeps of it.

The journal is append-only, so a reader that remembers how far it got (a byte offset, and the file's
inode) reads each line once however often the run moves: the journal's fold (`RunHistory` and `NoteBook`,
what `hoh status` shows), the report's journal facts (`JournalFacts`: each attempt's outcome, role failures,
sessions) and the attempt running now. Only complete lines are taken (a line being written is read the next
time); a journal that shrank, was replaced (hoh repairing a torn tail, the guard restoring it) or was
rewritten in place is read again from its start. Lines are checked as `Journal.records` checks them: a
corrupt one raises StateError naming the line.
"""

from __future__ import annotations

import json
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..errors import StateError
from ..report.data import JournalFacts
from ..store.events import AttemptFinished, AttemptStarted, Event, EventError, RunFinished
from ..store.fold import Fold
from ..store.journal import JOURNAL_SCHEMA_VERSION, Record, RunHistory
from ..store.notes import NoteBook


@dataclass(frozen=True)
class Running:
    """The role attempt running now, with the epoch second it started (the page runs its clock)."""

    role: str
    loop: int
    attempt: int
    since: float


PROBE_BYTES = 4096
"""The journal's bytes just before the offset that are compared again when it moves (as `store.fold` does)."""


class Follower:
    """One workspace's journal, followed; `update()` reads what was appended, then `facts`, `running` and the fold
    (`folded()`) are current."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._reset(None)

    def _reset(self, inode: int | None) -> None:
        self.inode, self.offset, self.lines = inode, 0, 0
        self.probe, self.mtime = b"", None
        """The last PROBE_BYTES read, and the file's mtime when they were last compared with it."""
        self.facts = JournalFacts()
        self.running: Running | None = None
        self._fold = Fold(RunHistory(), NoteBook())

    def update(self) -> "Follower":
        with self._lock:
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                self._reset(None)
                return self
            if st.st_ino != self.inode or st.st_size < self.offset or not self._unchanged_before(st):
                self._reset(st.st_ino)
            if st.st_size > self.offset:
                with open(self.path, "rb") as fh:
                    fh.seek(self.offset)
                    data = fh.read(st.st_size - self.offset)
                lines, taken = data.split(b"\n")[:-1], 0  # complete lines only
                try:
                    for n, line in enumerate(lines):
                        if not self._add(line, last=n == len(lines) - 1 and data.endswith(b"\n")):
                            break  # a torn last line (as `Journal.records` reads it): looked at again next time
                        taken += len(line) + 1
                finally:  # what was taken before a corrupt line stays taken
                    self.offset += taken
                    self.probe = (self.probe + data[max(0, taken - PROBE_BYTES):taken])[-PROBE_BYTES:]
                    self._fold.offset, self._fold.lines = self.offset, self.lines
            return self

    def _unchanged_before(self, st: os.stat_result) -> bool:
        """Whether the bytes read so far still end as they did: a journal rewritten in place (same file, not
        shorter) is read again from its start. Looked at only when the file's mtime moved."""
        if self.mtime == st.st_mtime_ns or not self.probe:
            return True
        self.mtime = st.st_mtime_ns
        with open(self.path, "rb") as fh:
            fh.seek(self.offset - len(self.probe))
            return fh.read(len(self.probe)) == self.probe

    @contextmanager
    def folded(self) -> Iterator[Fold]:
        """The journal's fold as of the last `update()`, held still while the caller reads it: another thread's
        update waits (the fold's loops are changed in place)."""
        with self._lock:
            yield self._fold

    def _add(self, line: bytes, last: bool) -> bool:
        where = f"{self.path}: line {self.lines + 1}"
        try:
            raw = json.loads(line)
        except ValueError:
            if last:
                return False
            raise StateError(f"{where} is corrupt; restore it from a backup") from None
        self.lines += 1
        if not isinstance(raw, dict):
            raise StateError(f"{where} is not an event; restore it from a backup")
        if isinstance(raw.get("v"), int) and raw["v"] > JOURNAL_SCHEMA_VERSION:
            raise StateError(f"{self.path}: written by a newer hoh (v{raw['v']}); upgrade hoh")
        try:
            record = Record(int(raw["seq"]), float(raw["time"]), Event.from_json(raw))
        except (EventError, KeyError, TypeError, ValueError) as err:
            raise StateError(f"{where}: {err}; restore the journal from a backup") from None
        self.facts.add(record)
        self._fold.history.apply(record)
        self._fold.notes.apply(record)
        ev = record.event
        if isinstance(ev, AttemptStarted):
            self.running = Running(ev.role, ev.loop, ev.attempt, record.time)
        elif isinstance(ev, (AttemptFinished, RunFinished)):
            self.running = None
        return True
