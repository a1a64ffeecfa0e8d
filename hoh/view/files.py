"""The files a view serves, and the candidate's diff: read-only, size-capped, never outside the workspace.

Everything under a workspace but hoh's own records was written by an untrusted agent, so a requested
path is taken apart before anything is opened: no absolute path, no `..`, no component that is a
symlink (checked on disk, one component at a time), and the resolved file must still lie inside the
workspace's `state/` (evidence, replays, attempt records) or be the frozen spec; an attempt's raw stream is
served only once the attempt has ended and hoh has scrubbed it of the secrets it knows. What comes back is
bytes for a `text/plain` response, cut at `MAX_FILE_BYTES`.

The diff comes from history.git with `--no-optional-locks` (git writes no lock or index refresh)
through hoh's one hardened git command line (`store.gitrun`), without textconv or external diff drivers.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import HohError
from ..paths import WorkspacePaths
from ..store.gitrun import GitError, run_git

MAX_FILE_BYTES = 2 * 1024 * 1024
"""A served file is cut here (an agent can leave a gigabyte of evidence; the page stays usable)."""
MAX_DIFF_BYTES = 4 * 1024 * 1024
"""A larger diff is shown as its file list only."""
SERVED_TOPS = ("state",)
SERVED_FILES = ("spec.md",)


class Refused(HohError):
    """A requested path that is not one of the workspace's files the view serves."""


def safe_file(root: Path, rel: str) -> Path:
    """The regular file `rel` names inside the workspace `root`, or Refused (why, in one line)."""
    if not rel or "\x00" in rel or "\\" in rel:
        raise Refused("not a workspace path")
    parts = PurePosixPath(rel).parts
    if PurePosixPath(rel).is_absolute() or any(p in ("..", ".") for p in parts) or not parts:
        raise Refused("an absolute path or one with . or .. is refused")
    if not (parts[0] in SERVED_TOPS and len(parts) > 1) and rel not in SERVED_FILES:
        raise Refused("only the workspace's state/ files and spec.md are served")
    real_root = root.resolve()
    here = real_root
    for part in parts:  # one component at a time, so a symlink anywhere on the way is seen, not followed
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except OSError:
            raise Refused("no such file") from None
        if stat.S_ISLNK(mode):
            raise Refused("a symlink is never followed")
    if not stat.S_ISREG(mode):
        raise Refused("not a regular file")
    resolved = here.resolve()
    if not resolved.is_relative_to(real_root):
        raise Refused("outside the workspace")
    if unscrubbed(resolved):
        raise Refused("the raw stream of an attempt that has not ended (not yet scrubbed of secrets); "
                      "its transcript page shows it")
    return resolved


UNSCRUBBED = re.compile(r"events(\.[a-z]+-[0-9]+)?\.jsonl|stderr\.log")
"""An attempt's raw streams: hoh scrubs known secrets from them when the attempt ends (result.json)."""


def unscrubbed(path: Path) -> bool:
    """Whether `path` is a raw stream of an attempt that has not ended: not served (its transcript page masks
    the secrets hoh knows of; the file itself is served once hoh has scrubbed it)."""
    return bool(UNSCRUBBED.fullmatch(path.name)) and re.fullmatch(r"attempt-[0-9]+", path.parent.name) is not None \
        and not (path.parent / "result.json").is_file()


def read_capped(path: Path, cap: int = MAX_FILE_BYTES, view_name: Path | None = None) -> tuple[bytes, bool]:
    """The file's first `cap` bytes and whether it was cut; opened without following a final symlink.
    `view_name`: the one second name hoh itself may give it (`hoh/runtime/loopsview.py`, `loops_view_name`)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise Refused("not a regular file")
        # hoh writes and copies its records whole; any second name but its own view's was made by someone else
        if st.st_nlink > 1 and not (st.st_nlink == 2 and _same_file(view_name, st)):
            raise Refused("a file with more than one name (a hard link) is not served")
        data = fh.read(cap + 1)
    return data[:cap], len(data) > cap


def loops_view_name(root: Path, rel: str) -> Path | None:
    """The name the Planner's view of state/loops gives a file of state/loops (a hard link), if any."""
    parts = PurePosixPath(rel).parts
    if len(parts) > 2 and parts[:2] == ("state", "loops"):
        return WorkspacePaths(root).loops_view.joinpath(*parts[2:])
    return None


def _same_file(path: Path | None, st: os.stat_result) -> bool:
    try:
        other = os.lstat(path) if path is not None else None
    except OSError:
        return False
    return other is not None and stat.S_ISREG(other.st_mode) and (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino)


@dataclass
class DiffFile:
    """One file of a diff: its path and its lines (each with git's first column: ' ', '+', '-', '@', '\\')."""

    path: str
    lines: list[str]
    binary: bool = False


@dataclass
class Diff:
    commit: str
    files: list[DiffFile]
    note: str | None = None


def candidate_diff(paths: WorkspacePaths, commit: str) -> Diff:
    """The candidate's change against its parent (the previous candidate), file by file."""
    if not commit or not all(c in "0123456789abcdef" for c in commit):
        raise Refused("not a commit id")
    base = ["--no-optional-locks", "--git-dir", str(paths.history)]
    show = ["show", "--format=", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--patch"]
    try:
        out = run_git([*base, *show, commit, "--"], cwd=paths.history, binary=True, max_stdout=MAX_DIFF_BYTES)
    except GitError:  # too large (run_git reports the cap as a failure) or a damaged history: list the files
        names = run_git([*base, "show", "--format=", "--name-only", "--no-renames", commit, "--"], cwd=paths.history)
        files = [DiffFile(name, []) for name in str(names).splitlines() if name]
        return Diff(commit, files, f"the diff is over {MAX_DIFF_BYTES // (1024 * 1024)} MB; or could not be read; only its files are listed")
    return Diff(commit, parse_diff(bytes(out).decode("utf-8", errors="replace")))


def parse_diff(text: str) -> list[DiffFile]:
    files: list[DiffFile] = []
    for line in text.splitlines():
        if line.startswith("diff --git "):
            name = line.split(" b/", 1)[-1] if " b/" in line else line[len("diff --git "):]
            files.append(DiffFile(name, []))
        elif not files:
            continue
        elif line.startswith("Binary files "):
            files[-1].binary = True
        elif line.startswith(("@@", "+", "-", " ", "\\")) and not line.startswith(("+++ ", "--- ")):
            files[-1].lines.append(line)
    return files
