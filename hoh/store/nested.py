"""Nested repositories that git cannot look into safely, disarmed before any git of hoh's scans a role's tree.

To tell whether a directory of a work tree is a repository of its own, and where its HEAD is, git opens that
repository's HEAD, config, packed-refs and refs, following a `gitdir:` file and a `commondir` wherever they lead.
A role writes those files. A FIFO there blocks hoh's git until its timeout, at every freeze and every resume; a
link, or a `gitdir:`/`commondir` that leads out of the tree, has git read any file of the machine and quote its
lines in the error hoh keeps. So `disarm` removes each nested `.git` that is not plain before hoh's git runs:
that repository is content from then on, as every embedded repository becomes (`embedded.py`).

A nested .git is plain when it is a directory, or a `gitdir:` file leading to a directory inside the tree, that
has no `commondir`, whose HEAD, config and packed-refs are regular files (or absent), and whose refs/ holds only
directories and regular files. Nothing of it is opened but a `gitdir:` file (a regular file, read bounded).
"""

from __future__ import annotations

import fnmatch
import os
import stat
from pathlib import Path
from typing import Callable, Iterable

from .embedded import remove_tree

OPENED = ("HEAD", "config", "packed-refs")
"""A nested repository's files git opens to tell it is one and resolve its HEAD (with refs/)."""
GITFILE_BYTES = 4096
MAX_REFS = 100_000
"""More entries under a nested refs/ than this: not plain (a walk of hoh's must stay bounded)."""


def outside_of(pathspecs: Iterable[str]) -> Callable[[str], bool]:
    """`History.outside()`'s exclude pathspecs (a workspace inside the project) as a test of a directory's path."""
    patterns = [(spec.partition(")")[0], spec.partition(")")[2].removesuffix("/**")) for spec in pathspecs]
    return lambda rel: any(rel == p or ("glob" in magic and fnmatch.fnmatchcase(rel, p)) for magic, p in patterns)


def disarm(work_tree: Path, changed: list[str] | None, outside: Callable[[str], bool] = lambda rel: False) -> list[str]:
    """Remove the .git of every nested repository below the changed paths (None: the whole tree) that is not
    plain; the repositories' paths, sorted. `outside(rel)`: a directory that is not the tree's (a workspace inside
    the project). The tree's own top-level .git is not nested."""
    disarmed: list[str] = []
    for rel in _git_dirs(work_tree, changed, outside):
        if _beyond_a_link(work_tree, rel):
            continue  # not in the tree: git does not follow a link to a directory either
        if not _plain(work_tree, work_tree / rel):
            remove_tree(work_tree / rel)
            disarmed.append(rel.rpartition("/")[0])
    return sorted(disarmed)


def _git_dirs(work_tree: Path, changed: list[str] | None, outside: Callable[[str], bool]) -> list[str]:
    """Every nested `.git` (its path) under the changed paths: one a path names, or one below a directory the
    changes name whole (walked without following a link)."""
    found: set[str] = set()
    roots: list[str] = []
    for rel in [""] if changed is None else changed:
        parts = rel.split("/") if rel else []
        if ".git" in parts[1:]:
            found.add("/".join(parts[:parts.index(".git", 1) + 1]))
        elif not parts or parts[0] != ".git":
            roots.append(rel)
    for root in roots:
        stack = [root]
        while stack:
            rel = stack.pop()
            try:
                if not stat.S_ISDIR(os.lstat(work_tree / rel if rel else work_tree).st_mode) or (rel and outside(rel)):
                    continue
                entries = list(os.scandir(work_tree / rel if rel else work_tree))
            except OSError:
                continue
            for entry in entries:
                child = f"{rel}/{entry.name}" if rel else entry.name
                if entry.name == ".git":
                    if rel:
                        found.add(child)
                elif entry.is_dir(follow_symlinks=False):
                    stack.append(child)
    return sorted(found)


def _beyond_a_link(work_tree: Path, rel: str) -> bool:
    path = work_tree
    for part in rel.split("/")[:-1]:
        path = path / part
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                return True
        except OSError:
            return True
    return False


def _plain(work_tree: Path, dot_git: Path) -> bool:
    try:
        st = os.lstat(dot_git)
    except FileNotFoundError:
        return True
    if stat.S_ISREG(st.st_mode):
        target = _gitfile_target(dot_git, st)
        return target is not None and target.is_relative_to(work_tree.resolve()) and _plain_dir(target)
    return stat.S_ISDIR(st.st_mode) and _plain_dir(dot_git)


def _gitfile_target(dot_git: Path, st: os.stat_result) -> Path | None:
    """Where a `gitdir:` file leads, resolved; None for one that is not such a file."""
    if st.st_size > GITFILE_BYTES:
        return None
    try:
        text = dot_git.read_bytes().decode()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir: "):
        return None
    return (dot_git.parent / text[len("gitdir: "):].strip()).resolve()


def _plain_dir(git_dir: Path) -> bool:
    try:
        if not stat.S_ISDIR(os.lstat(git_dir).st_mode) or os.path.lexists(git_dir / "commondir"):
            return False
        for name in OPENED:
            if os.path.lexists(git_dir / name) and not stat.S_ISREG(os.lstat(git_dir / name).st_mode):
                return False
        refs = git_dir / "refs"
        if not os.path.lexists(refs):
            return True
        if not stat.S_ISDIR(os.lstat(refs).st_mode):
            return False
        seen = 0
        for directory, dirs, files in os.walk(refs):  # os.walk follows no link to a directory: each is checked
            seen += len(dirs) + len(files)
            if seen > MAX_REFS:
                return False
            for name in (*dirs, *files):
                mode = os.lstat(os.path.join(directory, name)).st_mode
                if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                    return False
    except OSError:
        return False
    return True
