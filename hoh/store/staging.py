"""A work tree staged as content: the one step that turns what a Developer left into an index, whether the tree is
the project (`History.commit_all`, one Developer) or a work package's copy (`PackageGit.commit_copy`, several).

What git will not add as it is, the step settles the same way on both: an embedded repository becomes content
(`embedded.py`); a name git refuses to record (`.GIT`, `git~1`, `.git.`, a `.gitmodules` that is a link: what is
a `.git` on another system) is left out, removed from the tree as an embedded repository's .git is; a file or a
directory that hoh's user cannot read (a role's `chmod 000`) is made readable to it, so it is content as it is for
root. Whatever else git refuses stays git's error (`GitError`), for the caller: a work package is then dropped
with it.
`history` is a `git.History` (this module is below it).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .embedded import (changed_gitlinks, flatten_untracked, may_hold_gitlinks, own_dir, remove_embedded_git,
                       remove_tree)
from .gitrun import GitError
from .nested import disarm, outside_of
from .sizes import too_large

SETTLE_ROUNDS = 64
"""Adds after the first that failed: each one settles what the last one named (names the listing missed)."""
NAMED_INVALID = re.compile(r"^error: invalid path '(.+)'$", re.MULTILINE)
NAMED_UNREADABLE = re.compile(r"^error: open\(\"(.+)\"\): Permission denied$", re.MULTILINE)
"""How git (LANG=C) names a path it refuses: a name it will not record, a file it cannot open."""


@dataclass(frozen=True)
class Staged:
    """What the staging changed in the work tree to stage it: embedded repositories made content (their .git
    removed), and paths left out because git refuses their names (removed), each sorted."""

    flattened: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()


def stage(history: Any, parent: str, changed: list[str] | None) -> Staged:
    """Stage the whole work tree of `history` into its index, as content. `changed`: every path that may differ
    from `parent` (the index holding `parent`), so only those are looked at; None adds the whole tree. A gitlink
    `parent` already had (a user's submodule) stays while it does not change."""
    left_out: list[str] = []
    _open_dirs(history.work_tree, changed)
    # Before git looks into any nested repository: one it could not look into safely is content already; and
    # before it reads a file: one too large for a candidate is left out.
    outside = outside_of(history.outside())
    flattened = disarm(history.work_tree, changed, outside)
    left_out += too_large(history, parent, changed, outside)
    try:
        if changed is None:
            history.git(*history._scan("add", "-A"))
        else:
            history._add_changed(changed)
    except GitError as err:  # an embedded repository without a commit, a name git refuses, a file it cannot read
        _add_settling(history, err, flattened, left_out)
        changed = None  # the whole tree was added: a gitlink may be anywhere
    while may_hold_gitlinks(history.work_tree, changed, flattened) and (gitlinks := changed_gitlinks(history, parent)):
        if set(gitlinks) & set(flattened):
            raise GitError(f"{history.work_tree}: cannot make the embedded repositories {gitlinks} content")
        for rel in gitlinks:
            remove_embedded_git(history.work_tree, rel)
        history._pathspec_git("rm", "-q", "-f", "--cached", paths=gitlinks)
        flattened += gitlinks + flatten_untracked(history, gitlinks)
        try:
            history._pathspec_git("add", "-A", paths=gitlinks)
        except GitError as err:  # what their files hold, settled as the tree's are
            _add_settling(history, err, flattened, left_out)
    return Staged(tuple(sorted(flattened)), tuple(sorted(left_out)))


def _open_dirs(work_tree: Path, changed: list[str] | None) -> None:
    """Directories a Developer shut to hoh's user (`chmod 000 dir`, its own top included) opened again, below the
    changed paths (None: the whole tree), so git adds their files as it does as root; git would leave them out
    saying nothing. Root opens every directory already: nothing to do. No .git is entered, no link followed."""
    if os.geteuid() == 0:
        return
    own_dir(work_tree)
    todo = [work_tree] if changed is None else [p for p in (_inside(work_tree, rel) for rel in changed
                                                            if ".git" not in rel.split("/")) if p]
    while todo:
        directory = todo.pop()
        try:
            if not stat.S_ISDIR(os.lstat(directory).st_mode):
                continue
            own_dir(directory)
            with os.scandir(directory) as entries:
                todo += [Path(e.path) for e in entries if e.name != ".git" and e.is_dir(follow_symlinks=False)]
        except OSError:
            continue


def _add_settling(history: Any, err: GitError, flattened: list[str], left_out: list[str]) -> None:
    """`add -A` of the whole tree after `err`: what git refused settled first, then again for what the next add
    names, until one goes through; git's last error when a round settles nothing."""
    flattened += flatten_untracked(history)
    left_out += _settle_listed(history)
    for _ in range(SETTLE_ROUNDS):
        try:
            history.git(*history._scan("add", "-A"))
            return
        except GitError as again:
            err = again
        repos = flatten_untracked(history)
        named = _settle_named(history.work_tree, err.stderr)
        if not repos and not named:
            raise err
        flattened += repos
        left_out += [rel for rel in named if rel]
    raise err


def _settle_listed(history: Any) -> list[str]:
    """Among the untracked and modified files: names git refuses removed (the returned paths), files hoh cannot
    read made readable."""
    out = history._pathspec_git("ls-files", "-z", "--others", "--modified", "--exclude-standard", paths=[],
                                binary=True)
    removed: list[str] = []
    for raw in sorted(set(out.split(b"\0")) - {b""}):
        rel = raw.decode(errors="surrogateescape")
        if any(rel == r or rel.startswith(r + "/") for r in removed):
            continue
        parts = rel.split("/")
        for n in range(1, len(parts) + 1):
            path = history.work_tree.joinpath(*parts[:n])
            if refused_name(parts[n - 1], is_link=os.path.islink(path)):
                _remove_inside(history.work_tree, "/".join(parts[:n]))
                removed.append("/".join(parts[:n]))
                break
        else:
            _make_readable(history.work_tree, rel)
    return removed


def _settle_named(work_tree: Path, stderr: str) -> list[str]:
    """What git's failed add named: a path it will not record removed (returned), a file it cannot open made
    readable ("" returned for it). Nothing returned: nothing git named could be settled."""
    settled: list[str] = []
    for rel in NAMED_INVALID.findall(stderr):
        if _remove_inside(work_tree, rel):
            settled.append(rel)
    for rel in NAMED_UNREADABLE.findall(stderr):
        if _make_readable(work_tree, rel):
            settled.append("")
    return settled


_DOTGIT = (".git", "git~1")
_DOTGITMODULES = (".gitmodules", *(f"gitmod~{n}" for n in range(1, 5)), *(f"gi7eba~{n}" for n in range(1, 10)))


def refused_name(name: str, is_link: bool) -> bool:
    """Whether git refuses to record a path with this component (its `verify_path`, core.protectNTFS on as by
    default): `.git` in any case, or as NTFS reads it (trailing dots and spaces, a stream after `:`, the short
    name `git~1`; a backslash parts names there); a link named `.gitmodules` likewise."""
    for piece in name.split("\\"):
        if _ntfs_named(piece, _DOTGIT) or (is_link and _ntfs_named(piece, _DOTGITMODULES)):
            return True
    return False


def _ntfs_named(piece: str, names: tuple[str, ...]) -> bool:
    low = piece.lower()
    return any(low.startswith(name) and not low[len(name):].split(":", 1)[0].strip(" .") for name in names)


def _inside(work_tree: Path, rel: str) -> Path | None:
    """`rel` in the work tree with no link among its parents, else None (nothing beyond a link is touched)."""
    parts = rel.split("/")
    if not rel or any(p in ("", ".", "..") for p in parts):
        return None
    path = work_tree
    for part in parts[:-1]:
        path = path / part
        if os.path.islink(path):
            return None
    return path / parts[-1]


def _remove_inside(work_tree: Path, rel: str) -> bool:
    path = _inside(work_tree, rel)
    if path is None or not os.path.lexists(path):
        return False
    remove_tree(path)
    return True


def _make_readable(work_tree: Path, rel: str) -> bool:
    """A regular file hoh's user cannot read, made readable to it (root reads it as it is)."""
    path = _inside(work_tree, rel)
    try:
        if path is None or not stat.S_ISREG(os.lstat(path).st_mode) or os.access(path, os.R_OK):
            return False
        os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) | stat.S_IRUSR)
    except OSError:
        return False
    return True
