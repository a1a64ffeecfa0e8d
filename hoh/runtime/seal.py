"""Finished loops' state, sealed once: later checks cost a stat per file, not a read.

When a loop ends its directory `state/loops/NNNN/` is added to a git index kept in history.git
(`state-index`, work tree `state/`) and the tree of everything sealed so far is recorded under
`refs/hoh/sealed`. From then on:
- the guard asks git what changed in sealed loops (`changes`): stat-only, in C;
- a change is undone from the sealed blobs (`restore`), which no role can reach;
- on resume and in `hoh status --verify`, every sealed file is re-hashed against the sealed tree
  (`verify`), whatever the stat caches say.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .git import GitError, History

SEALED_REF = "refs/hoh/sealed"


def loop_dir(t: int) -> str:
    return f"loops/{t:04d}"


class SealedState:
    def __init__(self, history: History, state_dir: Path):
        self.history, self.state_dir = history, state_dir
        self.index = history.git_dir / "state-index"
        self._tree: str | None = None  # read once, then kept by `seal`; only hoh seals
        self._loops: list[int] | None = None
        self._dirs: dict[str, int] = {}
        """Each sealed directory's mtime as sealed: a file created in one changes it, so finding new
        files costs one stat per directory instead of a walk (recorded at seal, and after `verify`)."""

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

    def open_loops(self) -> list[int]:
        """Loop dirs not sealed yet: the loop running now (and any a crash left unfinished)."""
        done = set(self.sealed_loops())
        loops = self.state_dir / "loops"
        return sorted(int(d.name) for d in loops.iterdir() if d.name.isdigit() and int(d.name) not in done)

    def seal(self, t: int) -> None:
        """Record loop t's state dir; idempotent (a crash before the ref update just seals again)."""
        self._ensure_index()
        self._git("add", "--force", "--", loop_dir(t))
        tree = self._git("write-tree")
        self.history.git("update-ref", SEALED_REF, tree)
        self._tree, self._loops = tree, sorted({*self.sealed_loops(), t})
        self._record_dirs([t])

    def _record_dirs(self, loops: list[int]) -> None:
        for t in loops:
            for dirpath, _, _ in os.walk(self.state_dir / loop_dir(t)):
                self._dirs[os.path.relpath(dirpath, self.state_dir)] = os.lstat(dirpath).st_mtime_ns

    def _ensure_index(self) -> None:
        """Rebuild the index from the sealed tree if it is missing (a first seal, or a lost index)."""
        if self.index.exists():
            return
        tree = self.sealed_tree()
        self._git("read-tree", tree) if tree else self._git("read-tree", "--empty")

    def _pathspec(self, open_loops: list[int]) -> list[str]:
        return ["loops/", *(f":(exclude){loop_dir(t)}" for t in open_loops)]

    def changes(self, open_loops: list[int]) -> list[str]:
        """Changed, deleted or created paths in sealed loops: git compares the files with the sealed
        index by stat; new files show as a changed directory mtime (then git lists them)."""
        if self.sealed_tree() is None:
            return []
        self._ensure_index()
        if not self._dirs:
            self._record_dirs(self.sealed_loops())
        found = self.history.modified(self.state_dir, self.index, *self._pathspec(open_loops))
        touched = []
        for rel, mtime in self._dirs.items():
            try:
                if os.lstat(self.state_dir / rel).st_mtime_ns != mtime:
                    touched.append(rel)
            except FileNotFoundError:
                continue  # its files show as deleted
        if touched:
            found += self.history.created(self.state_dir, self.index, *touched)
        return found

    def restore(self, changes: list[str]) -> None:
        for change in changes:
            kind, _, rel = change.partition(" ")
            path = self.state_dir / rel
            if kind == "created":
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)
            else:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                self._git("checkout-index", "--force", "--", rel)

    def verify(self, open_loops: list[int]) -> list[str]:
        """Re-hash every sealed file against the sealed tree (no stat cache trusted)."""
        tree = self.sealed_tree()
        if tree is None:
            return []
        with tempfile.TemporaryDirectory(dir=self.history.git_dir) as tmp:
            fresh = Path(tmp) / "index"
            self._git("read-tree", tree, index=fresh)
            return self.history.changes(self.state_dir, fresh, *self._pathspec(open_loops))

    def repair(self, open_loops: list[int]) -> list[str]:
        """Put every sealed file back as sealed; return what was changed."""
        found = self.verify(open_loops)
        if found:
            self.index.unlink(missing_ok=True)
            self._ensure_index()
            self.restore(found)
        return found

    def settled(self) -> None:
        """After a check or a restore: the directories as they are now are the baseline again."""
        self._dirs = {}
