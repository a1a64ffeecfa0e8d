"""What changed in a work tree, asked of the jail or the kernel instead of a scan of the whole tree.

A role's guard and the freeze must know every change to the project (and QA's view). Scanning the tree
for it costs the project's size, every time. Two things answer for less:
- the jail: a role whose jail mounts a tree read-only (or not at all) cannot have changed it; no scan;
- the kernel: where a role may write (the Developer), an inotify watch on every directory of the
  project reports each path touched (`ProjectFeed`), and the freeze looks at those paths only.
Whatever cannot be answered so is scanned whole, and `ScanReason` says why in the journal.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any


class ScanReason(str, Enum):
    """Why a whole work tree was scanned (journal: full_scan)."""

    no_jail = "no_jail"
    """The role ran without the OS jail, or its jail could write the tree."""
    feed_unavailable = "feed_unavailable"
    """No kernel change feed could be set up (no inotify, the watch limit reached, a tree not walkable)."""
    feed_overflow = "feed_overflow"
    """The kernel's event queue overflowed (IN_Q_OVERFLOW): some changes were not reported."""
    feed_unsure = "feed_unsure"
    """The feed saw something the changed paths alone cannot account for: a hard link, a changed ignore
    file, a change above a workspace inside the project, a file made and removed again."""
    not_fed = "not_fed"
    """The Developer ran before this session (a resume): no feed watched it."""


_MASK_NAMES = ("MODIFY", "ATTRIB", "CLOSE_WRITE", "MOVED_FROM", "MOVED_TO", "CREATE", "DELETE", "DELETE_SELF",
               "MOVE_SELF", "DONT_FOLLOW", "ONLYDIR")
IGNORE_FILES = (".gitignore",)
"""A changed ignore file can make a file nobody touched part of the tree: only a full scan finds it."""


@dataclass
class FeedResult:
    """What the kernel reported since the feed started: the changed paths, or why they are not enough."""

    paths: list[str] = field(default_factory=list)
    """Relative to the work tree, sorted; a created or moved-in directory as itself (everything below it)."""
    unsure: ScanReason | None = None


