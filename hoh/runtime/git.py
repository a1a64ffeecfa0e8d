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
        return self.git("rev-parse", f"{commit}^{{tree}}")

    def tags(self) -> dict[str, str]:
        """tag name → commit."""
        out = self.git("for-each-ref", "--format=%(refname:short) %(objectname)", "refs/tags")
        return dict(line.split(" ", 1) for line in out.splitlines())

    def refs(self) -> str:
        return self.git("for-each-ref", "--format=%(refname) %(objectname)")

    # ---- the work tree -------------------------------------------------------------------------
    def clear_stale_locks(self) -> None:
        """A kill -9 during a git command leaves *.lock files; we hold the workspace lock, so they are stale."""
        for lock in (self.git_dir / "index.lock", self.git_dir / "view-index.lock", self.git_dir / "HEAD.lock",
                     self.git_dir / "refs" / "heads" / f"{BRANCH}.lock"):
            lock.unlink(missing_ok=True)

    def reset_to(self, commit: str) -> None:
        """Make the work tree exactly `commit`: tracked files restored, untracked ones removed. Files the
        project's .gitignore ignores stay (a user's .env, node_modules, build caches): they are never
        part of a candidate. The project's own .git is never touched."""
        self.clear_stale_locks()
        self.git("reset", "-q", "--hard", commit)
        self.git("clean", "-q", "-ffd")

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
        return self.commit(message, parent=parent, loop=loop)

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

    # ---- QA's view -----------------------------------------------------------------------------
    def update_view(self, dest: Path, commit: str) -> None:
        """Make `dest` a plain copy of `commit` (no .git: QA gets no handle on history), moving it
        from the candidate it held before rather than writing it anew: only changed files are
        touched, so the cost follows the change, not the project's size."""
        dest.mkdir(parents=True, exist_ok=True)
        index = self.view_index
        (self.git_dir / "view-index.lock").unlink(missing_ok=True)
        if index.exists() and self._view_is_clean(dest):
            self.git("read-tree", "-m", "-u", self._view_commit(), commit, work_tree=dest, index=index)
        else:
            index.unlink(missing_ok=True)
            for child in dest.iterdir():
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
            self.git("read-tree", commit, work_tree=dest, index=index)
            self.git("checkout-index", "--all", "--force", work_tree=dest, index=index)
        (self.git_dir / "view-commit").write_text(commit + "\n")

    def _view_commit(self) -> str:
        return (self.git_dir / "view-commit").read_text().strip()

    def _view_is_clean(self, dest: Path) -> bool:
        """Nothing in the view differs from its index (a tampered view is rebuilt, never moved)."""
        return (self.git_dir / "view-commit").exists() and not self.changes(dest, self.view_index)

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
        spec = ["--", *pathspec] if pathspec else []
        # Files whose stat changed are re-hashed (and their stat recorded) so a touch is no change.
        self.git("update-index", "-q", "--refresh", "--ignore-missing", work_tree=work_tree, index=index)
        fields = self.git("diff-files", "--name-status", "-z", "--no-renames", *spec, work_tree=work_tree,
                          index=index, binary=True).split(b"\0")
        found = [f"{'deleted' if status == b'D' else 'modified'} {_path(name)}"
                 for status, name in zip(fields[0::2], fields[1::2]) if name]
        created = self.git("ls-files", "-z", "--others", "--directory", *spec, work_tree=work_tree, index=index,
                           binary=True)
        found += [f"created {_path(name)}" for name in created.split(b"\0") if name]
        return found

    def view_changes(self, dest: Path) -> list[str]:
        return self.changes(dest, self.view_index)

    def work_tree_changes(self) -> list[str]:
        return self.changes(self.work_tree, self.index)


def _path(raw: bytes) -> str:
    return raw.decode(errors="surrogateescape")


class ProjectMirror:
    """PROJECT/.git: the project's own repository, for the user and for agents (git log, diff, commit).

    hoh publishes each loop's commit and tag into it and points its current branch there; its
    original refs are backed up in history.git (refs/project/*). A role may commit in it, but a
    deleted or broken repository, or a moved loop tag, is rebuilt from history.git."""

    def __init__(self, work_tree: Path, history: History):
        self.work_tree, self.history = work_tree, history
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

    def publish(self, commit: str, tag: str | None = None) -> None:
        """Point the project's current branch (and its index) at a loop's commit; tag it."""
        if not self.exists():
            run_git(["init", "-q", "-b", BRANCH, str(self.work_tree)], cwd=self.work_tree)
        self.git("fetch", "-q", "--no-tags", str(self.history.git_dir), f"+refs/heads/{BRANCH}:refs/hoh/published")
        self.git("update-ref", "-d", "refs/hoh/published")
        try:
            branch = self.git("symbolic-ref", "-q", "--short", "HEAD")
        except GitError:
            branch = ""  # a detached HEAD: give it a branch again
        self.git("update-ref", f"refs/heads/{branch or BRANCH}", commit)
        if not branch:
            self.git("symbolic-ref", "HEAD", f"refs/heads/{BRANCH}")
        if tag:
            self.git("update-ref", f"refs/tags/{tag}", commit)
        self.git("read-tree", commit)  # the index follows; the work tree is that commit already

    def loop_tags(self) -> dict[str, str]:
        out = self.git("for-each-ref", "--format=%(refname:short) %(objectname)", "refs/tags/loop-*")
        return dict(line.split(" ", 1) for line in out.splitlines())

    def problems(self, published: dict[str, str]) -> list[str]:
        """What a role broke: the repository itself, or hoh's loop tags (its own commits are its business)."""
        if self.git_dir.is_symlink() or (self.git_dir.exists() and not self.git_dir.is_dir()):
            return ["replaced .git with a link or a file"]  # hoh's own git calls must never follow it
        try:
            if not self.exists():
                return ["deleted .git"]
            self.git("rev-parse", "--verify", "-q", "HEAD")
            tags = self.loop_tags()
        except GitError:
            return ["broke .git (HEAD does not resolve)"]
        return [f"moved or deleted tag {name}" for name, commit in sorted(published.items())
                if tags.get(name) != commit] + [f"created tag {name}" for name in sorted(tags.keys() - published.keys())]

    def rebuild(self, published: dict[str, str], head: str) -> None:
        """Put the repository back from history.git: its original refs, hoh's tags, HEAD at `head`."""
        if self.git_dir.is_symlink() or not self.git_dir.is_dir() or not self.exists() or self._broken():
            shutil.rmtree(self.git_dir, ignore_errors=True)
            if self.git_dir.is_symlink() or self.git_dir.exists():
                self.git_dir.unlink()
            run_git(["init", "-q", "-b", BRANCH, str(self.work_tree)], cwd=self.work_tree)
            self.git("fetch", "-q", "--no-tags", str(self.history.git_dir), "+refs/project/*:refs/*")
        for name in self.loop_tags().keys() - published.keys():
            self.git("update-ref", "-d", f"refs/tags/{name}")
        for name, commit in published.items():
            self.git("fetch", "-q", "--no-tags", str(self.history.git_dir), f"+refs/tags/{name}:refs/tags/{name}")
        self.publish(head)

    def _broken(self) -> bool:
        try:
            self.git("rev-parse", "--verify", "-q", "HEAD")
            return False
        except GitError:
            return True
