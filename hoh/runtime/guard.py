"""The permissions backstop: every area a role may not write is checked before and after it runs.

Whatever the harness's sandbox and hoh's jail do, this always runs. A change is a violation: it
is reported with the paths that changed, and the area is put back. The cost follows what
changed, not the size of the area or of the history:
- file areas (state, spec, config, harness homes) are fingerprinted by stat — size, times,
  inode, mode — and a file is hashed only when its stat changed (a `HashCache` kept for the run);
- the project and QA's view: not looked at when the role's jail mounts them read-only or not at all (it
  cannot have changed them); else asked of git, whose index is the stat cache (journaled: full_scan);
- the project's .git and history.git are fingerprinted whole, as files, but for what git rewrites
  itself (`guard_git.py`);
- sealed loops: only the directories the kernel saw change are stat-checked (`seal.py`);
- the journal is compared with what hoh itself appended, by one stat.
"""

from __future__ import annotations

import os
import shutil
import stat
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..store.git import History
from ..store.hashcache import HashCache, ignored
from ..store.seal import SealedState

MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024
MAX_HASH_BYTES = 256 * 1024 * 1024
"""A larger file (a role can make a sparse one of any size) is known by its stat, not read: hashing it
would hold up every later role's guard."""
Fingerprint = dict[str, str]


def fingerprint(root: Path, ignore: list[str], skip: tuple[Path, ...] | frozenset[str] = (),
                cache: HashCache | None = None) -> Fingerprint:
    """relative path → identity (content hash and mode; link target; kind) of everything under root; `skip` as
    paths, or as the set of their strings (a caller that fingerprints the same area again makes it once)."""
    cache = cache or HashCache()
    if not root.exists() and not root.is_symlink():
        return {}
    if not root.is_dir() or root.is_symlink():
        return {".": _identity(str(root), os.lstat(root), cache)}
    skip_set = skip if isinstance(skip, frozenset) else frozenset(str(p) for p in skip)
    patterns = tuple(ignore)
    result: Fingerprint = {}
    stack = [(str(root), "")]
    while stack:
        directory, prefix = stack.pop()
        names = cache.listing(directory, skip_set, patterns, top=not prefix)
        for name in names or ():
            path = os.path.join(directory, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue  # gone since the listing
            rel = prefix + name
            result[rel] = _identity(path, st, cache)
            if stat.S_ISDIR(st.st_mode):
                stack.append((path, rel + "/"))
    return result


def _identity(path: str, st: os.stat_result, cache: HashCache) -> str:
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return "link:" + os.readlink(path)
    if stat.S_ISDIR(st.st_mode):
        return f"dir:{mode:o}"
    if stat.S_ISREG(st.st_mode) and st.st_size > MAX_HASH_BYTES:
        return f"large-{st.st_size}-{st.st_mtime_ns}-{st.st_ino}:{mode:o}"
    if stat.S_ISREG(st.st_mode):
        return f"{cache.digest(path, st)}:{mode:o}"
    return f"special:{stat.S_IFMT(st.st_mode):o}"  # a FIFO or socket: never opened (a FIFO would block)


def diff(before: Fingerprint, after: Fingerprint, label: str = "") -> list[str]:
    """Changes as "modified a/b", "created c", "deleted d", "changed the mode of e"; paths under `label`."""
    def shown(rel: str) -> str:
        return label.rstrip("/") if rel == "." and label else label + rel

    changed = []
    for p in sorted(before.keys() & after.keys()):
        if before[p] != after[p]:
            old, new = before[p].rpartition(":"), after[p].rpartition(":")
            same_content = old[0] == new[0] and old[0] and not old[0].startswith(("link", "special"))
            changed.append(f"{'changed the mode of' if same_content else 'modified'} {shown(p)}")
    # An empty directory made or removed changes nothing anyone reads (sandboxes leave marker dirs);
    # the files in it are entries of their own.
    changed += [f"created {shown(p)}" for p in sorted(after.keys() - before.keys()) if not after[p].startswith("dir:")]
    changed += [f"deleted {shown(p)}" for p in sorted(before.keys() - after.keys()) if not before[p].startswith("dir:")]
    return changed


@dataclass
class Violation:
    area: str
    changes: list[str]

    def describe(self) -> str:
        shown = ", ".join(self.changes[:5]) + (f" and {len(self.changes) - 5} more" if len(self.changes) > 5 else "")
        return f"wrote into read-only area '{self.area}': {shown}"


class Area(ABC):
    """A place a role may not write."""

    def __init__(self, name: str):
        self.name = name
        self.unrestorable: list[str] = []

    @abstractmethod
    def snapshot(self) -> object: ...

    @abstractmethod
    def changes(self, snap: object) -> list[str]: ...

    @abstractmethod
    def restore(self, snap: object, changes: list[str]) -> None: ...


class FileArea(Area):
    """Plain files (state, spec, config, harness homes): restored from bytes saved before the role ran."""

    def __init__(self, name: str, root: Path, ignore: list[str], skip: tuple[Path, ...] = (),
                 keep_bytes: Callable[[str], bool] = lambda rel: True, cache: HashCache | None = None,
                 label: str = ""):
        super().__init__(name)
        self.root, self.ignore, self.skip, self.keep_bytes = root, ignore, skip, keep_bytes
        self.cache, self.label = cache or HashCache(), label
        self._skip_set: frozenset[str] | None = None

    def _path(self, rel: str) -> Path:
        return self.root if rel == "." else self.root / rel

    def fingerprint(self) -> Fingerprint:
        if self._skip_set is None:  # every sealed loop's dir is skipped: made once per area, not per look
            self._skip_set = frozenset(str(p) for p in self.skip)
        return fingerprint(self.root, self.ignore, self._skip_set, self.cache)

    def snapshot(self) -> tuple[Fingerprint, dict[str, bytes]]:
        fp = self.fingerprint()
        saved = {}
        for rel, ident in fp.items():
            if ident.startswith(("link:", "special:", "dir:")) or not self.keep_bytes(rel):
                continue
            path = str(self._path(rel))
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_size <= MAX_SNAPSHOT_BYTES:
                saved[rel] = self.cache.content(path, st)
        return fp, saved

    def changes(self, snap) -> list[str]:
        return diff(snap[0], self.fingerprint(), self.label)

    def restore(self, snap, changes: list[str]) -> None:
        before, saved = snap
        after = self.fingerprint()
        for rel in sorted(after.keys() - before.keys(), reverse=True):
            path = self._path(rel)
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)
        for rel, ident in sorted(before.items()):
            if after.get(rel) == ident:
                continue
            path = self._path(rel)
            kind, _, mode = ident.rpartition(":")
            if kind == "dir":
                if path.is_symlink() or (path.exists() and not path.is_dir()):
                    path.unlink()
                path.mkdir(parents=True, exist_ok=True)
                path.chmod(int(mode, 8))
                continue
            if rel not in saved:
                self.unrestorable.append(rel)  # too large to keep in memory; reported, never silently accepted
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_symlink() or (path.is_dir()):
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
            path.write_bytes(saved[rel])
            path.chmod(int(mode, 8))


