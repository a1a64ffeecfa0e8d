"""One hoh process per workspace: an exclusive, non-blocking flock held for the whole run.

The lock is taken on the workspace directory itself, which no role can delete or swap (deleting
`hoh.lock`, which only names the holder's pid, would otherwise let a second hoh in)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..errors import WorkspaceBusy


class WorkspaceLock:
    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def __enter__(self) -> "WorkspaceLock":
        fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise WorkspaceBusy(busy_message(self.path.parent)) from None
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
