"""A human's notes to the next loop's Planner (`hoh note`): the one way to steer a run that is otherwise autonomous.

Only hoh writes `state/` and the journal, and only the process that holds the workspace lock. So `hoh note`
stores a note itself when no run is live (taking the lock), and otherwise leaves it in `WORKSPACE/hoh.notes/`,
the way `hoh stop` leaves `hoh.stop`: the live run stores it under `state/notes/` when its next loop starts
planning. A loop's notes are fixed in the journal (`NotesTaken`) before its Planner's inputs are frozen, so a
note that arrives later waits for the loop after, and a resume after a crash gives the Planner the same notes.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..errors import UsageError, WorkspaceBusy
from ..fsutil import atomic_write_json, atomic_write_text, sha256_bytes
from ..paths import WorkspacePaths
from .events import NoteAdded, NotesTaken
from .journal import Journal, Record
from .lock import WorkspaceLock

INBOX_SCHEMA_VERSION = 1
MAX_NOTE_CHARS = 20_000
"""A note is a few lines for a Planner, not a second spec."""


@dataclass(frozen=True)
class Note:
    """One stored note: its id, its file and its text."""

    id: str
    path: Path
    text: str


@dataclass
class NoteBook:
    """The journal's notes: which were stored, from which inbox file, and which loop took each."""

    stored: list[str] = field(default_factory=list)
    inbox_names: set[str] = field(default_factory=set)
    taken_by: dict[str, int] = field(default_factory=dict)
    """note id → the loop whose Planner got it."""
    loop_notes: dict[int, list[str]] = field(default_factory=dict)

    @classmethod
    def fold(cls, records: Iterable[Record]) -> "NoteBook":
        book = cls()
        for record in records:
            book.apply(record)
        return book

    def apply(self, record: Record) -> None:
        """Fold one more record in (in journal order)."""
        self.apply_event(record.event)

    def apply_event(self, ev: object) -> None:
        """An event as it is journaled: the lock holder keeps its book up to date with what it appends."""
        if isinstance(ev, NoteAdded):
            self.stored.append(ev.note)
            if ev.inbox:
                self.inbox_names.add(ev.inbox)
        elif isinstance(ev, NotesTaken):
            self.loop_notes[ev.loop] = list(ev.notes)
            self.taken_by.update({note: ev.loop for note in ev.notes})

    @property
    def pending(self) -> list[str]:
        return [n for n in self.stored if n not in self.taken_by]


def check_text(text: str) -> str:
    text = text.strip()
    if not text:
        raise UsageError("the note is empty; write what the next loop's Planner should know, e.g. "
                         "hoh note -w DIR \"fix I-0002 before anything else\"")
    if len(text) > MAX_NOTE_CHARS:
        raise UsageError(f"the note has {len(text):,} characters; keep it under {MAX_NOTE_CHARS:,} "
                         "(a note steers a loop; the spec says what to build)")
    return text


class Notes:
    """Stores notes and hands a loop its notes; every write here runs in the process that holds the lock."""

    def __init__(self, paths: WorkspacePaths, journal: Journal):
        self.paths, self.journal = paths, journal
        self._book: NoteBook | None = None

    def book(self) -> NoteBook:
        """The journal's notes, folded once: only this object (the lock holder's) journals notes, and it keeps
        the book up to date, so a loop does not read the whole journal again (that grew with the history)."""
        if self._book is None:
            self._book = NoteBook.fold(self.journal.records())
        return self._book

    def _store(self, book: NoteBook, text: str, inbox: str | None) -> str:
        note_id = f"N-{len(book.stored) + 1:04d}"
        data = (text + "\n").encode("utf-8")
        # Written before it is journaled: a crash in between leaves a file the next store overwrites.
        atomic_write_text(self.paths.note(note_id), data.decode("utf-8"))
        added = NoteAdded(note=note_id, sha256=sha256_bytes(data), inbox=inbox)
        self.journal.append(added)
        book.apply_event(added)
        return note_id

    def ingest(self, book: NoteBook) -> None:
        """Store what `hoh note` left in the inbox while a run was live, oldest first."""
        if not self.paths.notes_inbox.is_dir():
            return
        for path in sorted(self.paths.notes_inbox.glob("*.json")):
            if path.name not in book.inbox_names:
                try:
                    data = json.loads(path.read_text(encoding="utf-8"))
                    text = check_text(str(data["text"]))
                except (OSError, ValueError, KeyError, TypeError, UsageError):
                    continue  # not a note hoh wrote: left for the user to look at, never given to a role
                self._store(book, text, path.name)
            path.unlink(missing_ok=True)

    def add(self, text: str) -> str:
        """Under the lock: the inbox first (its notes are older), then this one; returns its id."""
        book = self.book()
        self.ingest(book)
        return self._store(book, text, None)

    def for_loop(self, t: int) -> list[Note]:
        """Loop t's notes: those fixed for it earlier (a resume), else every note no loop has taken yet."""
        book = self.book()
        taken = book.loop_notes.get(t)
        if taken is None:
            self.ingest(book)
            if not book.pending:
                return []
            taken = book.pending
            took = NotesTaken(loop=t, notes=taken)
            self.journal.append(took)
            book.apply_event(took)
        return [Note(n, self.paths.note(n), self.paths.note(n).read_text(encoding="utf-8").strip()) for n in taken]


def queue(paths: WorkspacePaths, text: str) -> Path:
    """Leave a note for the live run in the inbox (atomically: the run never reads half a note)."""
    name = f"{time.time_ns()}-{os.getpid()}.json"
    path = paths.notes_inbox / name
    paths.notes_inbox.mkdir(exist_ok=True)
    atomic_write_json(path, {"schema_version": INBOX_SCHEMA_VERSION, "text": text, "time": round(time.time(), 3)})
    return path


def add_note(paths: WorkspacePaths, text: str) -> str | None:
    """`hoh note`: the note's id when stored now, or None when it waits in the inbox for the live run."""
    text = check_text(text)
    try:
        with WorkspaceLock(paths.lock):
            return Notes(paths, Journal(paths.journal)).add(text)
    except WorkspaceBusy:
        queue(paths, text)
        return None


def queued(paths: WorkspacePaths, book: NoteBook) -> list[str]:
    """The texts waiting in the inbox (for `hoh status`); one already stored (a crash before its file's removal)
    is not counted twice."""
    out = []
    for path in sorted(paths.notes_inbox.glob("*.json")) if paths.notes_inbox.is_dir() else ():
        if path.name in book.inbox_names:
            continue
        try:
            out.append(str(json.loads(path.read_text(encoding="utf-8"))["text"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out
