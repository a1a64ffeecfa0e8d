"""The guard's areas for git dirs: the project's own .git (agents may commit there) and hoh's history.git.

A git dir is checked as a whole, not by parts: every file in it is fingerprinted (by stat, hashed only
when its stat changed) except what git itself rewrites while the repository is used (objects, refs, logs,
the index, HEAD, the state of a merge or rebase in progress), so a planted `commondir`, alternates file,
worktree, config, hook or any other file git has no business making is a violation, and is removed. A link
(or a FIFO) anywhere in a git dir is a violation too: hoh's git must never read or write through one.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Callable

from ..store.git import History
from ..store.gitrun import GitError
from ..store.hashcache import HashCache
from ..store.mirror import ProjectMirror, settled
from .guard import Area, FileArea, Fingerprint, _identity, diff

GUARD, FREE, OPAQUE = "guard", "free", "opaque"
"""A git dir entry is fingerprinted (GUARD), or left to git but searched for links (FREE), or left to git
with only itself checked for being a link (OPAQUE: hoh's history.git objects, which grow with every loop)."""

MIRROR_FREE = re.compile(
    r"(refs|logs|rebase-merge|rebase-apply|sequencer|rr-cache)(/.*)?"
    r"|objects/([0-9a-f]{2}|pack)(/.*)?|objects/info/(packs|commit-graph|commit-graphs(/.*)?)|info/refs"
    r"|HEAD|ORIG_HEAD|FETCH_HEAD|COMMIT_EDITMSG|packed-refs|index|sharedindex\.[0-9a-f]+|gc\.log|gc\.pid"
    r"|MERGE_(HEAD|MSG|MODE|RR)|AUTO_MERGE|CHERRY_PICK_HEAD|REVERT_HEAD|REBASE_HEAD|SQUASH_MSG|TAG_EDITMSG"
    r"|BISECT_[A-Z_]+|.*\.lock|opencode")
"""What committing, merging, rebasing, stashing, bisecting and gc legitimately write in .git (gc: packs,
info/refs, objects/info/packs and commit-graphs, none of which hoh's git reads: see HARDENING); and
`opencode`, the project id OpenCode keeps there, which git never reads."""


def mirror_kind(rel: str) -> str:
    return FREE if MIRROR_FREE.fullmatch(rel) else GUARD


HISTORY_OWN = {"index", "view-index", "state-index", "seal-index", "view-commit"}
"""hoh's working files in history.git, rewritten by hoh's own git while a guard check runs (a status); a seal's
index of one loop (seal.py), which a kill -9 may leave behind until the next seal."""


def history_kind(rel: str) -> str:
    top, _, rest = rel.partition("/")
    if rel in HISTORY_OWN or (top == "objects" and rest and not rest.startswith("info")):
        return OPAQUE
    if not rest and (rel.startswith("tmp") or rel.endswith(".msg")):
        return OPAQUE  # hoh's temporary files (a concurrent `hoh status --verify` makes a tmp dir)
    if not rest and rel.startswith("sharedindex."):
        return OPAQUE  # a split state-index's shared index (older workspaces); git checks it against its hash
    return GUARD


def git_dir_fingerprint(root: Path, kind: Callable[[str], str], cache: HashCache) -> Fingerprint:
    """Like `fingerprint`, for a git dir: what `kind` does not guard is left out, but a link never is."""
    if not root.is_dir() or root.is_symlink():
        return {}
    result: Fingerprint = {}
    stack = [(str(root), "", GUARD)]
    while stack:
        directory, prefix, parent = stack.pop()
        if parent == FREE:
            for name, ident, is_dir in _free_listing(directory):
                if is_dir:
                    stack.append((os.path.join(directory, name), prefix + name + "/", FREE))
                else:
                    result[prefix + name] = ident
            continue
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            rel = prefix + entry.name
            which = parent if parent == FREE else kind(rel)
            if entry.is_symlink():
                result[rel] = "link:" + os.readlink(entry.path)
            elif which != GUARD and not (entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False)):
                result[rel] = "special:"  # a FIFO where git expects a file would hang hoh's git
            elif which == GUARD:
                st = entry.stat(follow_symlinks=False)
                result[rel] = _identity(entry.path, st, cache)
                if stat.S_ISDIR(st.st_mode):
                    stack.append((entry.path, rel + "/", GUARD))
            elif which == FREE and entry.is_dir(follow_symlinks=False):
                stack.append((entry.path, rel + "/", FREE))
    return result


