"""What a freeze will not hand to git: files too large for a candidate.

git reads and compresses every byte of a file it adds (~35 s a GB here), and a checkout writes every byte out
again. A role's sparse file costs it no disk and no time: `truncate -s 100G big` kept a freeze past git's timeout,
the freeze failed, and every resume failed the same way; a smaller one would have filled the disk at QA's
checkout. So before git adds a tree, each new or changed file larger than `MAX_FILE_BYTES` is left out, and then
the largest of them until all of them together hold at most `MAX_NEW_BYTES`: removed from the tree, as a name git
refuses is (`staging.py`), or, for a file the parent candidate has, put back as it was there.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Callable

MAX_FILE_BYTES = 2**30
MAX_NEW_BYTES = 8 * 2**30


def too_large(history: Any, parent: str, changed: list[str] | None, outside: Callable[[str], bool]) -> list[str]:
    """Remove from `history`'s work tree the files a freeze leaves out for their size (returned, sorted): the
    changed paths' files (None: every file whose size differs from its entry in `parent`, or that it lacks)."""
    work_tree: Path = history.work_tree
    sizes = _new_files(work_tree, changed, outside)
    if changed is None and sizes:
        had = _parent_sizes(history, parent)  # once: one `git ls-tree` of the whole parent
        sizes = {rel: size for rel, size in sizes.items() if had.get(rel) != size}
    left = sorted(rel for rel, size in sizes.items() if size > MAX_FILE_BYTES)
    total = sum(size for rel, size in sizes.items() if size <= MAX_FILE_BYTES)
    for rel in sorted((r for r in sizes if sizes[r] <= MAX_FILE_BYTES), key=lambda r: (-sizes[r], r)):
        if total <= MAX_NEW_BYTES:
            break
        left.append(rel)
        total -= sizes[rel]
    for rel in left:
        os.unlink(work_tree / rel)
    if left:  # a file `parent` has goes back as it was there: left out is not deleted
        had = history.git("--literal-pathspecs", "ls-tree", "-z", "--name-only", "--full-tree", parent, "--", *left,
                          binary=True)
        if kept := [name.decode(errors="surrogateescape") for name in had.split(b"\0") if name]:
            history.git("--literal-pathspecs", "checkout", parent, "--", *kept)
    return sorted(left)


def _new_files(work_tree: Path, changed: list[str] | None, outside: Callable[[str], bool]) -> dict[str, int]:
    """path → size of each regular file at or under the changed paths (no link followed, no .git entered)."""
    found: dict[str, int] = {}
    roots = [""] if changed is None else [rel for rel in changed if ".git" not in rel.split("/")]
    stack = [rel for rel in roots if not _beyond_a_link(work_tree, rel)]  # what a walk reaches is not
    while stack:
        rel = stack.pop()
        path = work_tree / rel if rel else work_tree
        try:
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                if st.st_size > 0:
                    found[rel] = st.st_size
                continue
            if not stat.S_ISDIR(st.st_mode) or (rel and outside(rel)):
                continue
            with os.scandir(path) as entries:
                stack += [f"{rel}/{e.name}" if rel else e.name for e in entries if e.name != ".git"]
        except OSError:
            continue
    return found


def _beyond_a_link(work_tree: Path, rel: str) -> bool:
    path = work_tree
    for part in rel.split("/")[:-1] if rel else ():
        path = path / part
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                return True
        except OSError:
            return True
    return False


def _parent_sizes(history: Any, parent: str) -> dict[str, int]:
    out = history.git("ls-tree", "-r", "-z", "-l", "--full-tree", parent, binary=True)
    sizes: dict[str, int] = {}
    for entry in out.split(b"\0"):
        meta, _, name = entry.partition(b"\t")
        fields = meta.split()
        if len(fields) == 4 and fields[1] == b"blob" and fields[3].isdigit():
            sizes[name.decode(errors="surrogateescape")] = int(fields[3])
    return sizes
