"""The project repository A_t: thin, deterministic git operations.

Commits carry a fixed identity and a date derived from the loop number, so the same trees give
the same commit ids whether or not the run was interrupted and resumed in between.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..errors import HohError
from ..harness.process import call

GIT_TIMEOUT_SECONDS = 1800
EPOCH = 1_700_000_000  # 2023-11-14; commit dates are EPOCH + loop, never the wall clock


class GitError(HohError):
    pass


class ProjectRepo:
    def __init__(self, path: Path):
        self.path = path

    def _env(self, loop: int = 0) -> dict[str, str]:
        date = f"@{EPOCH + loop} +0000"
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
            "GIT_AUTHOR_NAME": "hoh", "GIT_AUTHOR_EMAIL": "hoh@localhost",
            "GIT_COMMITTER_NAME": "hoh", "GIT_COMMITTER_EMAIL": "hoh@localhost",
            "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date,
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
        }

    def git(self, *args: str, loop: int = 0, binary: bool = False, index: Path | None = None) -> str | bytes:
        env = self._env(loop)
        if index is not None:
            env["GIT_INDEX_FILE"] = str(index)
        argv = ["git", "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false",
                "-c", "core.autocrlf=false", *args]
        proc = call(argv, cwd=self.path, env=env, timeout=GIT_TIMEOUT_SECONDS)
        if not proc.ok:
            why = "timed out" if proc.exit_code is None else proc.stderr.strip()
            raise GitError(f"git {' '.join(args)} failed in {self.path}: {why}")
        return proc.stdout if binary else proc.stdout.decode().strip()

    def init(self) -> str:
        """Create the repository with an empty root commit (A_0); return its id."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        self.git("commit", "-q", "--allow-empty", "-m", "hoh: empty project (A_0)")
        return self.head()

    def clear_stale_locks(self) -> None:
        """A kill -9 during a git command leaves index.lock; we hold the workspace lock, so it is stale."""
        (self.path / ".git" / "index.lock").unlink(missing_ok=True)

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def tree_of(self, commit: str) -> str:
        return self.git("rev-parse", f"{commit}^{{tree}}")

    def refs(self) -> str:
        return self.git("show-ref", "--head")

    def reset_to(self, commit: str) -> None:
        """Make the work tree exactly `commit`: tracked files restored, everything else removed."""
        self.clear_stale_locks()
        self.git("reset", "-q", "--hard", commit)
        self.git("clean", "-q", "-ffdx")

    def empty_worktree(self) -> None:
        """Remove every file but .git (warm start off: the Developer starts from nothing)."""
        for child in self.path.iterdir():
            if child.name == ".git":
                continue
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()

    def commit_all(self, parent: str, message: str, loop: int) -> str:
        """Commit the whole work tree as a child of `parent`; idempotent for equal trees."""
        self.clear_stale_locks()
        self.git("reset", "-q", "--soft", parent)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message, loop=loop)
        return self.head()

    def tag(self, name: str, commit: str) -> None:
        self.git("tag", "-f", name, commit)

    def tags(self) -> list[str]:
        out = self.git("tag", "--list")
        return out.splitlines() if out else []

    def export(self, commit: str, dest: Path) -> None:
        """Write a plain copy of `commit`'s tree to `dest` (no .git: QA gets no handle on history).

        git itself checks the files out, through a throwaway index: nothing is held in memory and
        no archive is unpacked (tarfile's extraction filters need Python 3.11.4+)."""
        dest.mkdir(parents=True, exist_ok=True)
        index = self.path / ".git" / "hoh-export.index"
        index.unlink(missing_ok=True)
        try:
            self.git("--work-tree", str(dest), "read-tree", commit, index=index)
            self.git("--work-tree", str(dest), "checkout-index", "--all", "--force", index=index)
        finally:
            index.unlink(missing_ok=True)
