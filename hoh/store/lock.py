"""One hoh process per workspace: an exclusive, non-blocking flock held for the whole run.

The lock is taken on the workspace directory itself, which no role can delete or swap (deleting
`hoh.lock`, which only names the holder's pid, would otherwise let a second hoh in).

A flock belongs to the open file, and a process hoh forks shares it until it execs (the descriptor is
close-on-exec): a run killed while a thread was starting a role leaves that child holding the lock for the
moment it takes to exec. A resume right after the kill waits that moment out instead of calling the dead run
live."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from ..errors import WorkspaceBusy


class WorkspaceLock:
    def __init__(self, path: Path, orphan_wait: float = 10.0):
        self.path = path
        self.orphan_wait = orphan_wait
        self._fd: int | None = None

    def __enter__(self) -> "WorkspaceLock":
        fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        deadline = time.monotonic() + self.orphan_wait
        while not _try_lock(fd):
            if _alive(holder(self.path.parent)) or time.monotonic() > deadline:
                os.close(fd)
                raise WorkspaceBusy(busy_message(self.path.parent)) from None
            time.sleep(0.02)  # the named holder is dead: a child it forked is about to exec and let go
        self._fd = fd
        try:
            self.path.write_text(str(os.getpid()))
        except OSError:
            pass  # the pid is a courtesy; the lock is the directory's
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _alive(pid: str) -> bool:
    """Whether the process `hoh.lock` names runs (an unknown holder counts as running: nothing to wait out)."""
    if not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lock_held(root: Path) -> bool:
    """Whether a hoh process holds the workspace at `root` right now."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def holder(root: Path) -> str:
    """The pid `hoh.lock` names (a courtesy: the lock itself is the directory's), or "?"."""
    try:
        return (root / "hoh.lock").read_text(errors="replace").strip() or "?"
    except OSError:
        return "?"


def busy_message(root: Path) -> str:
    """What a second build or resume of a live run is told: the run is live, and what can be done meanwhile."""
    return (f"workspace {root} is in use by hoh pid {holder(root)}: its run is live; follow it with "
            f"hoh status -w {root}, or end it with hoh stop -w {root}")
