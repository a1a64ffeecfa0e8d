"""The project's history: an authoritative repository in the workspace, the project dir its work tree.

    WORKSPACE/history.git    bare repository only hoh writes: loop commits on `main`, tags loop-NNNN,
                             the project's own refs backed up under refs/project/, two indexes
                             (`index` for the project dir, `view-index` for QA's candidate view),
                             `project-config`: PROJECT/.git/config as hoh accepted it
    PROJECT/                 the work tree: WORKSPACE/project, or an existing dir (`--project DIR`)
    PROJECT/.git             the project's own repository, which agents may use (`mirror.ProjectMirror`)

Commits carry a fixed identity and a date derived from the loop number, so the same trees give
the same commit ids whether or not the run was interrupted and resumed in between. No role can
write history.git (the OS jail mounts it read-only, the guard checks all of it), so nothing an
agent does in PROJECT/.git can lose a loop.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from . import viewmove
from .nested import disarm, outside_of
from .staging import stage
from .gitrun import NO_SUBMODULES, GitError, run_git

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
BRANCH = "main"
PACK_AFTER = 16
"""Loose loop tags in history.git before they are packed."""
PATHS_PER_CALL = 1000  # literal paths per git command line: far below any argv limit
IGNORED_NAMED = "The following paths are ignored by one of your .gitignore files:"
"""How `git add` begins when it added everything else and left out paths it was given that are ignored."""


ATTRIBUTES = "* -text -eol -working-tree-encoding -ident -filter\n"
"""history.git's info/attributes, which outranks every .gitattributes of a tree: what a role left is committed byte
for byte, and a checkout gives the bytes back (no end-of-line conversion, no re-encoding, no $Id$, no filter). A
role's `* working-tree-encoding=NO-SUCH-CODE` made every add fail, and every resume with it."""

