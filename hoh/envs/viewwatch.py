"""hoh's side of the views its environments keep, listed for what changed rather than whole.

A kept view's plan (`sync.plan`) compares every entry of the role's view here with what the environment holds.
Listing the view here costs a stat of every file, every attempt: at 10,000 files more than the attempt's own
work. So each directory of a view is listed whole once, with a kernel feed over every directory of it
(`store/changefeed.ProjectFeed`, the freeze's), and after that only the paths the feed reports are listed again.
Nothing of a role writes here but hoh's copy-back (roles run in their environments), and the feed reports every
write whoever makes it; where it cannot answer (no inotify, a full queue, a hard link, ...) the directory is
listed whole again, as before.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..store.changefeed import ProjectFeed
from ..store.hashcache import HashCache
from .sync import Entry, view


MOST_FOLLOWED = 8
"""Directories followed at once (each holds an inotify instance, of 128 per user by default); the least recently
listed one is let go (listed whole when it comes back), so roots made per loop (an evidence dir) never pile up."""


@dataclass
class _Followed:
    feed: ProjectFeed
    hidden: frozenset[str]
    entries: dict[str, Entry]


class ViewWatch:
    def __init__(self, cache: HashCache) -> None:
        self.cache = cache
        self._followed: dict[str, _Followed] = {}
        self._lock = threading.Lock()
        self.listed_whole = 0
        """How many times a directory was listed whole (the first time, and when its feed could not answer)."""

    def entries(self, roots: Iterable[Path], hidden: Iterable[Path]) -> dict[str, Entry]:
        """Every entry of the view, as `sync.view` lists it, into a dict of the caller's own."""
        hidden = [Path(p).resolve() for p in hidden]
        wanted: dict[str, Entry] = {}
        with self._lock:
            for root in roots:
                try:
                    directory = stat.S_ISDIR(os.lstat(root).st_mode)
                except OSError:
                    continue
                if directory:
                    wanted.update(self._directory(str(root), hidden))
                else:
                    wanted.update(view([root], hidden, self.cache))
        return wanted

    def _directory(self, root: str, hidden: list[Path]) -> dict[str, Entry]:
        inside = frozenset(str(p) for p in hidden if p.is_relative_to(root))
        known = self._followed.pop(root, None)
        if known is not None and known.hidden == inside:
            result = known.feed.take()
            feed = known.feed
            if result.unsure is None and not feed.go_on():
                # Its watches no longer cover every directory: a new feed, and the old one read once more for
                # what changed until the new one watched too.
                fresh = ProjectFeed.start(Path(root), with_git=True)
                result = feed.take()
                feed.close()
                feed = fresh if isinstance(fresh, ProjectFeed) else None
            if result.unsure is None:
                entries = known.entries
                for rel in result.paths:
                    path = f"{root}/{rel}"
                    gone = entries.pop(path, None)
                    if gone is not None and gone.kind == "d":
                        prefix = path + "/"
                        for below in [p for p in entries if p.startswith(prefix)]:
                            del entries[below]
                    if not any(path == h or path.startswith(h + "/") for h in inside):
                        entries.update(view([Path(path)], hidden, self.cache))
                entries[root] = Entry("d", stat.S_IMODE(os.lstat(root).st_mode))  # its own watch names no change of it
                if feed is not None:
                    self._follow(root, _Followed(feed, inside, entries))
                return dict(entries)
            if feed is not None:
                feed.close()
        elif known is not None:
            known.feed.close()
        self.listed_whole += 1
        fresh = ProjectFeed.start(Path(root), with_git=True)  # before the listing: nothing after it goes unseen
        entries = dict(view([Path(root)], hidden, self.cache))
        if isinstance(fresh, ProjectFeed):
            self._follow(root, _Followed(fresh, inside, entries))
        return dict(entries)

    def _follow(self, root: str, followed: _Followed) -> None:
        self._followed[root] = followed  # the newest last: dicts keep their order
        while len(self._followed) > MOST_FOLLOWED:
            oldest = next(iter(self._followed))
            self._followed.pop(oldest).feed.close()

    def close(self) -> None:
        with self._lock:
            for followed in self._followed.values():
                followed.feed.close()
            self._followed.clear()
