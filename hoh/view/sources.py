"""Which workspaces a view shows, and when each one last changed.

`find_workspaces` turns the `-w` arguments into workspace roots: a workspace itself, or a folder holding
several (a bench OUT dir, a folder of runs), searched a few levels deep without entering a workspace.

`Source` is one workspace as the view sees it: its change stamp (`etag`), cheap enough to ask every
second or two — the stat of the journal and the ledger plus whether a hoh process holds the workspace —
and a cache of whatever was read at that stamp, so an idle page costs a few stat calls and nothing else;
what can no longer change (a sealed loop's records, a finished attempt's transcript) is kept across
stamps, and the journal is followed (`follow.py`), each line read once.
Every state file is written whole and the journal is append-only, so a stamp that did not move means
the reads it caches are still true.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

from ..errors import UsageError
from ..paths import WorkspacePaths
from ..store.lock import lock_held

SEARCH_DEPTH = 6
"""How far below a `-w` folder workspaces are looked for (a bench OUT dir keeps each trial's in
`hoh/workspace` of the trial's folder, under the job's: several levels down)."""
SKIP_DIRS = {"history.git", "project", "scratch", "state", ".git", "node_modules", ".venv", "__pycache__"}
"""Folders that are never a workspace's parent: the insides of one, and the usual bulky trees."""

T = TypeVar("T")
KEPT = {"loop": 64, "transcript": 4}
"""Reads kept across stamps (`Source.kept`) per kind, the least recently used dropped past this (a transcript
can be large)."""


def is_workspace(path: Path) -> bool:
    return WorkspacePaths(path).identity.is_file()


def find_workspaces(given: list[Path]) -> list[Path]:
    """The workspace roots under the `-w` arguments, in order, each once. Raises UsageError naming the
    first argument that holds none."""
    found: list[Path] = []
    for arg in given:
        root = arg.expanduser().absolute()
        if not root.is_dir():
            raise UsageError(f"no workspace at {root}: it is not a directory")
        here = [root] if is_workspace(root) else _search(root, SEARCH_DEPTH)
        if not here:
            raise UsageError(f"no workspace at {root}: no state/workspace.json in it or {SEARCH_DEPTH} levels below")
        found += [p for p in here if p not in found]
    return found


def _search(folder: Path, depth: int) -> list[Path]:
    if depth == 0:
        return []
    try:
        children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink() and p.name not in SKIP_DIRS)
    except OSError:
        return []
    out: list[Path] = []
    for child in children:
        out += [child] if is_workspace(child) else _search(child, depth - 1)
    return out


def _stamp(path: Path) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{st.st_size}.{st.st_mtime_ns}"


@dataclass
class Source:
    """One workspace in the view: its place in the index, its root, and reads cached by change stamp."""

    index: int
    root: Path
    _cache: dict[str, tuple[str, Any]] = field(default_factory=dict)
    _kept: dict[str, OrderedDict[Any, tuple[Any, Any]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _follower: Any = None

    @property
    def paths(self) -> WorkspacePaths:
        return WorkspacePaths(self.root)

    def etag(self) -> str:
        """Changes whenever the journal, the ledger, the config or the lock's holder does."""
        paths = self.paths
        held = "live" if lock_held(self.root) else "idle"
        return "-".join([_stamp(paths.journal), _stamp(paths.ledger), _stamp(paths.config), held])

    def ledger_etag(self) -> str:
        return _stamp(self.paths.ledger)

    def setup_etag(self) -> str:
        """Changes when what `open_workspace` reads does: the identity, the config, the frozen spec."""
        paths = self.paths
        return "-".join([_stamp(paths.identity), _stamp(paths.config), _stamp(paths.spec)])

    def cached(self, key: str, read: Callable[[], T], stamp: str | None = None) -> T:
        """`read()`'s value, read again only when the stamp (the run's `etag`, or the one given) moved since."""
        stamp = self.etag() if stamp is None else stamp
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        value = read()
        with self._lock:
            self._cache[key] = (stamp, value)
        return value

    def kept(self, kind: str, key: Any, check: Any, read: Callable[[], T]) -> T:
        """`read()`'s value for what does not move with the run's stamp (a sealed loop; a transcript, which
        moves with its own files), kept while `check` (what it was read from) is equal; KEPT[kind] at most."""
        with self._lock:
            kept = self._kept.setdefault(kind, OrderedDict())
            hit = kept.get(key)
            if hit is not None and hit[0] == check:
                kept.move_to_end(key)
                return hit[1]
        value = read()
        with self._lock:
            kept[key] = (check, value)
            while len(kept) > KEPT[kind]:
                kept.popitem(last=False)
        return value

    def follower(self):
        """The journal, followed (`follow.Follower`): brought up to date, reading only the lines appended."""
        from .follow import Follower

        with self._lock:
            if self._follower is None:
                self._follower = Follower(self.paths.journal)
        return self._follower.update()
