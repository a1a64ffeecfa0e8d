"""Repositories embedded in the project (a `git init` or a clone inside it): frozen as content, never as gitlinks.

A gitlink would leave the embedded repository's files out of the candidate, and a later `git status` would run
git inside it, under its own config. So `History.commit_all` removes the .git of every embedded repository it
meets and commits its files; these are its steps. `history` is a `git.History` (this module is below it).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from .gitrun import GitError


def may_hold_gitlinks(work_tree: Path, changed: list[str] | None, flattened: list[str]) -> bool:
    """Whether git may have recorded a gitlink: only an add of a directory holding a .git records one, so a
    change of files alone (no directory among them, no .git in any path) cannot; a whole-tree add may."""
    if changed is None or flattened:
        return True
    for rel in changed:
        if ".git" in rel.split("/"):
            return True
        try:
            if stat.S_ISDIR(os.lstat(work_tree / rel).st_mode):
                return True  # a directory the feed reports whole: whatever is below it
        except FileNotFoundError:
            continue
        except OSError:
            return True
    return False


def flatten_untracked(history: Any, under: list[str] | None = None) -> list[str]:
    """Remove the .git of every untracked embedded repository (below `under`), nested ones too (a walk
    of the work tree: only when `git add` failed, or below repositories just made content)."""
    found: list[str] = []
    todo = [under or []]
    while todo:
        spec = todo.pop()
        out = history._pathspec_git("ls-files", "-z", "--others", "--exclude-standard", paths=spec, binary=True)
        # Without --directory git lists every untracked file, and an embedded repository as "dir/".
        repos = sorted(_path(name[:-1]) for name in out.split(b"\0") if name.endswith(b"/"))
        if set(repos) & set(found):
            raise GitError(f"{history.work_tree}: cannot remove the .git of embedded repositories {repos}")
        for rel in repos:
            remove_embedded_git(history.work_tree, rel)
        found += repos
        if repos:
            todo.append(repos)
    return found


def changed_gitlinks(history: Any, parent: str) -> list[str]:
    """Index entries that are gitlinks new or changed since `parent` (the index against a tree, no work
    tree: the cost follows the change)."""
    fields = history.git("diff-index", "--cached", "-z", "--raw", "--no-renames", "--ignore-submodules=none",
                         parent, binary=True).split(b"\0")
    return sorted(_path(name) for meta, name in zip(fields[0::2], fields[1::2])
                  if meta.split(b" ")[1:2] == [b"160000"])


def remove_embedded_git(work_tree: Path, rel: str) -> None:
    """rel/.git, a directory, a file or a link: removed, never followed."""
    path = work_tree
    for part in rel.split("/"):
        path = path / part
        if path.is_symlink():
            raise GitError(f"{work_tree}: {rel} has a link in its path")
    remove_tree(path / ".git")


def _path(raw: bytes) -> str:
    return raw.decode(errors="surrogateescape")


def remove_tree(path: Path) -> None:
    """Whatever is at `path` removed (a link as itself, never followed), however a role left it: directories
    without permission for hoh's user, deeper than a path or Python's recursion can reach. Each directory's
    entries are moved up into `path` before it goes, so no path grows past `path/dir/entry`."""
    if not os.path.lexists(path):
        return
    own_dir(path.parent)
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        path.unlink()
        return
    own_dir(path)
    moved = 0
    todo = os.listdir(path)
    while todo:
        name = todo.pop()
        child = path / name
        if not stat.S_ISDIR(os.lstat(child).st_mode):
            child.unlink()
            continue
        own_dir(child)
        for name in os.listdir(child):  # its entries up into `path`, under names no entry there has
            while os.path.lexists(up := path / f".hoh-removing-{moved}"):
                moved += 1
            os.rename(child / name, up)
            todo.append(up.name)
        child.rmdir()
    path.rmdir()


def own_dir(directory: Path) -> None:
    """A directory hoh's user may list, enter and change (as root it may already: nothing is changed); a role's
    `chmod` of it is not content (git keeps no directory's mode)."""
    mode = stat.S_IMODE(os.lstat(directory).st_mode)
    if os.geteuid() != 0 and mode & stat.S_IRWXU != stat.S_IRWXU:
        os.chmod(directory, mode | stat.S_IRWXU)
