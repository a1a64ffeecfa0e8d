"""state/loops as the Planner sees it: every loop's files but its roles' transcripts.

The Planner reads earlier loops' plans, reports and evidence, never a role's prompt or transcript (`roles/`).
Hiding each loop's roles/ in the jail takes a mount per loop, and bwrap's mounts cost about 56 µs each: a
Planner after 500 loops would start 30 ms later than after 5. Instead hoh keeps a copy of state/loops
without roles/ in `scratch/loops-view/`, made of hard links (no file is copied), and the jail binds it
read-only at state/loops: one mount, whatever the loops.

A sealed loop's view is made once: its files are final (its seal's guard puts back any change, and each
putting back makes every sealed loop's view again, `SealedState.restores`). Open loops (the current one, one
cut off) are made again at every update. A session starts from an empty view: nothing an earlier process
left there is trusted. A file hard-linked is the same inode, so a change made in place shows in the view
as it would through a bind of state/loops itself; a file replaced (hoh writes atomically) is linked again.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..fsutil import remove_path
from ..store.seal import SealedState, loop_dir

TRANSCRIPTS = "roles"


class LoopsView:
    def __init__(self, loops: Path, into: Path, sealed: SealedState):
        self.loops, self.into, self.sealed = loops, into, sealed
        self._made: set[str] = set()
        """The names in the view (made by this process: the view is listed once, when it is emptied)."""
        self._final: set[str] = set()
        """The sealed loops whose view is made (their names in state/loops)."""
        self._sealed: tuple[int, set[str]] = (0, set())  # how many loops were sealed, and their names
        self._restores: int | None = None  # SealedState.restores when `_final` was last trusted

    def update(self) -> Path:
        """Bring the view to what state/loops holds now; return its dir."""
        if self._restores != self.sealed.restores:
            if self._restores is None:
                shutil.rmtree(self.into, ignore_errors=True)
                self.into.mkdir(parents=True)
            self._final.clear()
            self._restores = self.sealed.restores
        names = set(os.listdir(self.loops)) if self.loops.is_dir() else set()
        for stale in self._made - names:
            remove_path(self.into / stale)
        self._made &= names
        sealed = self._sealed_names()
        for name in sorted(names - self._final):
            source, view = self.loops / name, self.into / name
            remove_path(view)
            if source.is_dir() and not source.is_symlink():
                _link_tree(str(source), str(view), leave_out=TRANSCRIPTS)
            elif source.is_file() and not source.is_symlink():
                _link(str(source), str(view))
            self._made.add(name)
            if name in sealed:
                self._final.add(name)
        return self.into

    def _sealed_names(self) -> set[str]:
        loops = self.sealed.sealed_loops()
        if len(loops) != self._sealed[0]:  # loops are only ever sealed, never unsealed
            self._sealed = (len(loops), {loop_dir(t).rpartition("/")[2] for t in loops})
        return self._sealed[1]


def _link_tree(source: str, into: str, leave_out: str | None = None) -> None:
    """Directories made, regular files hard-linked; anything else (a link, a FIFO) left out."""
    os.mkdir(into)
    with os.scandir(source) as entries:
        for entry in entries:
            if entry.name == leave_out:
                continue
            if entry.is_dir(follow_symlinks=False):
                _link_tree(entry.path, os.path.join(into, entry.name))
            elif entry.is_file(follow_symlinks=False):
                _link(entry.path, os.path.join(into, entry.name))


def _link(source: str, dest: str) -> None:
    try:
        os.link(source, dest)
    except OSError:  # a filesystem without hard links, or protected_hardlinks refusing: a copy
        shutil.copy2(source, dest)
