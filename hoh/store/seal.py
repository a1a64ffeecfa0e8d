"""Finished loops' state, sealed once: later checks cost a stat per file, not a read.

When a loop ends its directory `state/loops/NNNN/` is written into history.git as a tree of its own (by hoh,
`objects.py`, or through an index of that loop alone: a seal costs the loop, not the history), joined to the
earlier loops' trees,
and the tree of everything sealed so far is recorded under `refs/hoh/sealed`. From then on:
- the guard's check (`changes`) asks the kernel which sealed directories had any event since the
  last check (an inotify watch on each, `watch.py`), and stat-checks only those: each file's stat
  and each directory's mtime as they were sealed (a new file changes its directory's mtime); only
  a file whose stat moved is read, and compared with its sealed blob. No event, no work: the check
  does not grow with the history. Without inotify, every sealed file is stat-checked;
- a change is undone from the sealed blobs (`restore`, through `state-index`: the sealed tree read into an
  index, work tree `state/`, made again when the sealed tree moved), which no role can reach;
- on resume and in `hoh status --verify`, every sealed file is re-hashed against the sealed tree
  (`verify`), whatever any stat says.
A sealed loop holds files only (git records no directory): its empty directories are removed when it
is sealed, so every directory found there later, empty or not, is reported as created.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from ..fsutil import prune_empty_dirs
from .git import History
from .gitrun import GitError
from .objects import LooseObjects
from .watch import DirWatch

SEALED_REF = "refs/hoh/sealed"
StatKey = tuple[int, int, int, int, int]


def loop_dir(t: int) -> str:
    return f"loops/{t:04d}"


def _key(st: os.stat_result) -> StatKey:
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode


def _blob_id(path: str) -> str:
    """git's id of a file's content (what the sealed index holds for it)."""
    with open(path, "rb") as fh:
        data = fh.read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class SealedState:
    def __init__(self, history: History, state_dir: Path):
        self.history, self.state_dir = history, state_dir
        self.index = history.git_dir / "state-index"
        self._index_tree: str | None = None
        """The sealed tree `state-index` was made from by this process (None: not known to be current)."""
        self._tree: str | None = None  # read once, then kept by `seal`; only hoh seals
        self._loops: list[int] | None = None
        self._loop_trees: dict[str, str] | None = None
        """The sealed `loops` tree's entries: a loop dir's name → its tree (read once, then kept by `seal`)."""
        self._files: dict[str, tuple[StatKey, str]] = {}
        """Absolute path → (stat as sealed, sealed blob id), for this process's stat-only checks."""
        self._dirs: dict[str, int] = {}
        """Absolute path of each sealed directory → its mtime as sealed."""
        self._by_dir: dict[str, list[str]] = {}
        """Sealed directory → the sealed files directly in it."""
        self._watch: DirWatch | None = None
        self._sealed_dirs: tuple[Path, ...] | None = None
        self.restores = 0
        """How many times sealed files were put back (what was made of them before is stale: `LoopsView`)."""

    def _git(self, *args: str, index: Path | None = None, binary: bool = False):
        return self.history.git(*args, work_tree=self.state_dir, index=index or self.index, binary=binary)

    def sealed_tree(self) -> str | None:
        if self._tree is None:
            try:
                self._tree = self.history.git("rev-parse", "--verify", "-q", SEALED_REF) or ""
            except GitError:
                self._tree = ""
        return self._tree or None

    def sealed_loops(self) -> list[int]:
        if self._loops is None:
            tree = self.sealed_tree()
            names = self.history.git("ls-tree", "--name-only", f"{tree}:loops") if tree else ""
            self._loops = sorted(int(name) for name in names.splitlines() if name.isdigit())
        return list(self._loops)

    def sealed_dirs(self) -> tuple[Path, ...]:
        """The sealed loops' directories (kept, and extended by `seal`: every attempt's guard skips them)."""
        loops = self.sealed_loops()
        if self._sealed_dirs is None or len(self._sealed_dirs) != len(loops):
            self._sealed_dirs = tuple(self.state_dir / loop_dir(t) for t in loops)
        return self._sealed_dirs

    def open_loops(self) -> list[int]:
        """Loop dirs not sealed yet: the loop running now (and any a crash left unfinished)."""
        done = set(self.sealed_loops())
        names = os.listdir(self.state_dir / "loops")  # names only: every attempt asks, and there is one per loop
        return sorted(t for t in (int(name) for name in names if name.isdigit()) if t not in done)

    def seal(self, t: int) -> None:
        """Record loop t's state dir; idempotent (a crash before the ref update just seals again)."""
        # git records files, not directories: an empty one (QA's evidence dir when it wrote nothing) would
        # be outside the seal, and the check could not tell it from one made after. Sealed, the loop's dir
        # holds exactly what was recorded, so any directory that turns up later is a change.
        prune_empty_dirs(self.state_dir / loop_dir(t))
        name = loop_dir(t).rpartition("/")[2]
        objects = LooseObjects(self.history.git_dir)
        made = objects.tree_of(self.state_dir / loop_dir(t))
        loop_tree, blobs = made if made is not None else (self._tree_by_git(t), None)
        trees = {**self._sealed_loop_trees(), name: loop_tree}
        tree = objects.tree({"loops": objects.tree(trees)})
        self.history.git("update-ref", SEALED_REF, tree)
        before = self.sealed_loops()
        if self._sealed_dirs is not None and (not before or t > before[-1]):
            self._sealed_dirs = (*self._sealed_dirs, self.state_dir / loop_dir(t))  # the next loop: no walk again
        elif t not in before:
            self._sealed_dirs = None
        self._tree, self._loops, self._loop_trees = tree, sorted({*before, t}), trees
        if self._files or self._dirs or len(self._loops) == 1:
            self._record([t], {os.path.join(self.state_dir, loop_dir(t), rel): blob
                               for rel, blob in blobs.items()} if blobs is not None else None)

    def _tree_by_git(self, t: int) -> str:
        """Loop t's tree as git records it, through an index of this loop's files alone."""
        own = self.history.git_dir / "seal-index"
        own.unlink(missing_ok=True)
        self._git("add", "--force", "--", loop_dir(t), index=own)
        loop_tree = self._git("write-tree", f"--prefix={loop_dir(t)}/", index=own)
        own.unlink(missing_ok=True)
        return loop_tree

    def _sealed_loop_trees(self) -> dict[str, str]:
        if self._loop_trees is None:
            tree = self.sealed_tree()
            out = self.history.git("ls-tree", "-z", f"{tree}:loops", binary=True) if tree else b""
            self._loop_trees = {}
            for entry in out.split(b"\0"):
                if entry:
                    meta, _, entry_name = entry.partition(b"\t")
                    self._loop_trees[entry_name.decode()] = meta.split()[2].decode()
        return self._loop_trees

    def _ensure_index(self) -> None:
        """`state-index` as the sealed tree is now (for `created` and `restore`): read again when it may not be."""
        tree = self.sealed_tree()
        if self._index_tree == tree and self.index.exists():
            return
        self._git("read-tree", tree) if tree else self._git("read-tree", "--empty")
        self._index_tree = tree

    def _record(self, loops: list[int], blobs: dict[str, str] | None = None) -> None:
        """The stat baseline of these sealed loops, as they are now (just sealed, or just verified); `blobs`:
        each sealed file's blob id by its absolute path, when the seal just computed them."""
        if not loops:
            return
        if blobs is None:
            listing = self.history.git("ls-tree", "-r", "-z", "--full-tree", self.sealed_tree(), "--",
                                       *(loop_dir(t) for t in loops), binary=True)
            blobs = {}
            for entry in listing.split(b"\0"):
                if entry:
                    meta, _, rel = entry.partition(b"\t")
                    blobs[os.path.join(self.state_dir, os.fsdecode(rel))] = meta.split()[2].decode()
        if not self._dirs and self._watch is None:
            self._watch = DirWatch.open()  # a fresh baseline: the watch covers every directory recorded
        for t in loops:
            for dirpath, _, names in os.walk(self.state_dir / loop_dir(t)):
                if self._watch is not None:
                    self._watch.add(dirpath)  # before the stats: a change after them is an event
                self._dirs[dirpath] = os.lstat(dirpath).st_mtime_ns
                files = self._by_dir.setdefault(dirpath, [])
                for name in names:
                    path = os.path.join(dirpath, name)
                    if path in blobs:
                        self._files[path] = (_key(os.lstat(path)), blobs[path])
                        files.append(path)

    def _forget(self) -> None:
        """Drop the baseline (and the watch, whose queue may hold hoh's own writes): the next check
        records the sealed loops as they are then."""
        self._files, self._dirs, self._by_dir = {}, {}, {}
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    def close(self) -> None:
        """Let go of the kernel watch (a later check records the baseline again)."""
        self._forget()

    def _suspects(self) -> tuple[list[str], list[str]] | None:
        """The sealed directories (and their files) to stat-check: those the watch saw change, and every
        directory below one; None: all of them (no watch, or it cannot say)."""
        changed = self._watch.changed() if self._watch is not None else None
        if changed is None:
            return None
        prefixes = tuple(d + os.sep for d in changed)
        dirs = [d for d in self._dirs if d in changed or d.startswith(prefixes)] if changed else []
        return dirs, [f for d in dirs for f in self._by_dir.get(d, ())]

    def _pathspec(self, open_loops: list[int]) -> list[str]:
        return ["loops/", *(f":(exclude){loop_dir(t)}" for t in open_loops)]

    def changes(self, open_loops: list[int]) -> list[str]:
        """Modified, deleted or created paths in sealed loops, found by stat where the kernel saw events."""
        if self.sealed_tree() is None:
            return []
        if not self._files and not self._dirs:
            self._record(self.sealed_loops())
        suspects = self._suspects()
        if suspects is None and self._watch is not None:
            self._watch.close()  # it lost track (a full queue): every check stats everything from now on
            self._watch = None
        dirs, files = suspects if suspects is not None else (list(self._dirs), list(self._files))
        if not dirs and not files:
            return []
        found: list[str] = []
        for path in files:
            key, blob = self._files[path]
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                found.append(f"deleted {self._rel(path)}")
                continue
            if _key(st) == key:
                continue
            if not stat.S_ISREG(st.st_mode) or _blob_id(path) != blob:
                found.append(f"modified {self._rel(path)}")
            elif stat.S_IMODE(st.st_mode) != stat.S_IMODE(key[4]):
                found.append(f"changed the mode of {self._rel(path)}")
            else:
                self._files[path] = (_key(st), blob)  # touched, unchanged
        touched = []
        for path in dirs:
            mtime = self._dirs[path]
            try:
                if os.lstat(path).st_mtime_ns != mtime:
                    touched.append(self._rel(path))
            except FileNotFoundError:
                continue  # its files show as deleted
        if touched:
            self._ensure_index()
            found += self.history.created(self.state_dir, self.index, *touched)
        return found

    def _rel(self, path: str) -> str:
        return os.path.relpath(path, self.state_dir)

    def restore(self, changes: list[str]) -> None:
        self._ensure_index()
        self.restores += 1  # first: a restore cut off halfway has changed files too
        for change in changes:
            kind, _, rel = change.partition(" ")
            if kind == "changed":
                rel = rel.removeprefix("the mode of ")
            path = self.state_dir / rel
            if kind == "created":
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)
            else:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                elif path.exists() or path.is_symlink():
                    path.unlink()
                self._git("checkout-index", "--force", "--", rel)
        self._forget()  # the next check takes the restored files as its baseline

    def verify(self, open_loops: list[int]) -> list[str]:
        """Re-hash every sealed file against the sealed tree (no stat cache trusted)."""
        tree = self.sealed_tree()
        if tree is None:
            return []
        # Beside the history when hoh may write there; a read-only workspace is verified from a private tmp dir.
        where = self.history.git_dir if os.access(self.history.git_dir, os.W_OK) else None
        with tempfile.TemporaryDirectory(dir=where) as tmp:
            fresh = Path(tmp) / "index"
            self._git("read-tree", tree, index=fresh)
            return self.history.changes(self.state_dir, fresh, *self._pathspec(open_loops))

    def repair(self, open_loops: list[int]) -> list[str]:
        """Put every sealed file back as sealed; return what was changed."""
        found = self.verify(open_loops)
        if found:
            self.index.unlink(missing_ok=True)
            self.restore(found)
        return found
