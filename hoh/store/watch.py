"""Which directories changed since the last look, from the kernel (Linux inotify).

The sealed loops grow by a few dozen files a loop; stat-checking all of them before and after
every attempt would make a loop's cost grow with the history. A watch on each sealed directory
turns the check into "read what the kernel queued": nothing at all when no role touched them.
The kernel queues an event inside the syscall that changed the file, so once a role has exited,
everything it did is in the queue.

Where inotify is not available (not Linux, the per-user limit of instances or watches reached,
or the queue overflowed) `changed` answers None and the caller checks everything by stat, as
it would without a watch.
"""

from __future__ import annotations

import os
from typing import Any

_MASK_NAMES = ("MODIFY", "ATTRIB", "CLOSE_WRITE", "MOVED_FROM", "MOVED_TO", "CREATE", "DELETE", "DELETE_SELF",
               "MOVE_SELF", "DONT_FOLLOW")


class DirWatch:
    """inotify watches on a set of directories (not recursive: every directory is added itself)."""

    def __init__(self, inotify: Any, flags: Any):
        self._inotify, self._flags = inotify, flags
        self._mask = 0
        for name in _MASK_NAMES:
            self._mask |= getattr(flags, name)
        self._dirs: dict[int, str] = {}
        self.usable = True

    @classmethod
    def open(cls) -> "DirWatch | None":
        try:
            from inotify_simple import INotify, flags
            return cls(INotify(nonblocking=True), flags)  # not inheritable: no role gets the descriptor
        except (ImportError, OSError, AttributeError):
            return None

    def add(self, directory: str) -> None:
        if not self.usable:
            return
        try:
            self._dirs[self._inotify.add_watch(directory, self._mask)] = directory
        except OSError:
            self.usable = False  # e.g. fs.inotify.max_user_watches reached: fall back to stat checks

    def changed(self) -> set[str] | None:
        """The watched directories with an event since the last call (a deleted or moved one included);
        None when the watch cannot say (unusable, or the kernel's queue overflowed)."""
        if not self.usable:
            return None
        try:
            events = self._inotify.read(timeout=0)
        except OSError:
            self.usable = False
            return None
        found = set()
        for event in events:
            if event.mask & self._flags.Q_OVERFLOW:
                self.usable = False
                return None
            directory = self._dirs.get(event.wd)
            if directory is not None:
                found.add(directory)
                if event.mask & self._flags.ISDIR and event.name:
                    found.add(os.path.join(directory, event.name))
        return found

    def close(self) -> None:
        self.usable = False
        self._inotify.close()