_FREE_DIRS: dict[str, tuple[tuple[int, int, int, int], list[tuple[str, str, bool]]]] = {}
"""A directory git writes (objects/, refs/, logs/) → (its identity when listed, its links, specials and subdirectories):
listed again only when it changed, so the loose objects and refs that every loop adds are not read around every
attempt. Any entry made, removed or renamed in a directory changes its ctime, which no one can set back."""


def _free_listing(directory: str) -> list[tuple[str, str, bool]]:
    """(name, identity, is a directory) of what a FREE directory holds that the fingerprint keeps: its links and
    specials (FIFOs, sockets), and its subdirectories to descend into; regular files are git's."""
    try:
        st = os.lstat(directory)  # before the listing: a change after it changes the identity
    except OSError:
        return []
    if not stat.S_ISDIR(st.st_mode):
        return []  # its parent's listing changed with it, and says what it is now
    key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
    if (known := _FREE_DIRS.get(directory)) is not None and known[0] == key:
        return known[1]
    found = []
    try:
        for entry in os.scandir(directory):
            if entry.is_symlink():
                found.append((entry.name, "link:" + os.readlink(entry.path), False))
            elif entry.is_dir(follow_symlinks=False):
                found.append((entry.name, "", True))
            elif not entry.is_file(follow_symlinks=False):
                found.append((entry.name, "special:", False))  # a FIFO where git expects a file would hang hoh's git
    except OSError:
        return found
    if settled(st):  # else it may change within the same tick
        _FREE_DIRS[directory] = (key, found)
    return found


class GitDirFiles(FileArea):
    """A git dir's guarded files, restored from bytes saved before the role ran (FileArea's way)."""

    def __init__(self, name: str, root: Path, kind: Callable[[str], str], cache: HashCache | None,
                 keep_bytes: Callable[[str], bool] = lambda rel: True):
        super().__init__(name, root, [], keep_bytes=keep_bytes, cache=cache)
        self.kind = kind

    def fingerprint(self) -> Fingerprint:
        return git_dir_fingerprint(self.root, self.kind, self.cache)

    def changes(self, snap) -> list[str]:
        """FileArea's changes, and an empty directory made or removed too: in a git dir one can matter
        (a `commondir` or `objects/info/alternates` directory breaks every git command there)."""
        before, after = snap[0], self.fingerprint()

        def bare_dirs(made: set[str], where: Fingerprint) -> list[str]:
            holding = {q.rsplit("/", n)[0] for q in made for n in range(1, q.count("/") + 1)}
            return [p for p in sorted(made) if where[p].startswith("dir:") and p not in holding]

        return (diff(before, after) + [f"created {p}/" for p in bare_dirs(after.keys() - before.keys(), after)]
                + [f"deleted {p}/" for p in bare_dirs(before.keys() - after.keys(), before)])