class History:
    """hoh's view: history.git with the project dir as its work tree."""

    def __init__(self, git_dir: Path, work_tree: Path, index_file: Path | None = None):
        self.git_dir, self.work_tree = git_dir, work_tree
        self.index_file = index_file
        """The index of the commands that name none: None, history.git's own (`index`); a work package's copy
        has its own (`beside`)."""
        self._trees: dict[str, str] = {}  # commit → tree: commits never change
        self._tags: dict[str, str] | None = None
        self._head: str | None = None
        """The commit `main` holds as this process last set it (None: not known yet). Only hoh writes history.git
        (the jail mounts it read-only, the guard restores it), so a freeze whose parent it is needs no reset."""
        self.clean_at: str | None = None
        """The commit the work tree is known to equal, exactly (hoh made it so and no role has run since
        that might change it: the Runtime clears this when a writing role starts); None when unknown."""
        self.view_clean = False
        """QA's view is known to equal its index: set after moving it and when QA's guard finds it unchanged
        after an attempt; cleared while QA runs and whenever a role runs without the jail."""
        self.known_status: dict[tuple[Path, str], list[str]] = {}
        """(work tree, commit) → its untracked and ignored entries, as a guard check last found them
        while the tree was known clean at that commit: the next role's snapshot needs no new scan."""
        self.flattened: list[str] = []
        """The embedded repositories the last `commit_all` made content (their .git removed), sorted."""
        self.left_out: list[str] = []
        """The paths the last `commit_all` left out (removed): names git refuses to record, sorted."""
        self._outside: list[str] | None = None

    @property
    def outside_file(self) -> Path:
        return self.git_dir / "hoh-outside"

    def outside(self) -> list[str]:
        """Pathspecs that keep a workspace inside the project out of every scan, add and clean. Ignore lines
        are not enough: a role's `.gitignore` (`!/ws/`) outranks history.git's info/exclude, and hoh would
        commit its own state and `git clean` it away; no ignore file outranks a pathspec. (The patterns are
        kept in `hoh-outside`, not info/exclude: git refuses an exclude pathspec naming an ignored path.)"""
        if self._outside is None:
            try:
                lines = self.outside_file.read_text().split()
            except OSError:
                lines = []
            self._outside = [f":(exclude,top,glob){p.strip('/')}/**" if "*" in p else f":(exclude,top){p.strip('/')}"
                             for p in lines if p.startswith("/")]
        return self._outside

    def hold_attributes(self) -> None:
        """history.git's info/attributes as `ATTRIBUTES` (at its making, and at a session's start for a workspace
        made before)."""
        path = self.git_dir / "info" / "attributes"
        if not path.is_file() or path.read_text(errors="replace") != ATTRIBUTES:
            path.parent.mkdir(exist_ok=True)
            path.write_text(ATTRIBUTES)

    def move_outside_patterns(self) -> None:
        """A workspace made before `hoh-outside` kept its patterns in info/exclude: move them (at open, before
        any role runs)."""
        exclude = self.git_dir / "info" / "exclude"
        if self.outside_file.exists() or not exclude.is_file() or exclude.is_symlink():
            return
        lines = exclude.read_text().splitlines()
        ours = [line for line in lines if line.startswith("/")]
        if ours:
            self.outside_file.write_text("".join(f"{p}\n" for p in ours))
            exclude.write_text("".join(f"{line}\n" for line in lines if line not in ours))
            self._outside = None

    def _scan(self, *args: str) -> list[str]:
        """`args` over the whole work tree but a workspace inside it."""
        outside = self.outside()
        return [*args, "--", *outside] if outside else list(args)

    @property
    def index(self) -> Path:
        return self.git_dir / "index"

    @property
    def view_index(self) -> Path:
        return self.git_dir / "view-index"

    def git(self, *args: str, loop: int = 0, work_tree: Path | None = None, index: Path | None = None,
            binary: bool = False, stdin: bytes | None = None) -> str | bytes:
        tree = work_tree or self.work_tree
        return run_git(["--git-dir", str(self.git_dir), "--work-tree", str(tree), *args], cwd=tree, loop=loop,
                       index=index if index is not None else self.index_file, binary=binary, stdin=stdin)

    def beside(self, work_tree: Path, index_file: Path) -> "History":
        """history.git with another work tree and its own index (a work package's copy): staged as the project
        is (`staging.stage`), with no ref of history.git's moved."""
        return History(self.git_dir, work_tree, index_file)

    # ---- creation ------------------------------------------------------------------------------
    def create(self, message: str, exclude: list[str] = ()) -> str:
        """Make history.git and commit the work tree as it is now (empty, or an existing project's
        files) as A_0, a child of the project's own HEAD when it has one. `exclude` holds gitignore
        patterns that are never part of the project (a workspace inside it)."""
        self.git_dir.parent.mkdir(parents=True, exist_ok=True)
        run_git(["init", "-q", "--bare", "-b", BRANCH, str(self.git_dir)], cwd=self.git_dir.parent)
        self.hold_attributes()
        if exclude:
            self.outside_file.write_text("".join(f"{p}\n" for p in exclude))
        from .mirror import ProjectMirror  # mirror.py builds on this module
        parent = ProjectMirror(self.work_tree, self).backup_refs()
        self.git("read-tree", "--empty")
        self.git(*self._scan("add", "-A"))
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
        disarm(self.work_tree, None, outside_of(self.outside()))  # git looks into every nested repository here
        self.git("reset", "-q", "--hard", commit)
        self._head = commit
        self.git(*self._scan("clean", "-q", "-ffd"))
        self.clean_at = commit

    def empty_worktree(self) -> None:
        """Remove every file but .git (warm start off: the Developer starts from nothing)."""
        for child in self.work_tree.iterdir():
            if child.name == ".git":
                continue
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()

    def commit_all(self, parent: str, message: str, loop: int, changed: list[str] | None = None,
                   tag: str | None = None) -> str:
        """Commit the whole work tree as a child of `parent` (tagged `tag` in the same ref update); idempotent for
        equal trees. `changed`: every path that may differ from `parent` (the kernel's feed, `changefeed.py`, with
        the index holding `parent`), so only those are looked at; None scans the whole tree.

        An embedded repository is content: its .git is removed from the work tree and its files are
        committed, never a gitlink (which would leave them out of the candidate, and a later `git status`
        would run git in it, under its own config). `flattened` says which; a gitlink `parent` already
        had (a user's submodule) stays while it does not change. What else git will not add as it is is
        settled as `staging.stage` says, the same for a work package's copy."""
        self.clear_stale_locks()
        if self._head != parent:
            self.git("reset", "-q", "--soft", parent)
            self._head = parent
        staged = stage(self, parent, changed)
        self.flattened, self.left_out = list(staged.flattened), list(staged.left_out)
        commit = self.commit(message, parent=parent, loop=loop, tag=tag)
        self.clean_at = commit
        return commit

    def _add_changed(self, changed: list[str]) -> None:
        """`add -A` of the changed paths only. When every one of them is there, one add of them all: git adds
        all but the ignored ones, which it names (exit 1), or refuses the lot (128: one lies beyond a link).
        Any other end is settled the longer way: git's status of exactly those paths (no error for a path
        that no longer exists and never was tracked), then an add of what it lists, each a path that matches."""
        if not changed:
            return
        if all(os.path.lexists(self.work_tree / rel) for rel in changed):
            try:  # no preload: its threads would stat the whole index for the few paths asked about
                self._pathspec_git("-c", "core.preloadIndex=false", "add", "-A", paths=changed)
                return
            except GitError as err:  # what it did add stays added: the status below sees only the rest
                if err.code == 1 and err.stderr.startswith(IGNORED_NAMED) and len(changed) <= PATHS_PER_CALL:
                    return
        out = self._pathspec_git("status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=normal",
                                 NO_SUBMODULES, paths=changed, binary=True)
        listed = sorted({_path(entry[3:]) for entry in out.split(b"\0") if len(entry) >= 4})
        if listed:
            self._pathspec_git("add", "-A", paths=listed)

    def _pathspec_git(self, *args: str, paths: list[str], binary: bool = False) -> str | bytes:
        """A git command over literal paths (no pathspec magic in a role's file names), in argv-sized
        chunks; with no paths, over the whole tree."""
        if not paths:
            return self.git(*self._scan(*args), binary=binary)
        outs = [self.git("--literal-pathspecs", *args, "--", *paths[i:i + PATHS_PER_CALL], binary=binary)
                for i in range(0, len(paths), PATHS_PER_CALL)]
        return b"\0".join(outs) if binary else "\n".join(outs)

    def commit(self, message: str, *, parent: str | None, loop: int, tag: str | None = None) -> str:
        """Commit the index and move `main` to it (and tag it `tag`) in one ref transaction; the message goes
        through a file, so no length can overflow argv."""
        tree = self.git("write-tree")
        if tree == EMPTY_TREE:
            self.git("mktree")  # git never stores the empty tree by itself; fsck would miss it
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=self.git_dir, suffix=".msg") as fh:
            fh.write(message)
            fh.flush()
            commit = self.git("commit-tree", tree, *(["-p", parent] if parent else []), "-F", fh.name, loop=loop)
        self._trees[commit] = tree
        # HEAD is the symbolic ref to main from `init -b` on; every update moves main, never HEAD.
        refs = [f"refs/heads/{BRANCH}", *([f"refs/tags/{tag}"] if tag else [])]
        self.git("update-ref", "--stdin", stdin="".join(f"update {ref} {commit}\n" for ref in refs).encode())
        self._head = commit
        if tag:
            if self._tags is not None:
                self._tags[tag] = commit
            self._pack_loose_tags()
        return commit

    def _pack_loose_tags(self) -> None:
        """One packed-refs file, not a loose file per loop: the guard reads hoh's refs around every attempt, and
        that must not grow with the loops. Packed once PACK_AFTER loose tags have gathered, so the rewrite of
        packed-refs (which grows with the loops) is paid once per PACK_AFTER loops."""
        try:
            loose = sum(1 for _ in os.scandir(self.git_dir / "refs" / "tags"))
        except OSError:
            return
        if loose >= PACK_AFTER:
            self.git("pack-refs", "--all")

    # ---- QA's view -----------------------------------------------------------------------------
    def update_view(self, dest: Path, commit: str, index_needed: bool = True) -> None:
        """Make `dest` a plain copy of `commit` (no .git: QA gets no handle on history), moving it
        from the candidate it held before rather than writing it anew: only changed files are
        touched, so the cost follows the change, not the project's size. `index_needed` False: every
        role that reads the view is jailed, so the view's index need not follow it (`viewmove.py`)."""
        dest.mkdir(parents=True, exist_ok=True)
        index = self.view_index
        (self.git_dir / "view-index.lock").unlink(missing_ok=True)
        if not index_needed and self.view_clean and self._move_view_by_changes(dest, commit):
            index.unlink(missing_ok=True)  # behind the view now: a rebuild makes both again
        elif index.exists() and (self.view_clean or self._view_is_clean(dest)):
            # The one-tree merge: entries equal to the new tree's keep their stat, the others are checked out
            # (a file changed in the view since is refused, as by the two-tree form), and the index gets the
            # tree's cache-tree as it is, where the two-tree form would hash every directory again.
            self.git("read-tree", "-m", "-u", commit, work_tree=dest, index=index)
        else:
            index.unlink(missing_ok=True)
            for child in dest.iterdir():
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
            self.git("read-tree", commit, work_tree=dest, index=index)
            # -u: the index gets each file's stat as written, so the next move needs no scan of the view first.
            self.git("checkout-index", "-u", "--all", "--force", work_tree=dest, index=index)
        (self.git_dir / "view-commit").write_text(commit + "\n")
        self.view_clean = True

    def _move_view_by_changes(self, dest: Path, commit: str) -> bool:
        """The view (holding the commit in `view-commit`) moved to `commit` by what differs; False when it
        cannot be: no commit recorded, or a change only git's checkout handles."""
        try:
            old = (self.git_dir / "view-commit").read_text().strip()
        except OSError:
            return False
        if not old:
            return False
        changes = viewmove.tree_changes(self.git("diff-tree", "-r", "-z", "--no-renames", old, commit, binary=True))
        if changes is None:
            return False
        wanted = sorted({c.blob for c in changes if c.status != "D"})
        try:  # held in memory at once: more than MAX_BYTES of new contents is left to checkout
            out = run_git(["--git-dir", str(self.git_dir), "cat-file", "--batch"], cwd=self.git_dir, binary=True,
                          stdin="".join(f"{oid}\n" for oid in wanted).encode(),
                          max_stdout=viewmove.MAX_BYTES) if wanted else b""
        except GitError:
            return False
        viewmove.apply(dest, changes, viewmove.blobs(out, wanted).__getitem__)
        return True

    def _view_is_clean(self, dest: Path) -> bool:
        """Nothing in the view differs from its index (a tampered view is rebuilt, never moved)."""
        return (self.git_dir / "view-commit").exists() and not self.view_changes(dest)

    def changed_paths(self, base: str, commit: str) -> list[str]:
        """The paths that differ between two commits (added, changed, deleted, either side of a rename)."""
        out = self.git("diff", "--name-only", "--no-renames", "-z", base, commit)
        return [p for p in out.split("\0") if p]

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
            fields = self.git("diff-files", "--name-status", "-z", "--no-renames", NO_SUBMODULES, *spec,
                              work_tree=work_tree, index=index, binary=True).split(b"\0")
            return [f"{'deleted' if status == b'D' else 'modified'} {_path(name)}"
                    for status, name in zip(fields[0::2], fields[1::2]) if name]

        found = differing()
        if found:
            self.git("update-index", "-q", "--ignore-submodules", "--refresh", "--ignore-missing",
                     work_tree=work_tree, index=index)
            found = differing()
        return found

    def created(self, work_tree: Path, index: Path, *pathspec: str) -> list[str]:
        """Files and directories not in `index` (ignored ones included), untracked directories as one entry."""
        spec = ["--", *pathspec] if pathspec else []
        scan = self._scan if work_tree == self.work_tree and not pathspec else lambda *args: list(args)
        out = self.git(*scan("ls-files", "-z", "--others", "--directory", *spec), work_tree=work_tree, index=index,
                       binary=True)
        return [f"created {_path(name)}" for name in out.split(b"\0") if name]

    def status(self, work_tree: Path, index: Path) -> list[str]:
        """`changes` in one git call, for a work tree whose index equals HEAD (the project after a reset,
        QA's view of the commit HEAD names): `git status` also compares the index with HEAD, cheaply
        then, and its differences are not the work tree's, so they are left out."""
        scan = self._scan if work_tree == self.work_tree else lambda *args: list(args)
        out = self.git(*scan("status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=normal",
                             "--ignored=matching", NO_SUBMODULES), work_tree=work_tree, index=index, binary=True)
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


def __getattr__(name: str):
    """`ProjectMirror` lives in mirror.py, which builds on this module: imported on first use, so
    `from .git import ProjectMirror` still works whichever of the two modules is imported first."""
    if name == "ProjectMirror":
        from . import mirror
        return mirror.ProjectMirror
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
