"""Follow a running attempt's events.jsonl for live progress: tokens, cost and the last tool call so far.

The stream is the agent's output (hoh's tee of the CLI's stdout), so it is read as hostile: only the bytes
appended since the last poll are read, at most `READ_LIMIT` per poll; a line longer than `LINE_LIMIT` is
dropped; the adapter's own `parse_events` reads the lines, and anything it raises leaves the last figures
standing. Progress is a view: nothing here can fail a run.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from ..harness.attempt import ParsedRun
from ..usage import Usage

READ_LIMIT = 1 << 20
"""Bytes read per poll: a flood is caught up with over several polls, never in one."""
LINE_LIMIT = 1 << 20
"""A longer line is no event a CLI writes; it is skipped to its newline, never buffered."""
WINDOW_LIMIT = 2 << 20
"""Up to this much of a stream is kept and parsed whole on each poll, so usage a CLI reports as running
totals (Claude Code's result, one message's usage repeated per content block) counts once; past it the
new lines are parsed alone and added (a figure that can then run a little high until the attempt ends)."""


@dataclass(frozen=True)
class LiveFigures:
    """What a running attempt has reported so far."""

    usage: Usage = Usage()
    tool_calls: int = 0
    last_tool: str | None = None


class EventsTail:
    """Polled from the progress thread; `poll()` never raises."""

    def __init__(self, path: Path, parse: Callable[[Iterable[str]], ParsedRun]):
        self.path, self.parse = path, parse
        self.identity: tuple[int, int] | None = None
        self.offset = 0
        self.partial = b""
        self.skipping = False  # inside an overlong line, until its newline
        self.window: list[str] | None = []
        self.window_bytes = 0
        self.windowed = LiveFigures()
        self.base = LiveFigures()  # earlier files of this attempt (a transient rerun renames the first away)
        self.added = LiveFigures()  # lines past the window, parsed alone
        self.figures = LiveFigures()

    def poll(self) -> LiveFigures:
        try:
            lines = self._read()
            if lines:
                self._fold(lines)
        except Exception:  # noqa: BLE001 - a hostile stream may break a parser; progress keeps its last figures
            pass
        return self.figures

    def _read(self) -> list[str]:
        # O_NOFOLLOW and O_NONBLOCK: a link or a FIFO put in place of the file is not followed or waited on.
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return []
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return []
            identity = (st.st_dev, st.st_ino)
            if identity != self.identity or st.st_size < self.offset:
                if self.identity is not None:  # a new file for the same attempt: what the old one said stays
                    self.base, self.added, self.windowed = self.figures, LiveFigures(), LiveFigures()
                    self.window, self.window_bytes = [], 0
                self.identity, self.offset, self.partial, self.skipping = identity, 0, b"", False
            if st.st_size <= self.offset:
                return []
            fh.seek(self.offset)
            data = fh.read(READ_LIMIT)
        self.offset += len(data)
        return self._lines(data)

    def _lines(self, data: bytes) -> list[str]:
        if self.skipping:
            cut = data.find(b"\n")
            if cut < 0:
                return []
            data, self.skipping = data[cut + 1:], False
        *complete, rest = (self.partial + data).split(b"\n")
        if len(rest) >= LINE_LIMIT:
            rest, self.skipping = b"", True
        self.partial = rest
        return [line.decode("utf-8", "replace") for line in complete if len(line) <= LINE_LIMIT]

    def _fold(self, lines: list[str]) -> None:
        try:
            self._fold_parsed(lines)
        except Exception:  # noqa: BLE001 - a line the parser cannot take would poison the window: leave it out
            self._fold_parsed([line for line in lines if self._survives(line)])

    def _survives(self, line: str) -> bool:
        try:
            self.parse([line])
        except Exception:  # noqa: BLE001
            return False
        return True

    def _fold_parsed(self, lines: list[str]) -> None:
        size = sum(map(len, lines))
        if self.window is not None and self.window_bytes + size <= WINDOW_LIMIT:
            windowed = _figures(self.parse(self.window + lines))
            self.window += lines
            self.window_bytes += size
            self.windowed = windowed
        else:
            added = _figures(self.parse(lines))
            self.window = None  # closed for good: what it said stays in `windowed`
            self.added = _plus(self.added, added)
        self.figures = _plus(_plus(self.base, self.windowed), self.added)

def _figures(parsed: ParsedRun) -> LiveFigures:
    return LiveFigures(parsed.usage, parsed.tool_calls, parsed.last_tool)


def _plus(a: LiveFigures, b: LiveFigures) -> LiveFigures:
    return LiveFigures(a.usage + b.usage, a.tool_calls + b.tool_calls, b.last_tool or a.last_tool)
