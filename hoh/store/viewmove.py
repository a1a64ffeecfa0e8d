"""QA's view moved from one candidate to the next by the files that differ, with no index of the view.

`History.update_view` keeps the view a plain copy of a commit. Moving it through its index (`read-tree -m -u`)
reads and writes an index of the whole project and walks both trees: its cost follows the project's size.
When the view is known to hold exactly its last commit (hoh moved it, and since then only roles whose jail
mounts it read-only have run) and no role will need its index (every one that reads it is jailed), it is
moved by what git says changed between the two commits (`diff-tree`, which skips equal subtrees), with the
new contents from `cat-file --batch`: files, links and modes written as checkout writes them. The index is
then out of date and removed; whatever needs it later rebuilds the view from nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..fsutil import remove_path

REGULAR, EXECUTABLE, LINK = "100644", "100755", "120000"
MAX_BYTES = 32 * 2**20
"""The most new content moved this way (it is read whole): a bigger change goes through git's checkout."""


@dataclass(frozen=True)
class Change:
    path: str
    status: str
    """git's letter: A, D, M or T (type changed)."""
    mode: str
    """The new mode ("000000" when deleted)."""
    blob: str


def tree_changes(raw: bytes) -> list[Change] | None:
    """`diff-tree -r -z --no-renames` output as changes; None when one of them is not a file or a link
    (a submodule's gitlink), which only git's own checkout should handle."""
    fields = raw.split(b"\0")
    changes = []
    for meta, name in zip(fields[0::2], fields[1::2]):
        if not meta:
            continue
        old_mode, new_mode, _old, blob, status = meta.lstrip(b":").decode().split(" ")
        if {old_mode, new_mode} - {REGULAR, EXECUTABLE, LINK, "000000"}:
            return None
        changes.append(Change(os.fsdecode(name), status[0], new_mode, blob))
    return changes


def blobs(raw: bytes, wanted: list[str]) -> dict[str, bytes]:
    """`cat-file --batch` output for `wanted` (in that order) as blob id → bytes."""
    found, at = {}, 0
    for oid in wanted:
        end = raw.index(b"\n", at)
        header = raw[at:end].split(b" ")
        if len(header) != 3 or header[1] != b"blob" or header[0].decode() != oid:
            raise ValueError(f"cat-file gave {raw[at:end]!r} for {oid}")
        size = int(header[2])
        found[oid] = raw[end + 1:end + 1 + size]
        at = end + 1 + size + 1
    return found


def umask() -> int:
    """The process's umask, read without setting it (`os.umask` would, for every thread at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


def apply(dest: Path, changes: list[Change], contents: Callable[[str], bytes]) -> None:
    """Make `dest` hold the new side of `changes`: every old path removed first (deepest first, emptied
    directories with it, as checkout does), then every new one written as a new file (never through an old
    one: an old name may be a link, or share its inode)."""
    mask = umask()
    for change in sorted(changes, key=lambda c: c.path, reverse=True):
        path = dest / change.path
        if change.status != "A" and remove_path(path) and change.status == "D":
            _prune(dest, path.parent)
    for change in sorted(changes, key=lambda c: c.path):
        if change.status == "D":
            continue
        path = dest / change.path
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_path(path)
        data = contents(change.blob)
        if change.mode == LINK:
            os.symlink(os.fsdecode(data), path)
            continue
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                     (0o777 if change.mode == EXECUTABLE else 0o666) & ~mask)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)


def _prune(dest: Path, directory: Path) -> None:
    while directory != dest:
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent
