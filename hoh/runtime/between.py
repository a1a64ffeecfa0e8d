"""The guard between two role attempts: a change to a protected file area made while no role ran
(during the freeze, by a process an unjailed role left behind) is a violation too.

Each attempt's guard takes its baseline when the attempt starts; what happened between the last
attempt's check and that moment would otherwise become the new baseline unseen. So after every check
the file areas' state is remembered, and before the next attempt it is compared with that memory:
every difference that hoh's own writes since then do not explain (`fsutil.take_written`) is put back
and journaled. Paths an area leaves out at either moment (an attempt's own logs, sealed loops, a role's
own home) are left out of the comparison; sealed loops have their own check.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ..fsutil import take_written, written_since
from .guard import Area, FileArea, Fingerprint, Violation, diff, printable


@dataclass
class _Memory:
    snap: tuple[Fingerprint, dict[str, bytes]]
    skip: tuple[Path, ...]


class Continuity:
    """What the file areas held at the last check; `check` before an attempt, `remember` after it."""

    def __init__(self) -> None:
        self._memory: dict[tuple[str, Path], _Memory] = {}
        take_written()  # writes before the first attempt are the baseline itself

    def check(self, areas: list[Area]) -> list[Violation]:
        written = [Path(p) for p in written_since()]
        found = []
        for area in areas:
            if not isinstance(area, FileArea) or (memory := self._memory.get((area.name, area.root))) is None:
                continue
            skip = set(memory.skip) ^ set(area.skip)  # what one of the two fingerprints left out
            now = area.fingerprint()  # what it holds now; the bytes to put back are the memory's
            left_out = _LeftOut(area.root, [*skip, *written])
            before, after = left_out.kept(memory.snap[0]), left_out.kept(now)
            changes = diff(before, after, area.label)
            if changes:
                _put_back(area, (before, memory.snap[1]), after)
                found.append(Violation(area.name, [printable(c) + " (between roles)" for c in changes]))
        return found

    def forget(self) -> None:
        """Start again from the next attempt's own baseline: after Developers worked at once, each with its own
        guard and memory (`packages.py`), what they and hoh wrote meanwhile is no change between roles."""
        self._memory.clear()
        take_written()

    def remember(self, areas: list[Area]) -> None:
        take_written()  # from here on, only hoh's own writes are explained
        for area in areas:
            if isinstance(area, FileArea):
                self._memory[(area.name, area.root)] = _Memory(area.snapshot(), area.skip)


class _LeftOut:
    """The paths under `root` that `roots` cover (each root, and everything under it), as strings relative to
    `root`: a fingerprint's keys are looked up by their leading parts, never compared path by path."""

    def __init__(self, root: Path, roots: list[Path]) -> None:
        self.everything = False
        self.prefixes: set[str] = set()
        for r in roots:
            if r == root or root.is_relative_to(r):
                self.everything = True
            elif r.is_relative_to(root):
                self.prefixes.add(r.relative_to(root).as_posix())

    def kept(self, fp: Fingerprint) -> Fingerprint:
        if self.everything:
            return {}
        if not self.prefixes:
            return fp
        return {rel: ident for rel, ident in fp.items() if not self._covers(rel)}

    def _covers(self, rel: str) -> bool:
        if rel in self.prefixes:
            return True
        cut = rel.find("/")
        while cut != -1:
            if rel[:cut] in self.prefixes:
                return True
            cut = rel.find("/", cut + 1)
        return False


def _put_back(area: FileArea, snap: tuple[Fingerprint, dict[str, bytes]], now: Fingerprint) -> None:
    """Undo the unexplained differences only: hoh's own writes since the last check stay."""
    before, saved = snap
    for rel in sorted(now.keys() - before.keys(), reverse=True):
        path = area._path(rel)
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)
    for rel, ident in sorted(before.items()):
        if now.get(rel) == ident or ident.startswith(("dir:", "link:", "special:")):
            continue
        path = area._path(rel)
        if rel not in saved:
            area.unrestorable.append(rel)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.is_dir():
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        path.write_bytes(saved[rel])
        path.chmod(int(ident.rpartition(":")[2], 8))
