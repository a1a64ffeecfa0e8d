"""The project's history: an authoritative repository in the workspace, the project dir its work tree.

    WORKSPACE/history.git    bare repository only hoh writes: loop commits on `main`, tags loop-NNNN,
                             the project's own refs backed up under refs/project/, two indexes
                             (`index` for the project dir, `view-index` for QA's candidate view)
    PROJECT/                 the work tree: WORKSPACE/project, or an existing dir (`--project DIR`)
    PROJECT/.git             the project's own repository, which agents may use (`ProjectMirror`)

Commits carry a fixed identity and a date derived from the loop number, so the same trees give
the same commit ids whether or not the run was interrupted and resumed in between. No role can
write history.git (the OS jail mounts it read-only, the guard checks its refs), so nothing an
agent does in PROJECT/.git can lose a loop.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ..errors import HohError
from ..harness.process import call

GIT_TIMEOUT_SECONDS = 1800
EPOCH = 1_700_000_000  # 2023-11-14; commit dates are EPOCH + loop, never the wall clock
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
BRANCH = "main"
# A work tree of tens of thousands of files: git's untracked cache skips directories that did not change.
FAST = ("-c", "core.untrackedCache=true", "-c", "gc.auto=0")


class GitError(HohError):
    pass


def git_env(loop: int = 0, index: Path | None = None) -> dict[str, str]:
    """A git environment that ignores the user's and the system's configuration: same input, same commits."""
    date = f"@{EPOCH + loop} +0000"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="hoh", GIT_AUTHOR_EMAIL="hoh@localhost", GIT_COMMITTER_NAME="hoh",
               GIT_COMMITTER_EMAIL="hoh@localhost", GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date,
               GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0")
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    return env


def run_git(args: list[str], *, cwd: Path, loop: int = 0, index: Path | None = None, binary: bool = False,
            max_stdout: int = 256 * 1024 * 1024) -> str | bytes:
    argv = ["git", "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false",
            "-c", "core.autocrlf=false", "-c", "core.fsmonitor=false", *FAST, *args]
    try:
        proc = call(argv, cwd=cwd, env=git_env(loop, index), timeout=GIT_TIMEOUT_SECONDS, max_stdout=max_stdout)
    except OSError as err:
        raise GitError(f"git {' '.join(args[:3])} could not run in {cwd}: {err}") from None
    if not proc.ok:
        why = "timed out" if proc.exit_code is None else (proc.stderr.strip()
                                                           or proc.stdout[-2000:].decode(errors="replace").strip())
        raise GitError(f"git {' '.join(args)} failed in {cwd}: {why}")
    return proc.stdout if binary else proc.stdout.decode(errors="surrogateescape").strip()


class History:
    """hoh's view: history.git with the project dir as its work tree."""

    def __init__(self, git_dir: Path, work_tree: Path):
        self.git_dir, self.work_tree = git_dir, work_tree
        self._trees: dict[str, str] = {}  # commit → tree: commits never change
        self._tags: dict[str, str] | None = None
        self.clean_at: str | None = None
        """The commit the work tree is known to equal, exactly (hoh made it so and no role has run since
        that might change it: the Runtime clears this when a writing role starts); None when unknown."""
        self.view_clean = False
        """QA's view is known to equal its index: set after moving it and when QA's guard finds it unchanged
        after an attempt; cleared while QA runs and whenever a role runs without the jail."""
        self.known_status: dict[tuple[Path, str], list[str]] = {}
        """(work tree, commit) → its untracked and ignored entries, as a guard check last found them
        while the tree was known clean at that commit: the next role's snapshot needs no new scan."""

    @property
    def index(self) -> Path:
        return self.git_dir / "index"

    @property
    def view_index(self) -> Path:
        return self.git_dir / "view-index"

    def git(self, *args: str, loop: int = 0, work_tree: Path | None = None, index: Path | None = None,
            binary: bool = False) -> str | bytes:
        tree = work_tree or self.work_tree
        return run_git(["--git-dir", str(self.git_dir), "--work-tree", str(tree), *args], cwd=tree, loop=loop,
                       index=index, binary=binary)

    # ---- creation ------------------------------------------------------------------------------
    def create(self, message: str, exclude: list[str] = ()) -> str:
        """Make history.git and commit the work tree as it is now (empty, or an existing project's
        files) as A_0, a child of the project's own HEAD when it has one. `exclude` holds gitignore
        patterns that are never part of the project (a workspace inside it)."""
        self.git_dir.parent.mkdir(parents=True, exist_ok=True)
        run_git(["init", "-q", "--bare", "-b", BRANCH, str(self.git_dir)], cwd=self.git_dir.parent)
        if exclude:
            (self.git_dir / "info").mkdir(exist_ok=True)
            (self.git_dir / "info" / "exclude").write_text("".join(f"{p}\n" for p in exclude))
        parent = ProjectMirror(self.work_tree, self).backup_refs()
        self.git("read-tree", "--empty")
        self.git("add", "-A")
        return self.commit(message, parent=parent, loop=0)

    # ---- queries -------------------------------------------------------------------------------
    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def tree_of(self, commit: str) -> str:
        if commit not in self._trees:
            self._trees[commit] = self.git("rev-parse", f"{commit}^{{tree}}")
        return self._trees[commit]

    def tags(self) -> dict[str, str]:
        """tag name → commit, as hoh wrote them (read once, then kept up to date by `tag`)."""
        if self._tags is None:
            out = self.git("for-each-ref", "--format=%(refname:short) %(objectname)", "refs/tags")
            self._tags = dict(line.split(" ", 1) for line in out.splitlines())
        return dict(self._tags)

    def refs(self) -> str:
        return self.git("for-each-ref", "--format=%(refname) %(objectname)")

    # ---- the work tree -------------------------------------------------------------------------
    def clear_stale_locks(self) -> None:
        """A kill -9 during a git command leaves *.lock files; we hold the workspace lock, so they are stale."""
        for lock in (self.git_dir / "index.lock", self.git_dir / "view-index.lock", self.git_dir / "HEAD.lock",
                     self.git_dir / "packed-refs.lock", self.git_dir / "refs" / "heads" / f"{BRANCH}.lock"):
            lock.unlink(missing_ok=True)

    def reset_to(self, commit: str) -> None:
        """Make the work tree exactly `commit`: tracked files restored, untracked ones removed. Files the
        project's .gitignore ignores stay (a user's .env, node_modules, build caches): they are never
        part of a candidate. The project's own .git is never touched."""
        if self.clean_at == commit:
            return  # nothing has run in the project since hoh last made it this commit
        self.clear_stale_locks()
        self.git("reset", "-q", "--hard", commit)
        self.git("clean", "-q", "-ffd")
        self.clean_at = commit

    def empty_worktree(self) -> None:
        """Remove every file but .git (warm start off: the Developer starts from nothing)."""
        for child in self.work_tree.iterdir():
            if child.name == ".git":
                continue
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()

    def commit_all(self, parent: str, message: str, loop: int) -> str:
        """Commit the whole work tree as a child of `parent`; idempotent for equal trees."""
        self.clear_stale_locks()
        self.git("reset", "-q", "--soft", parent)
        self.git("add", "-A")
        commit = self.commit(message, parent=parent, loop=loop)
        self.clean_at = commit
        return commit

    def commit(self, message: str, *, parent: str | None, loop: int) -> str:
        """Commit the index; the message goes through a file, so no length can overflow argv."""
        tree = self.git("write-tree")
        if tree == EMPTY_TREE:
            self.git("mktree")  # git never stores the empty tree by itself; fsck would miss it
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=self.git_dir, suffix=".msg") as fh:
            fh.write(message)
            fh.flush()
            commit = self.git("commit-tree", tree, *(["-p", parent] if parent else []), "-F", fh.name, loop=loop)
        self.git("update-ref", f"refs/heads/{BRANCH}", commit)
        self.git("symbolic-ref", "HEAD", f"refs/heads/{BRANCH}")
        return commit

    def tag(self, name: str, commit: str) -> None:
        self.git("update-ref", f"refs/tags/{name}", commit)
        # One packed-refs file instead of a loose file per loop: the guard reads hoh's refs around every
        # attempt, and that must not grow with the number of loops.
        self.git("pack-refs", "--all")
        if self._tags is not None:
            self._tags[name] = commit

    # ---- QA's view -----------------------------------------------------------------------------
    def update_view(self, dest: Path, commit: str) -> None:
        """Make `dest` a plain copy of `commit` (no .git: QA gets no handle on history), moving it
        from the candidate it held before rather than writing it anew: only changed files are
        touched, so the cost follows the change, not the project's size."""
        dest.mkdir(parents=True, exist_ok=True)
        index = self.view_index
        (self.git_dir / "view-index.lock").unlink(missing_ok=True)
        if index.exists() and (self.view_clean or self._view_is_clean(dest)):
            self.git("read-tree", "-m", "-u", self._view_commit(), commit, work_tree=dest, index=index)
        else:
            index.unlink(missing_ok=True)
            for child in dest.iterdir():
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
            self.git("read-tree", commit, work_tree=dest, index=index)
            self.git("checkout-index", "--all", "--force", work_tree=dest, index=index)
        (self.git_dir / "view-commit").write_text(commit + "\n")
        self.view_clean = True

    def _view_commit(self) -> str:
        return (self.git_dir / "view-commit").read_text().strip()

    def _view_is_clean(self, dest: Path) -> bool:
        """Nothing in the view differs from its index (a tampered view is rebuilt, never moved)."""
        return (self.git_dir / "view-commit").exists() and not self.view_changes(dest)

    def export(self, commit: str, dest: Path) -> None:
        """A fresh plain copy of `commit` in `dest`, through a throwaway index (for graders)."""
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.git_dir) as tmp:
            index = Path(tmp) / "index"
            self.git("read-tree", commit, work_tree=dest, index=index)
            self.git("checkout-index", "--all", "--force", work_tree=dest, index=index)

    def changes(self, work_tree: Path, index: Path, *pathspec: str) -> list[str]:
        """What differs between `work_tree` and `index`: "modified a.py", "deleted b", "created c/".

        git's stat cache does the work, so only files whose stat changed are read. Untracked
        directories (ignored ones included) count as one entry each: a new file inside a directory
        that was already untracked before is not seen, and cannot reach a candidate either."""
        return self.modified(work_tree, index, *pathspec) + self.created(work_tree, index, *pathspec)

    def modified(self, work_tree: Path, index: Path, *pathspec: str) -> list[str]:
        """Tracked files that differ from `index` ("modified a", "deleted b"), by stat, re-hashing only
        what stat flags, so a touch is no change."""
        spec = ["--", *pathspec] if pathspec else []

        def differing() -> list[str]:
            fields = self.git("diff-files", "--name-status", "-z", "--no-renames", *spec, work_tree=work_tree,
                              index=index, binary=True).split(b"\0")
            return [f"{'deleted' if status == b'D' else 'modified'} {_path(name)}"
                    for status, name in zip(fields[0::2], fields[1::2]) if name]

        found = differing()
        if found:
            self.git("update-index", "-q", "--refresh", "--ignore-missing", work_tree=work_tree, index=index)
            found = differing()
        return found

    def created(self, work_tree: Path, index: Path, *pathspec: str) -> list[str]:
        """Files and directories not in `index` (ignored ones included), untracked directories as one entry."""
        spec = ["--", *pathspec] if pathspec else []
        out = self.git("ls-files", "-z", "--others", "--directory", *spec, work_tree=work_tree, index=index,
                       binary=True)
        return [f"created {_path(name)}" for name in out.split(b"\0") if name]

    def status(self, work_tree: Path, index: Path) -> list[str]:
        """`changes` in one git call, for a work tree whose index equals HEAD (the project after a reset,
        QA's view of the commit HEAD names): `git status` also compares the index with HEAD, cheaply
        then, and its differences are not the work tree's, so they are left out."""
        out = self.git("status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=normal",
                       "--ignored=matching", work_tree=work_tree, index=index, binary=True)
        found = []
        for entry in out.split(b"\0"):
            if len(entry) < 4:
                continue
            code, path = entry[:2], _path(entry[3:])
            if code in (b"??", b"!!"):
                found.append(f"created {path}")
            elif code[1:] == b"D":
                found.append(f"deleted {path}")
            elif code[1:] != b" ":
                found.append(f"modified {path}")
        return found

    def view_changes(self, dest: Path) -> list[str]:
        return self.status(dest, self.view_index)

    def work_tree_changes(self) -> list[str]:
        return self.status(self.work_tree, self.index)


