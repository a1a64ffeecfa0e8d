"""The append-only, fsynced event log that is the truth for resume.

Each line is one JSON event with a sequence number and wall time. A line cut short by a crash
is ignored on read (it never completed); everything before it stands.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..errors import StateError

JOURNAL_SCHEMA_VERSION = 1


class Journal:
    def __init__(self, path: Path):
        self.path = path
        self._seq = sum(1 for _ in self.events())
        self._written = bytearray()  # what this process appended, so the guard can tell it from others' writes

    def events(self) -> Iterator[dict[str, Any]]:
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8") as fh:
            lines = fh.readlines()
        for number, line in enumerate(lines, 1):
            try:
                event = json.loads(line)
            except ValueError:
                if number == len(lines):  # torn final write from a crash
                    return
                raise StateError(f"{self.path}: line {number} is corrupt; restore it from a backup") from None
            if event.get("v", 1) > JOURNAL_SCHEMA_VERSION:
                raise StateError(f"{self.path}: written by a newer hoh (v{event['v']}); upgrade hoh")
            yield event

    def append(self, event: str, **fields: Any) -> dict[str, Any]:
        self._seq += 1
        record = {"v": JOURNAL_SCHEMA_VERSION, "seq": self._seq, "time": round(time.time(), 3), "event": event, **fields}
        data = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        self._repair_torn_tail()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._written += data
        return record

    def mark(self) -> int:
        return len(self._written)

    def written_since(self, mark: int) -> bytes:
        return bytes(self._written[mark:])

    def _repair_torn_tail(self) -> None:
        """Drop a partial last line so the next event starts on its own line."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) == b"\n":
                return
            fh.seek(0)
            data = fh.read()
            fh.truncate(data.rfind(b"\n") + 1)
            fh.flush()
            os.fsync(fh.fileno())


@dataclass
class Progress:
    """What the journal says has completed, step by step."""

    steps: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    """(loop, step) → the event that finished it; steps: planner, developer, freeze, qa, evidence."""
    loops_finished: list[int] = field(default_factory=list)
    run_started: dict[str, Any] | None = None
    run_finished: dict[str, Any] | None = None
    live_processes: list[tuple[int, int | None]] = field(default_factory=list)
    """Harness processes started since the last run began and never seen to finish: after a
    crash of hoh itself they may still be running."""

    @classmethod
    def read(cls, journal: Journal) -> "Progress":
        try:
            return cls._read(journal)
        except (KeyError, TypeError) as err:
            raise StateError(f"{journal.path}: an event lacks {err}; restore the journal from a backup") from None

    @classmethod
    def _read(cls, journal: Journal) -> "Progress":
        progress = cls()
        for ev in journal.events():
            kind = ev["event"]
            if kind == "run_started":
                progress.run_started = ev
                progress.run_finished = None
                progress.live_processes = []
            elif kind == "process_started":
                progress.live_processes.append((ev["pid"], ev.get("start_ticks")))
            elif kind == "attempt_finished":
                progress.live_processes = []
            elif kind == "step_finished":
                progress.steps[(ev["loop"], ev["step"])] = ev
            elif kind == "loop_finished":
                progress.loops_finished.append(ev["loop"])
            elif kind == "run_finished":
                progress.run_finished = ev
        return progress

    def done(self, loop: int, step: str) -> dict[str, Any] | None:
        return self.steps.get((loop, step))

    @property
    def last_finished_loop(self) -> int:
        return max(self.loops_finished, default=0)