class MirrorArea(Area):
    """The project's own .git. The Developer may commit in it, but not break it, replace it, change any
    file git does not write as a repository (a config, hook, exclude, commondir or alternates file would
    change what gets frozen, or run code as hoh) or move hoh's loop tags; a read-only role may not change
    it at all. Its refs are read without git, and its files are put back before hoh runs git there."""

    def __init__(self, mirror: ProjectMirror, head: str, strict: bool, published_tags: Callable[[], dict[str, str]],
                 cache: HashCache | None = None):
        super().__init__("project .git")
        self.mirror, self.head, self.strict, self.published_tags = mirror, head, strict, published_tags
        # Submodules' repositories (modules/) are guarded but not held in memory: they can be large.
        self.files = GitDirFiles("project .git", mirror.git_dir, mirror_kind, cache,
                                 keep_bytes=lambda rel: not rel.startswith("modules/"))

    def _replaced(self) -> list[str]:
        git_dir = self.mirror.git_dir
        if git_dir.is_symlink() or (git_dir.exists() and not git_dir.is_dir()):
            return ["replaced .git with a link or a file"]
        return [] if git_dir.is_dir() else ["deleted .git"]

    def snapshot(self):
        self.published = self.published_tags()
        self.mirror.accepted_config()  # known before the role runs, whatever it does to history.git
        refs = None
        if self.strict and not self._replaced() and self.mirror.exists():
            try:
                head, found = self.mirror.refs()
                refs = (head, found) if not self.mirror.ref_problems(head, found, self.published) else None
            except OSError:
                refs = None
        return self.files.snapshot(), refs

    def _drop_mount_points(self, before: Fingerprint) -> None:
        """A harness's own sandbox (Claude Code's) mounts over git's configuration paths that do not exist, which
        leaves them behind as empty files and directories (`config.worktree`, `objects/info/alternates`,
        `remotes/`). An empty one says nothing, but an empty `commondir` breaks git: each is removed, deepest
        first, and is no violation."""
        for rel in sorted(self.files.fingerprint().keys() - before.keys(), key=lambda r: -r.count("/")):
            path = self.mirror.git_dir / rel
            if path.is_symlink():
                continue
            if path.is_file() and path.stat().st_size == 0:
                path.unlink()
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()

    def changes(self, snap) -> list[str]:
        if found := self._replaced():
            return found
        self._drop_mount_points(snap[0][0])
        if found := self.files.changes(snap[0]) or self.mirror.plain_problems():
            return found  # nothing runs git there until it is put back
        if not self.mirror.exists():
            return ["deleted .git"]
        try:
            head, refs = self.mirror.refs()
        except OSError:
            return ["broke .git (its refs cannot be read)"]
        found = self.mirror.ref_problems(head, refs, self.published)
        if not found and snap[1] is not None and (head, refs) != snap[1]:
            found = ["changed refs (commits, branches or tags)"]
        return found

    def restore(self, snap, changes: list[str]) -> None:
        if not self._replaced():  # never restore files through a link
            self.files.restore(snap[0], [])
        try:
            anew = self.mirror.rebuild(self.published, self.head)
        except GitError:  # what it holds cannot be fetched back (its objects were moved away)
            anew = self.mirror.rebuild(self.published, self.head, anew=True)
        if anew and snap[0][0]:  # the project's own hooks and info go back in; its config is hoh's record
            self.files.restore(snap[0], [])
            self.mirror.restore_config()
        self.unrestorable += self.files.unrestorable
        self.files.unrestorable = []


class HistoryArea(Area):
    """history.git: only hoh writes there. Everything a role could plant or change is guarded (config,
    HEAD, refs, packed-refs, info/, hooks/, commondir, objects/info/, worktrees/, any new file), all but
    the objects themselves (content-addressed: a planted one changes no commit hoh names) and hoh's own
    working files. Read as files (by stat, with the run's hash cache), not through git."""

    def __init__(self, history: History, cache: HashCache | None = None):
        super().__init__("history")
        self.files = GitDirFiles("history", history.git_dir, history_kind, cache)

    def snapshot(self):
        return self.files.snapshot()

    def changes(self, snap) -> list[str]:
        return self.files.changes(snap)

    def restore(self, snap, changes: list[str]) -> None:
        self.files.restore(snap, [])
        self.unrestorable += self.files.unrestorable
        self.files.unrestorable = []
