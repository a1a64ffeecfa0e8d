"""PROJECT/.git: the project's own repository, for the user and for agents (git log, diff, commit).

hoh publishes each loop's commit and tag into it and points its current branch there; its original refs
are backed up in history.git (refs/project/*). A role may commit in it, but a deleted or broken repository,
or a moved loop tag, is rebuilt from history.git.

A role may also have written its config. Configuration on the command line beats a repository's for the
same key (`git.HARDENING`), but what `-c` cannot undo (a list like `url.*.insteadOf`, a remote named after
hoh's path with its own `uploadpack`, a filter driver) only a repository's own config can set. So hoh runs
git there only on a plain repository whose config is the one hoh accepted: recorded in history.git
(`project-config`) when hoh first met the repository (a user's, or one hoh made), so no role can change
it. The guard reads its refs without git.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import time
from contextlib import contextmanager
from pathlib import Path

from ..fsutil import atomic_write_bytes
from .git import BRANCH, History
from .gitrun import GitError, run_git

PROJECT_CONFIG = "project-config"
"""In history.git: the project's .git/config as hoh accepted it (hoh made the repository, or met it)."""
MAX_REFS_BYTES = 64 * 1024 * 1024
OID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
RACY_NS = 2_000_000_000
"""A file changed this recently may change again within the same timestamp tick, unseen: what was listed or read
of it is not kept for the next look (git's "racy" rule). This long where file times are whole seconds (NFS, FAT);"""
TICK_NS = 20_000_000
"""elsewhere Linux stamps file times from its coarse clock, which moves a tick (≤ 10 ms at HZ ≥ 100) at a time."""


def settled(st: os.stat_result) -> bool:
    """Whether what was listed or read of this file or directory may be kept: any change from now on moves its
    times. state/loops gets a new loop's directory at each loop's start and is looked at many times then."""
    whole_seconds = st.st_mtime_ns % 1_000_000_000 == 0 and st.st_ctime_ns % 1_000_000_000 == 0
    return time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) >= (RACY_NS if whole_seconds else TICK_NS)


