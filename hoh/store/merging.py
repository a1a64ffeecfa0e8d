"""Work packages in history.git: each package's copy of A_{t-1}, its commit, and their merge in package order.

A package's copy is a plain directory (no .git) with its own index outside it; its commit and every merge
step are commits whose one parent is A_{t-1}, with hoh's fixed identity and the loop's date, so the same
package trees merge into the same tree, and the same commit ids, whether or not the run was killed in
between. Only objects are written while Developers run (no ref, no file of history.git's own): the guard of
every other Developer running meanwhile watches history.git, but not its content-addressed objects.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..harness.process import call
from .embedded import remove_tree
from .git import EMPTY_TREE, History
from .gitrun import FAST, GIT_TIMEOUT_SECONDS, HARDENING, GitError, git_env
from .staging import Staged, stage

CONFLICT_MARKER = re.compile(rb"^(<{7}|>{7})( |$)|^={7}$", re.MULTILINE)
"""git's conflict markers at the start of a line: what a merged candidate must never hold."""


@dataclass(frozen=True)
class TreeMerge:
    """The merge of one package into the tree merged so far: its tree (with git's conflict markers in the
    conflicting files when there are any) and the conflicting paths (empty: a clean merge)."""

    tree: str
    conflicts: tuple[str, ...]

    @property
    def clean(self) -> bool:
        return not self.conflicts


@dataclass(frozen=True)
class PackageCommit:
    """A package's copy committed: the commit, and what its staging changed in the copy (as the project's)."""

    commit: str
    staged: Staged


class PackageGit:
    """The git work of work packages, on hoh's history.git."""

    def __init__(self, history: History):
        self.history = history

    def checkout(self, commit: str, dest: Path, index: Path) -> None:
        """Make `dest` a fresh plain copy of `commit`, its index at `index` (outside it: no role edits it); a copy
        an earlier Developer left there goes, whatever it made of it."""
        remove_tree(dest)
        index.unlink(missing_ok=True)
        dest.mkdir(parents=True)
        self.history.git("read-tree", commit, work_tree=dest, index=index)
        self.history.git("checkout-index", "-u", "--all", "--force", work_tree=dest, index=index)

    def commit_copy(self, dest: Path, index: Path, parent: str, message: str, loop: int) -> PackageCommit:
        """Commit the whole of `dest` as a child of `parent` (objects only: no ref moves), staged as a lone
        Developer's project is: embedded repositories made content, names git refuses left out, and nothing of a
        workspace inside the project. A GitError: git cannot record the copy as it is."""
        copy = self.history.beside(dest, index)
        staged = stage(copy, parent, None)
        tree = copy.git("write-tree")
        if tree == EMPTY_TREE:
            copy.git("mktree", stdin=b"")  # git never stores the empty tree by itself; fsck would miss it
        return PackageCommit(self.commit_tree(tree, parent, message, loop), staged)

    def commit_tree(self, tree: str, parent: str, message: str, loop: int) -> str:
        return self.history.git("commit-tree", tree, "-p", parent, "-m", message, loop=loop)

    def tree_of(self, commit: str) -> str:
        return self.history.git("rev-parse", f"{commit}^{{tree}}")

    def merge(self, ours: str, theirs: str) -> TreeMerge:
        """git's own merge of two commits (whose merge base is A_{t-1}), written as a tree; never touches a
        work tree or an index."""
        proc = self._git("merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", ours, theirs)
        if proc.exit_code not in (0, 1):
            raise GitError(f"git merge-tree {ours} {theirs} failed: {proc.stderr.strip()}", code=proc.exit_code,
                           stderr=proc.stderr)
        # NUL-separated: a name is as it is (quoted, a name with a newline or a byte not UTF-8 would be another).
        fields = [f.decode(errors="surrogateescape") for f in proc.stdout.split(b"\0")]
        return TreeMerge(fields[0], tuple(sorted(set(filter(None, fields[1:])))) if proc.exit_code == 1 else ())

    def changed(self, a: str, b: str) -> list[str]:
        """Paths that differ between two trees or commits."""
        return self.history.changed_paths(a, b)

    def files_with_markers(self, commit: str, paths: list[str]) -> list[str]:
        """Those of `paths` whose file in `commit` holds a conflict marker line."""
        found = []
        for path in paths:
            proc = self._git("cat-file", "-p", f"{commit}:{path}")
            if proc.ok and CONFLICT_MARKER.search(proc.stdout):
                found.append(path)
        return found

    def _git(self, *args: str):
        argv = ["git", *HARDENING, *FAST, "--git-dir", str(self.history.git_dir), *args]
        try:
            return call(argv, cwd=self.history.git_dir, env=git_env(), timeout=GIT_TIMEOUT_SECONDS,
                        max_stdout=256 * 1024 * 1024)
        except OSError as err:
            raise GitError(f"git {' '.join(args[:2])} could not run: {err}") from None
