"""The permissions backstop: fingerprint every area a role may not write, before and after.

Whatever the harness's own sandbox does, this always runs. A change is a violation: it is
reported with the paths that changed, and the area is put back (git for the project, the saved
bytes for state files, a fresh export for QA's candidate copy).
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import stat
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..fsutil import sha256_file
from .git import ProjectRepo

MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024
Fingerprint = dict[str, str]


def fingerprint(root: Path, ignore: list[str], skip: tuple[Path, ...] = ()) -> Fingerprint:
    """relative path → content identity for every file and symlink under root."""
    result: Fingerprint = {}
    if not root.exists():
        return result
    if root.is_file():
        return {".": sha256_file(root)}
    skip_set = {str(p) for p in skip}
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not _ignored(d, ignore) and str(base / d) not in skip_set
                             and not (base == root and d == ".git"))
        for name in sorted(filenames):
            path = base / name
            if _ignored(name, ignore) or str(path) in skip_set:
                continue
            rel = path.relative_to(root).as_posix()
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                result[rel] = "link:" + os.readlink(path)
            elif stat.S_ISREG(mode):
                result[rel] = sha256_file(path) + (":x" if mode & stat.S_IXUSR else "")
            else:  # a FIFO or socket: never opened (a FIFO would block the guard)
                result[rel] = f"special:{stat.S_IFMT(mode):o}"
        for d in dirnames:
            if (base / d).is_symlink():
                result[(base / d).relative_to(root).as_posix()] = "link:" + os.readlink(base / d)
    return result


def _ignored(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def diff(before: Fingerprint, after: Fingerprint) -> list[str]:
    changed = [f"modified {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    changed += [f"created {p}" for p in sorted(after.keys() - before.keys())]
    changed += [f"deleted {p}" for p in sorted(before.keys() - after.keys())]
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

    def __init__(self, name: str, root: Path, ignore: list[str]):
        self.name, self.root, self.ignore = name, root, ignore

    @abstractmethod
    def snapshot(self) -> object: ...

    @abstractmethod
    def changes(self, snap: object) -> list[str]: ...

    @abstractmethod
    def restore(self, snap: object) -> None: ...


class FileArea(Area):
    """Plain files (state/, spec, config): restored from bytes saved before the role ran."""

    def __init__(self, name: str, root: Path, ignore: list[str], skip: tuple[Path, ...] = (),
                 keep_bytes: Callable[[str], bool] = lambda rel: True):
        super().__init__(name, root, ignore)
        self.skip, self.keep_bytes = skip, keep_bytes
        self.unrestorable: list[str] = []

    def _files(self) -> Fingerprint:
        return fingerprint(self.root, self.ignore, self.skip)

    def snapshot(self) -> tuple[Fingerprint, dict[str, bytes]]:
        fp = self._files()
        saved = {}
        for rel, ident in fp.items():
            path = self.root if rel == "." else self.root / rel
            if (ident[:5] not in ("link:", "speci") and self.keep_bytes(rel)
                    and path.stat().st_size <= MAX_SNAPSHOT_BYTES):
                saved[rel] = path.read_bytes()
        return fp, saved

    def changes(self, snap) -> list[str]:
        return diff(snap[0], self._files())

    def restore(self, snap) -> None:
        before, saved = snap
        after = self._files()
        for rel in after.keys() - before.keys():
            path = self.root if rel == "." else self.root / rel
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)
        for rel, ident in before.items():
            if after.get(rel) == ident:
                continue
            path = self.root if rel == "." else self.root / rel
            if rel not in saved:
                self.unrestorable.append(rel)  # too large to keep in memory; reported, never silently accepted
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_symlink():
                path.unlink()
            path.write_bytes(saved[rel])
            if ident.endswith(":x"):
                path.chmod(0o755)


class GitArea(Area):
    """The project repository: work tree, HEAD and tags; restored with git."""

    def __init__(self, name: str, repo: ProjectRepo, ignore: list[str]):
        super().__init__(name, repo.path, ignore)
        self.repo = repo

    def snapshot(self) -> tuple[Fingerprint, str, str]:
        return fingerprint(self.root, self.ignore), self.repo.head(), self.repo.refs()

    def changes(self, snap) -> list[str]:
        fp, head, refs = snap
        found = diff(fp, fingerprint(self.root, self.ignore))
        if self.repo.refs() != refs:
            found.append("modified git refs (commits or tags)")
        return found

    def restore(self, snap) -> None:
        _, head, refs = snap
        self.repo.reset_to(head)
        wanted = dict(line.split(" ")[::-1] for line in refs.splitlines())
        for tag in self.repo.tags():
            if f"refs/tags/{tag}" not in wanted:
                self.repo.git("tag", "-d", tag)
        for ref, sha in wanted.items():
            if ref.startswith("refs/tags/"):
                self.repo.git("update-ref", ref, sha)


class TagsArea(Area):
    """The project's loop tags: the Developer may use git, but not move or delete hoh's tags."""

    def __init__(self, repo: ProjectRepo):
        super().__init__("project tags", repo.path, [])
        self.repo = repo

    def _tags(self) -> dict[str, str]:
        out = self.repo.git("show-ref", "--tags") if self.repo.tags() else ""
        return dict(reversed(line.split(" ")) for line in out.splitlines())

    def snapshot(self) -> dict[str, str]:
        return self._tags()

    def changes(self, snap) -> list[str]:
        return diff(snap, self._tags())

    def restore(self, snap) -> None:
        for ref in self._tags().keys() - snap.keys():
            self.repo.git("update-ref", "-d", ref)
        for ref, sha in snap.items():
            self.repo.git("update-ref", ref, sha)


class RebuildArea(Area):
    """A disposable copy (QA's candidate): restored by rebuilding it."""

    def __init__(self, name: str, root: Path, ignore: list[str], rebuild: Callable[[], None]):
        super().__init__(name, root, ignore)
        self.rebuild = rebuild

    def snapshot(self) -> Fingerprint:
        return fingerprint(self.root, self.ignore)

    def changes(self, snap) -> list[str]:
        return diff(snap, fingerprint(self.root, self.ignore))

    def restore(self, snap) -> None:
        self.rebuild()


class JournalArea(Area):
    """The journal is appended to by the Runtime while a role runs; anything else is a violation."""

    def __init__(self, journal):
        super().__init__("state", journal.path, [])
        self.journal = journal

    def snapshot(self) -> tuple[bytes, int]:
        return self.root.read_bytes(), self.journal.mark()

    def _expected(self, snap) -> bytes:
        return snap[0] + self.journal.written_since(snap[1])

    def changes(self, snap) -> list[str]:
        current = self.root.read_bytes() if self.root.exists() else b""
        return [] if current == self._expected(snap) else [f"modified {self.root.name}"]

    def restore(self, snap) -> None:
        self.root.write_bytes(self._expected(snap))


class Guard:
    """Snapshot a set of areas, then report and undo any change to them."""

    def __init__(self, areas: list[Area]):
        self.areas = areas
        self.snaps = [a.snapshot() for a in areas]

    def check_and_restore(self) -> list[Violation]:
        violations = []
        for area, snap in zip(self.areas, self.snaps):
            changed = area.changes(snap)
            if changed:
                area.restore(snap)
                lost = getattr(area, "unrestorable", [])
                violations.append(Violation(area.name, changed + [f"could not restore {rel}" for rel in lost]))
        return violations