class ProjectMirror:
    """PROJECT/.git: the project's own repository, for the user and for agents (git log, diff, commit).

    hoh publishes each loop's commit and tag into it and points its current branch there; its
    original refs are backed up in history.git (refs/project/*). A role may commit in it, but a
    deleted or broken repository, or a moved loop tag, is rebuilt from history.git. Disabled for an
    existing project that had no .git: hoh never adds one to someone's directory.

    hoh runs git there only on a plain repository (`plain_problems`) whose config is the one hoh
    accepted; the guard reads its refs without git (`refs`)."""

    ELSEWHERE = ("commondir", "objects/info/alternates", "objects/info/http-alternates", "worktrees",
                 "config.worktree")
    """What makes git read a configuration, objects or refs from another place."""
    NO_LINKS = ("HEAD", "config", "info", "hooks", "objects", "objects/info", "objects/pack", "refs", "logs",
                "packed-refs", "index")

    def __init__(self, work_tree: Path, history: History, enabled: bool = True):
        self.work_tree, self.history, self.enabled = work_tree, history, enabled
        self.git_dir = work_tree / ".git"
        self._config: bytes | None = None
        self._packed: tuple[bytes, dict[str, str]] | None = None
        """packed-refs' bytes when last parsed, and what it held."""
        self._sound_refs: tuple[str, dict[str, str], dict[str, str]] | None = None
        """The last (HEAD, refs, published tags) `ref_problems` found nothing wrong with."""

    def git(self, *args: str, stdin: bytes | None = None) -> str:
        self.require_plain()
        return run_git(["--git-dir", str(self.git_dir), "--work-tree", str(self.work_tree), *args],
                       cwd=self.work_tree, stdin=stdin)

    def exists(self) -> bool:
        return (self.git_dir / "HEAD").is_file()

    # ---- what hoh's git may read -----------------------------------------------------------------------
    def accepted_config(self) -> bytes | None:
        """The .git/config hoh's git may read: recorded in history.git when hoh first met the repository
        (a user's, or one hoh made), so no role can change it; None while there is neither."""
        if self._config is None:
            record = self.history.git_dir / PROJECT_CONFIG
            if not record.is_file():
                if (found := self._config_bytes()) is None:
                    return None
                atomic_write_bytes(record, found)
            self._config = record.read_bytes()
        return self._config

    def _config_bytes(self) -> bytes | None:
        path = self.git_dir / "config"
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return b"" if self.git_dir.is_dir() and not self.git_dir.is_symlink() else None
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_REFS_BYTES:
            return None
        return path.read_bytes()

    def plain_problems(self) -> list[str]:
        """Why hoh must not run git on this repository: not a real directory, a pointer to a configuration,
        objects or refs elsewhere, a link among the files git reads, or a config hoh did not accept."""
        g = self.git_dir
        if g.is_symlink() or (os.path.lexists(g) and not g.is_dir()):
            return ["is a link or a file"]
        if not g.is_dir():
            return ["does not exist"]
        found = [f"has {rel}" for rel in self.ELSEWHERE if os.path.lexists(g / rel)]
        found += [f"has a link at {rel}" for rel in self.NO_LINKS if (g / rel).is_symlink()]
        found += [f"has a link at {rel}" for part in ("info", "hooks") for rel in _links_under(g, part)]
        accepted, config = self.accepted_config(), self._config_bytes()
        if config is None or config != accepted:
            found.append("has a config hoh did not accept")
        return found

    def require_plain(self) -> None:
        if found := self.plain_problems():
            raise GitError(f"{self.git_dir}: hoh runs git only on a plain repository with the config it "
                           f"accepted; this one {', '.join(found)}: make it one (a clone without --shared, "
                           f"no worktrees or links in it)")

    # ---- refs, read without git --------------------------------------------------------------------------
    def _head(self) -> str:
        return _small_file(self.git_dir / "HEAD").decode(errors="surrogateescape").strip()

    def refs(self) -> tuple[str, dict[str, str]]:
        """(HEAD as written in .git/HEAD, every ref → the object it names), from packed-refs and the loose
        files under refs/, read in Python: checking a role's repository runs no git there. Raises OSError
        when they cannot be read (a link among them, a packed-refs past MAX_REFS_BYTES)."""
        refs = self._packed_refs()
        symbolic: dict[str, str] = {}
        for name in _loose_refs(self.git_dir):
            text = _small_file(self.git_dir / name).decode(errors="surrogateescape").strip()
            if text.startswith("ref: "):
                symbolic[name] = text[5:]
            elif OID.fullmatch(text):
                refs[name] = text
        for name, target in symbolic.items():
            for _ in range(5):  # git's own limit on symbolic refs to symbolic refs
                target = symbolic.get(target, target)
            if target in refs:
                refs[name] = refs[target]
        return self._head(), refs

    def _packed_refs(self) -> dict[str, str]:
        """packed-refs as a dict, parsed again only when its bytes changed (hoh packs every loop's tag there, so
        it grows with the loops and is read around every attempt: a read and a compare, not a parse; no stat is
        trusted, since a role may rewrite it within a timestamp's tick)."""
        packed = self.git_dir / "packed-refs"
        if not os.path.lexists(packed):
            self._packed = None
            return {}
        with _small_fd(packed, MAX_REFS_BYTES) as (fd, st):
            data = _read_all(fd, st.st_size)
        if self._packed is not None and self._packed[0] == data:
            return dict(self._packed[1])
        refs: dict[str, str] = {}
        for line in data.splitlines():
            oid, _, name = line.decode(errors="surrogateescape").partition(" ")
            if OID.fullmatch(oid) and name:  # not the header, nor a peeled "^oid" line
                refs[name] = oid
        self._packed = (data, dict(refs))
        return refs

    # ---- hoh's writes ------------------------------------------------------------------------------------
    def backup_refs(self) -> str | None:
        """Copy the project's own commits into history.git under refs/project/; return its HEAD commit."""
        if not self.exists():
            return None
        self.require_plain()  # history.git's fetch runs upload-pack there
        head, refs = self.refs()
        commit = refs.get(head[5:]) if head.startswith("ref: ") else head
        if not commit or not OID.fullmatch(commit):
            return None  # a repository without commits
        self.history.git("fetch", "-q", "--no-tags", str(self.git_dir), "+refs/*:refs/project/*")
        return commit

    def _init(self) -> None:
        """A new repository, with the configuration hoh accepted for this project if it has one."""
        run_git(["init", "-q", "-b", BRANCH, str(self.work_tree)], cwd=self.work_tree)
        accepted = self.accepted_config()  # this new one's, when hoh had none yet
        if accepted is not None and accepted != self._config_bytes():
            atomic_write_bytes(self.git_dir / "config", accepted)

    def _clear_stale_locks(self, *refs: str) -> None:
        """A role killed inside a git command leaves *.lock files; no role runs while hoh publishes."""
        for name in ("index.lock", "HEAD.lock", "packed-refs.lock", *(f"{ref}.lock" for ref in refs)):
            (self.git_dir / name).unlink(missing_ok=True)

    def publish(self, commit: str, tag: str | None = None, index: Path | None = None,
                parent: str | None = None) -> None:
        """Point the project's current branch (and its index) at a loop's commit; tag it. `index`, when
        given, is an index of exactly that commit over this work tree (hoh's own, just committed): a
        copy of it spares rebuilding one. `parent`: the commit's parent in history.git (the loop's base)."""
        if not self.enabled:
            return
        if not os.path.lexists(self.git_dir):
            self._init()
        self.require_plain()
        head = self._head()
        on_branch = head.startswith("ref: refs/heads/") and _valid_ref(head[5:])
        branch = head[5:] if on_branch else f"refs/heads/{BRANCH}"
        self._clear_stale_locks(branch, *([f"refs/tags/{tag}"] if tag else []))
        if self._unpack_new_objects(commit, parent):
            moves = [f"update {branch} {commit}"] + ([f"update refs/tags/{tag} {commit}"] if tag else [])
            self.git("update-ref", "--stdin", stdin="".join(f"{line}\n" for line in moves).encode())
        else:
            refspecs = [f"+{commit}:{branch}"] + ([f"+refs/tags/{tag}:refs/tags/{tag}"] if tag else [])
            self.git("fetch", "-q", "--no-tags", "--update-head-ok", str(self.history.git_dir), *refspecs)
        if not on_branch:  # a detached HEAD: give it the branch again
            self.git("symbolic-ref", "HEAD", branch)
        # The tags into packed-refs (git's default: tags, and what was packed already), not a loose file per
        # loop: the guard reads the refs around every attempt, and that must not grow with the loops.
        self.git("pack-refs")
        if index is not None:
            copy = self.git_dir / "index.hoh-copy"
            shutil.copyfile(index, copy)
            os.replace(copy, self.git_dir / "index")
        else:
            self.git("read-tree", commit)  # the index follows; the work tree is that commit already

    def _unpack_new_objects(self, commit: str, parent: str | None) -> bool:
        """The objects `commit` adds to `parent`, packed by history.git and unpacked here, when this repository
        holds `parent` under one of its refs (the previous loop's tag, as hoh published it), so it has all that
        `parent` reaches. A fetch costs 17-24 ms a loop (its negotiation, a connectivity walk over every ref, the
        repository's maintenance) and grows with the tags; this costs two git processes and what changed."""
        if parent is None:
            return False
        try:
            _, refs = self.refs()
        except OSError:
            return False
        if parent not in refs.values():
            return False
        pack = self.history.git("pack-objects", "--stdout", "--revs", "-q", binary=True,
                                stdin=f"{commit}\n^{parent}\n".encode())
        self.git("unpack-objects", "-q", stdin=pack)
        return True

    def _unusable(self) -> bool:
        if self.plain_problems() or not self.exists():
            return True
        try:
            head, refs = self.refs()
        except OSError:
            return True
        return head.startswith("ref: ") and head[5:] not in refs

    def ref_problems(self, head: str, refs: dict[str, str], published: dict[str, str]) -> list[str]:
        """What is wrong with HEAD and hoh's loop tags among `refs`. The guard asks around every attempt, with as
        many tags as loops: the same refs as the last sound ones are compared whole, not walked again."""
        if self._sound_refs == (head, refs, published):
            return []
        if head.startswith("ref: ") and head[5:] not in refs:
            return [f"broke .git (HEAD names {head[5:]}, which does not exist)"]
        tags = {ref[10:]: sha for ref, sha in refs.items() if ref.startswith("refs/tags/loop-")}
        found = [f"moved or deleted tag {name}" for name, commit in sorted(published.items())
                 if tags.get(name) != commit] + [f"created tag {name}" for name in sorted(tags.keys() - published.keys())]
        if not found:
            self._sound_refs = (head, dict(refs), dict(published))
        return found

    def restore_config(self) -> None:
        """Put back the config hoh accepted, over whatever is there now."""
        accepted = self.accepted_config()
        if self.git_dir.is_dir() and not self.git_dir.is_symlink() and accepted not in (None, self._config_bytes()):
            if (self.git_dir / "config").is_symlink():
                (self.git_dir / "config").unlink()
            atomic_write_bytes(self.git_dir / "config", accepted)

    def rebuild(self, published: dict[str, str], head: str, anew: bool = False) -> bool:
        """Put the repository back from history.git: its original refs, hoh's tags, HEAD at `head`, the config
        hoh accepted; one that is broken, or not plain (what the guard could not put back), is made anew
        (its own commits lost). Returns whether it was."""
        self.restore_config()
        if anew := anew or self._unusable():
            if self.git_dir.is_symlink() or (os.path.lexists(self.git_dir) and not self.git_dir.is_dir()):
                self.git_dir.unlink()
            shutil.rmtree(self.git_dir, ignore_errors=True)
            self._init()
            self.git("fetch", "-q", "--no-tags", str(self.history.git_dir), "+refs/project/*:refs/*")
        for ref in self.refs()[1]:
            if ref.startswith("refs/tags/loop-") and ref[10:] not in published:
                self.git("update-ref", "-d", ref)
        if published:
            self.git("fetch", "-q", "--no-tags", str(self.history.git_dir),
                     *(f"+refs/tags/{name}:refs/tags/{name}" for name in published))
        self.publish(head)
        return anew


