"""A graceful stop: the run ends after its current role attempt, with everything recorded.

Two ways to ask: `hoh stop -w DIR` writes a request file into the workspace (any process, any
terminal), and a first Ctrl-C/SIGTERM to the running hoh sets a flag in that process. The Runtime
looks for either before every role attempt and while it waits for a usage limit to reset.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ..fsutil import atomic_write_json

_in_process: str | None = None


def request_in_process(source: str) -> None:
    """Called from a signal handler: ask this process's run to stop after the current attempt."""
    global _in_process
    _in_process = _in_process or source


def in_process_request() -> str | None:
    return _in_process


def clear_in_process() -> None:
    global _in_process
    _in_process = None


class StopFile:
    """`WORKSPACE/hoh.stop`: a stop request from `hoh stop`, read by the hoh that holds the workspace."""

    def __init__(self, path: Path):
        self.path = path

    def write(self, requested_by: str) -> None:
        atomic_write_json(self.path, {"schema_version": 1, "requested_by": requested_by, "pid": os.getpid(),
                                      "time": round(time.time(), 3)})

    def read(self, newer_than: float = 0.0) -> str | None:
        """Who asked, if a request newer than `newer_than` (epoch seconds) is there."""
        try:
            if self.path.stat().st_mtime < newer_than:
                return None
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return f"{data.get('requested_by', 'hoh stop')} (pid {data.get('pid', '?')})" if isinstance(data, dict) \
            else None

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def requested(stop_file: StopFile, since: float) -> str | None:
    """Who asked this run to stop, if anyone did since `since`."""
    return in_process_request() or stop_file.read(newer_than=since)