class WorkTreeArea(Area):
    """A git work tree that must stay as its index says (the project for read-only roles; QA's view)."""

    def __init__(self, name: str, history: History, work_tree: Path, index: Path, ignore: list[str],
                 rebuild: Callable[[], None] | None = None):
        super().__init__(name)
        self.history, self.work_tree, self.index, self.ignore, self.rebuild = history, work_tree, index, ignore, rebuild
        self.jailed = False
        """The role's jail mounts this tree read-only or not at all (`JailSpec.writes_into`): it cannot have
        changed it, so nothing is scanned. Set by the runner, which knows the attempt's whole jail."""
        self.scanned = False
        """A check of this attempt scanned the whole tree (the runner journals it: full_scan)."""

    def _changes(self) -> set[str]:
        return {c for c in self.history.status(self.work_tree, self.index)
                if not any(ignored(part, self.ignore) for part in c.partition(" ")[2].rstrip("/").split("/"))}

    def _known_key(self):
        commit = self.history.clean_at if self.work_tree == self.history.work_tree else None
        return (self.work_tree, commit) if commit else None

    def _is_view(self) -> bool:
        return self.index == self.history.view_index

    def snapshot(self) -> set[str]:
        if self.jailed:
            return set()
        key = self._known_key()
        if key in self.history.known_status:
            return set(self.history.known_status[key])
        if self._is_view():
            clean, self.history.view_clean = self.history.view_clean, False  # a role is about to run in it
            if clean:
                return set()
        return self._changes()

    def changes(self, snap) -> list[str]:
        if self.jailed:
            return []
        self.scanned = True
        now = self._changes()
        if now == snap and (key := self._known_key()):
            self.history.known_status = {key: sorted(now)}  # the next role starts from this, unscanned
        if not now and self._is_view():
            self.history.view_clean = True  # checked after the attempt: the next one starts unscanned
        return sorted(now - snap)

    def restore(self, snap, changes: list[str]) -> None:
        if self.rebuild is not None:
            self.rebuild()
            return
        for change in changes:
            kind, _, rel = change.partition(" ")
            path = self.work_tree / rel
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
            if kind != "created":
                self.history.git("checkout-index", "--force", "--", rel.rstrip("/"), work_tree=self.work_tree,
                                 index=self.index)


class SealedArea(Area):
    """Finished loops' state dirs: checked against their seal where the kernel saw a change, restored from it."""

    def __init__(self, sealed: SealedState, open_loops: list[int]):
        super().__init__("state")
        self.sealed, self.open_loops = sealed, open_loops

    def snapshot(self) -> None:
        return None

    def changes(self, snap) -> list[str]:
        return self.sealed.changes(self.open_loops)

    def restore(self, snap, changes: list[str]) -> None:
        self.sealed.restore(changes)


class JournalArea(Area):
    """The journal is appended to by the Runtime while a role runs; anything else is a violation."""

    def __init__(self, journal):
        super().__init__("state")
        self.journal = journal

    def snapshot(self) -> None:
        self.journal.untouched()  # the journal as it is now is hoh's baseline

    def changes(self, snap) -> list[str]:
        return [] if self.journal.untouched() else [f"modified {self.journal.path.name}"]

    def restore(self, snap, changes: list[str]) -> None:
        self.journal.restore()


class Guard:
    """Snapshot a set of areas, then report and undo any change to them, in order (the project's
    git configuration is restored before anything runs git there)."""

    def __init__(self, areas: list[Area]):
        self.areas = areas
        self.snaps = [a.snapshot() for a in areas]

    def check_and_restore(self) -> list[Violation]:
        violations = []
        for area, snap in zip(self.areas, self.snaps):
            changed = area.changes(snap)
            if changed:
                area.restore(snap, changed)
                found = changed + [f"could not restore {rel}" for rel in area.unrestorable]
                violations.append(Violation(area.name, [printable(c) for c in found]))
        return violations


def __getattr__(name: str):
    """The git dirs' areas live in guard_git.py, which builds on this module: imported on first use, so
    `from .guard import MirrorArea` works whichever of the two modules is imported first."""
    if name in ("MirrorArea", "HistoryArea"):
        from . import guard_git
        return getattr(guard_git, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def printable(text: str) -> str:
    """A file name that is not UTF-8 (an agent can make one) as escapes, so it can be journaled."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