class ProjectFeed:
    """inotify watches on every directory of a work tree (but its top `.git` and a workspace inside it, whose
    patterns are `outside`),
    set up while no role runs. Why every changed path is reported:
    - a change to a file is an event on its directory's watch, named, whichever process makes it, as
      long as it goes through that directory: the Developer's jail binds `.git` apart from the tree
      (`jobs.py`), so no hard link joins the two (link(2) fails across mounts), and a hard link inside
      the tree is a name in a watched directory too; a name that still has several links when the feed
      is read, or that was written and then unlinked, is reported as unsure;
    - a directory created or moved in after the watches were set up is not watched, but its own creation
      or arrival is an event on its parent, and the freeze takes the whole of it; by induction over the
      highest ancestor whose path changed, every new path lies under a reported one;
    - a directory moved away keeps its watch under its old name: both names are reported;
    - a full queue (IN_Q_OVERFLOW), a watch that could not be added or a read that failed make the feed
      say so, and the caller scans the whole tree."""

    def __init__(self, root: Path, inotify: Any, flags: Any, outside: tuple[str, ...], with_git: bool = False):
        self.root, self._inotify, self._flags, self.outside = root, inotify, flags, outside
        self._own_git = "" if with_git else ".git"
        """The top `.git` left unwatched: the project's repository, hoh's (none for `with_git`)."""
        self._mask = 0
        for name in _MASK_NAMES:
            self._mask |= getattr(flags, name)
        self._dirs: dict[int, str] = {}
        self._written: set[str] = set()
        """Names written or chmod-ed (a hard link's other names change with them) since they were made."""
        self._new_dirs: set[str] = set()
        """Directories made or moved in after the watches were set up: nothing inside them is watched."""
        self._paths: set[str] = set()
        self._moved_dirs = False
        """A directory was moved away or removed: watches may now report under names that are gone."""
        self.failed: ScanReason | None = None

    @classmethod
    def start(cls, root: Path, outside: tuple[str, ...] = (), with_git: bool = False) -> "ProjectFeed | ScanReason":
        """`with_git`: the top `.git` is watched like any other directory (a tree that is not hoh's project)."""
        try:
            from inotify_simple import INotify, flags
            inotify = INotify(nonblocking=True)  # not inheritable: no role gets the descriptor
        except (ImportError, OSError, AttributeError):
            return ScanReason.feed_unavailable
        feed = cls(root, inotify, flags, outside, with_git)
        if not feed._watch_all():
            feed.close()
            return ScanReason.feed_unavailable
        return feed

    def _watch_all(self) -> bool:
        """One watch per directory, walked without following links; False when one cannot be added."""
        stack = [(str(self.root), "")]
        while stack:
            directory, rel = stack.pop()
            try:
                self._dirs[self._inotify.add_watch(directory, self._mask)] = rel
                entries = list(os.scandir(directory))
            except OSError:
                return False  # e.g. fs.inotify.max_user_watches reached, or a directory hoh cannot read
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) and not (not rel and entry.name == self._own_git) \
                        and not self._outside(rel + entry.name):
                    stack.append((entry.path, f"{rel}{entry.name}/"))
        return True

    def _read(self) -> None:
        try:
            events = self._inotify.read(timeout=0)
        except OSError:
            self.failed = ScanReason.feed_overflow
            return
        f = self._flags
        for event in events:
            if event.mask & f.Q_OVERFLOW:
                self.failed = ScanReason.feed_overflow
                return
            base = self._dirs.get(event.wd)
            if base is None or not event.name:
                continue  # the watched directory itself (DELETE_SELF, IGNORED): its parent reports it by name
            path = base + event.name
            if self._outside(path) or path == self._own_git:
                continue  # the workspace itself, or the project's repository: hoh's, hidden from every role
            self._paths.add(path)
            if event.mask & f.ISDIR:
                if event.mask & (f.CREATE | f.MOVED_TO):
                    self._new_dirs.add(path)
                elif event.mask & f.MOVED_FROM:
                    self._new_dirs.discard(path)  # it lives on where it moved to, reported there
                    self._moved_dirs = True
                elif event.mask & f.DELETE:
                    self._moved_dirs = True  # (a new one that is gone again may have held a hard link: unsure)
            elif event.mask & (f.MODIFY | f.CLOSE_WRITE | f.ATTRIB):
                self._written.add(path)
            elif event.mask & (f.CREATE | f.MOVED_FROM):
                # A new name, or one whose inode lives on under the name it moved to (reported there).
                self._written.discard(path)

    def take(self) -> FeedResult:
        """Everything reported since `start`, read once the roles that could write have exited (the kernel
        queues an event inside the syscall that makes the change)."""
        self._read()
        if self.failed is not None:
            return FeedResult(unsure=self.failed)
        paths = sorted(self._paths)
        for rel in paths:
            if rel.rpartition("/")[2] in IGNORE_FILES or self._above_outside(rel):
                return FeedResult(paths, ScanReason.feed_unsure)
            try:
                st = os.lstat(self.root / rel)
            except FileNotFoundError:
                if rel in self._written:
                    return FeedResult(paths, ScanReason.feed_unsure)  # written, then unlinked: a hard link's other name?
                continue
            except OSError:
                return FeedResult(paths, ScanReason.feed_unsure)
            if not stat.S_ISDIR(st.st_mode) and st.st_nlink > 1:
                return FeedResult(paths, ScanReason.feed_unsure)  # a hard link: its other names changed too
        for rel in sorted(self._new_dirs):
            if not self._unwatched_dir_plain(self.root / rel):
                return FeedResult(paths, ScanReason.feed_unsure)
        return FeedResult(paths)

    def go_on(self) -> bool:
        """After a `take` whose paths were all looked at: start over from here, keeping the watches, when they
        still cover every directory under its own name (no directory was made, moved or removed); False:
        the feed must be started anew. Events queued since the take stay for the next one."""
        if self.failed is not None or self._new_dirs or self._moved_dirs:
            return False
        self._paths, self._written = set(), set()
        return True

    @staticmethod
    def _unwatched_dir_plain(path: Path) -> bool:
        """Whether a directory no watch saw inside holds no hard link (a write through one there changes a
        file elsewhere in the tree unreported). One that is gone again may have held one: not plain. The walk
        costs what the directory holds, which the freeze takes whole anyway."""
        if not os.path.lexists(path):
            return False
        stack = [str(path)]
        while stack:
            try:
                entries = list(os.scandir(stack.pop()))
            except NotADirectoryError:
                continue  # replaced by a file: reported by its own name
            except OSError:
                return False
            for entry in entries:
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    stack.append(entry.path)
                elif not stat.S_ISLNK(st.st_mode) and st.st_nlink > 1:
                    return False
        return True

    def _outside(self, rel: str) -> bool:
        return any(fnmatch.fnmatchcase(rel, p) or rel.startswith(p + "/") for p in self.outside)

    def _above_outside(self, rel: str) -> bool:
        return any(p.startswith(rel + "/") for p in self.outside)

    def close(self) -> None:
        try:
            self._inotify.close()
        except OSError:
            pass