def _valid_ref(name: str) -> bool:
    """git's rules for a ref name (check-ref-format), so one a role wrote in HEAD is never a path outside."""
    parts = name.split("/")
    return (len(parts) > 1 and ".." not in name and "@{" not in name and not name.endswith(".")
            and not re.search(r"[\x00-\x20\x7f~^:?*\[\\]", name)
            and all(p and not p.startswith(".") and not p.endswith(".lock") for p in parts))


@contextmanager
def _small_fd(path: Path, limit: int):
    """(fd, its stat) of a small regular file of a role's repository, opened without following a link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO must not block hoh
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            raise OSError(f"{path}: not a small regular file")
        yield fd, st
    finally:
        os.close(fd)


def _read_all(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left > 0 and (chunk := os.read(fd, left)):
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _small_file(path: Path, limit: int = 4096) -> bytes:
    """A file of a role's repository, read without following a link and at most `limit` bytes."""
    with _small_fd(path, limit) as (fd, st):
        return _read_all(fd, st.st_size)


def _loose_refs(git_dir: Path) -> list[str]:
    """Names of the loose ref files under refs/ (lock files left out); a link among them is an OSError."""
    names, stack = [], ["refs"]
    while stack:
        rel = stack.pop()
        try:
            entries = list(os.scandir(git_dir / rel))
        except FileNotFoundError:
            continue
        for entry in entries:
            name = f"{rel}/{entry.name}"
            if entry.is_symlink():
                raise OSError(f"{git_dir / name}: a link among the refs")
            if entry.is_dir():
                stack.append(name)
            elif not name.endswith(".lock"):
                names.append(name)
    return names


def _links_under(git_dir: Path, part: str) -> list[str]:
    found = []
    for dirpath, dirs, files in os.walk(git_dir / part):
        found += [os.path.relpath(os.path.join(dirpath, n), git_dir) for n in dirs + files
                  if os.path.islink(os.path.join(dirpath, n))]
    return found