def _path(raw: bytes) -> str:
    return raw.decode(errors="surrogateescape")


class ProjectMirror:
    """PROJECT/.git: the project's own repository, for the user and for agents (git log, diff, commit).

    hoh publishes each loop's commit and tag into it and points its current branch there; its
    original refs are backed up in history.git (refs/project/*). A role may commit in it, but a
    deleted or broken repository, or a moved loop tag, is rebuilt from history.git. Disabled for an
    existing project that had no .git: hoh never adds one to someone's directory."""

    def __init__(self, work_tree: Path, history: History, enabled: bool = True):
        self.work_tree, self.history, self.enabled = work_tree, history, enabled
        self.git_dir = work_tree / ".git"

    def git(self, *args: str) -> str:
        return run_git(["--git-dir", str(self.git_dir), "--work-tree", str(self.work_tree), *args],
                       cwd=self.work_tree)

    def exists(self) -> bool:
        return (self.git_dir / "HEAD").is_file()

    def backup_refs(self) -> str | None:
        """Copy the project's own commits into history.git under refs/project/; return its HEAD commit."""
        if not self.exists():
            return None
        try:
            head = self.git("rev-parse", "--verify", "-q", "HEAD")
        except GitError:
            return None  # a repository without commits
        self.history.git("fetch", "-q", "--no-tags", str(self.git_dir), "+refs/*:refs/project/*")
        return head or None

    def _head(self) -> str:
        return (self.git_dir / "HEAD").read_text(errors="replace").strip()

    def publish(self, commit: str, tag: str | None = None, index: Path | None = None) -> None:
        """Point the project's current branch (and its index) at a loop's commit; tag it. `index`, when
        given, is an index of exactly that commit over this work tree (hoh's own, just committed): a
        copy of it spares rebuilding one."""
        if not self.enabled:
            return
        if not self.exists():
            run_git(["init", "-q", "-b", BRANCH, str(self.work_tree)], cwd=self.work_tree)
        head = self._head()
        on_branch = head.startswith("ref: refs/heads/")
        branch = head[5:] if on_branch else f"refs/heads/{BRANCH}"
        refspecs = [f"+{commit}:{branch}"] + ([f"+refs/tags/{tag}:refs/tags/{tag}"] if tag else [])
        self.git("fetch", "-q", "--no-tags", "--update-head-ok", str(self.history.git_dir), *refspecs)
        if not on_branch:  # a detached HEAD: give it the branch again
            self.git("symbolic-ref", "HEAD", branch)
        if index is not None:
            copy = self.git_dir / "index.hoh-copy"
            shutil.copyfile(index, copy)
            os.replace(copy, self.git_dir / "index")
        else:
            self.git("read-tree", commit)  # the index follows; the work tree is that commit already

    def refs(self) -> tuple[str, dict[str, str]]:
        """(HEAD as written in .git/HEAD, every ref → commit), with one git call."""
        out = self.git("for-each-ref", "--format=%(refname) %(objectname)")
        return self._head(), dict(line.split(" ", 1) for line in out.splitlines())

    def problems(self, published: dict[str, str]) -> list[str]:
        """What a role broke: the repository itself, or hoh's loop tags (its own commits are its business)."""
        if self.git_dir.is_symlink() or (self.git_dir.exists() and not self.git_dir.is_dir()):
            return ["replaced .git with a link or a file"]  # hoh's own git calls must never follow it
        if not self.exists():
            return ["deleted .git"]
        try:
            head, refs = self.refs()
        except (GitError, OSError):
            return ["broke .git (its refs cannot be read)"]
        return self.ref_problems(head, refs, published)

    @staticmethod
    def ref_problems(head: str, refs: dict[str, str], published: dict[str, str]) -> list[str]:
        if head.startswith("ref: ") and head[5:] not in refs:
            return [f"broke .git (HEAD names {head[5:]}, which does not exist)"]
        tags = {ref[10:]: sha for ref, sha in refs.items() if ref.startswith("refs/tags/loop-")}
        return [f"moved or deleted tag {name}" for name, commit in sorted(published.items())
                if tags.get(name) != commit] + [f"created tag {name}" for name in sorted(tags.keys() - published.keys())]

    def rebuild(self, published: dict[str, str], head: str) -> None:
        """Put the repository back from history.git: its original refs, hoh's tags, HEAD at `head`."""
        broken = self.problems({})
        if broken and not broken[0].startswith(("moved", "created")):
            if self.git_dir.is_symlink() or (self.git_dir.exists() and not self.git_dir.is_dir()):
                self.git_dir.unlink()
            shutil.rmtree(self.git_dir, ignore_errors=True)
            run_git(["init", "-q", "-b", BRANCH, str(self.work_tree)], cwd=self.work_tree)
            self.git("fetch", "-q", "--no-tags", str(self.history.git_dir), "+refs/project/*:refs/*")
        for ref in self.refs()[1]:
            if ref.startswith("refs/tags/loop-") and ref[10:] not in published:
                self.git("update-ref", "-d", ref)
        if published:
            self.git("fetch", "-q", "--no-tags", str(self.history.git_dir),
                     *(f"+refs/tags/{name}:refs/tags/{name}" for name in published))
        self.publish(head)