class FreezeFeed:
    """The project's feed from the Developer's start to the freeze: what `History.commit_all` looks at."""

    def __init__(self, history: Any):
        self.history = history
        self._feed: ProjectFeed | ScanReason | None = None
        self._kept: ProjectFeed | None = None
        """The last freeze's feed, still watching every directory: the next `arm` goes on with it."""

    def arm(self, jailed: bool) -> None:
        """Start watching, with the work tree equal to the index (right after `reset_to`), or go on with a feed
        that has watched since the work tree last equalled the index (the last freeze): what changed since,
        hoh's own reset included, is all reported, which is more than enough. `jailed`: the Developer runs in
        this machine's jail, so nothing of it outlives its attempt and no mount of it reaches the tree, or in an
        environment, whose changes reach the tree only through hoh's copy-back (`envs/sync.apply`: names made,
        written, renamed and removed in the tree's own directories); otherwise the freeze scans the whole tree."""
        try:
            lines = self.history.outside_file.read_text().split()
        except OSError:
            lines = []
        outside = tuple(line.strip("/") for line in lines if line.startswith("/"))
        going = self._feed if isinstance(self._feed, ProjectFeed) else self._kept
        self._feed, self._kept = None, None
        if jailed and going is not None and going.outside == outside:
            self._feed = going  # a Developer that did not finish leaves its feed armed: its events stay
            return
        if going is not None:
            going.close()
        self._feed = ProjectFeed.start(self.history.work_tree, outside) if jailed else ScanReason.no_jail

    def take(self, base: str) -> tuple[list[str] | None, ScanReason | None]:
        """(the paths to look at, None), or (None, why the whole tree must be scanned)."""
        feed, self._feed = self._feed, None
        try:
            if self.history.clean_at == base:
                return [], None  # nothing wrote the project since hoh made it `base` (a spec-complete loop)
            if not isinstance(feed, ProjectFeed):
                return None, feed or ScanReason.not_fed
            result = feed.take()
            return (None, result.unsure) if result.unsure else (result.paths, None)
        finally:
            if isinstance(feed, ProjectFeed):
                if feed.go_on():
                    self._kept = feed  # the freeze makes the index equal the work tree again
                else:
                    feed.close()

    def close(self) -> None:
        for feed in (self._feed, self._kept):
            if isinstance(feed, ProjectFeed):
                feed.close()
        self._feed, self._kept = None, None
