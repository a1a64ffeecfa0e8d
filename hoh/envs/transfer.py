"""What goes into a role's environment and what comes back.

In: exactly what the role's jail would show of the workspace (its `JailSpec`: the frozen inputs, the project
or the candidate's copy, the role's home), each at the path it has here, so prompts, paths and the scripted
agent's facts are the same in every environment; hidden paths (other roles' transcripts, a workspace inside
the project) are left out. Out: only the role's writable paths (the Developer's project, QA's evidence dir,
the role's home), and of them only regular files, directories and symbolic links, with no setuid or setgid
bit: a FIFO or a device a role made never reaches hoh's side. Nothing that comes back is ever executed by hoh.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Iterable


def outermost(paths: Iterable[Path]) -> list[Path]:
    """The paths, resolved, without those inside another one of them."""
    resolved = sorted({p.resolve() for p in paths}, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in resolved:
        if not any(path.is_relative_to(k) for k in kept):
            kept.append(path)
    return kept


def stage(roots: Iterable[Path], hidden: Iterable[Path], into: Path) -> int:
    """Copy each root (a file or a directory) to `into` + its absolute path, hidden paths and anything that is
    not a regular file, a directory or a symbolic link left out.
    Returns the bytes of the files staged."""
    hidden = {p.resolve() for p in hidden}
    staged = 0

    def copy(source: str, dest: str) -> None:
        nonlocal staged
        staged += os.lstat(source).st_size
        # Copied, never hard-linked: a link changes the source's ctime, so git's index of a frozen tree would no
        # longer match it by stat and the next step would have to scan it whole.
        shutil.copy2(source, dest)

    def ignore(directory: str, names: list[str]) -> list[str]:
        left_out = []
        for name in names:
            path = Path(directory, name)
            mode = path.lstat().st_mode
            if path.resolve() in hidden or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                left_out.append(name)
        return left_out

    for root in outermost(roots):
        dest = into / root.relative_to("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if root.is_dir():
            shutil.copytree(root, dest, symlinks=True, ignore=ignore, copy_function=copy, dirs_exist_ok=True)
        elif root.is_file():
            copy(str(root), str(dest))
    return staged


def sanitize(tree: Path) -> tuple[list[str], int]:
    """Keep regular files, directories and symbolic links; drop everything else and every setuid, setgid and
    sticky bit. Returns what was dropped, relative to `tree`, and the bytes of the files kept."""
    dropped, kept = [], 0
    for directory, dirs, files in os.walk(tree):
        for name in [*dirs, *files]:
            path = Path(directory, name)
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                continue
            if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
                if mode & 0o7000:
                    os.chmod(path, stat.S_IMODE(mode) & 0o777)
                kept += path.lstat().st_size if stat.S_ISREG(mode) else 0
                continue
            path.unlink()
            dropped.append(str(path.relative_to(tree)))
    return dropped, kept


def scratch_beside(target: Path) -> Path:
    """An empty directory on the target's filesystem, so what comes back is moved into place, not copied."""
    return Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.from-env-"))


def adopt(downloaded: Path, target: Path, keep: Iterable[Path] = ()) -> tuple[list[str], int]:
    """Make `target` hold what came back in `downloaded` (sanitized first), entry by entry; `keep` are paths in
    `target` that are not the role's (a workspace inside the project): left as they are. Returns what was
    dropped and the bytes that came back. `downloaded` is consumed. `target` itself is never followed: writable paths are adopted outermost
    first and only (`outermost`), since what came back for an outer one may have made an inner one a link (a
    Developer's `.git` pointed at hoh's state, or at a directory outside the workspace)."""
    dropped, came = sanitize(downloaded)
    kept = {p.resolve() for p in keep}
    target.mkdir(parents=True, exist_ok=True)
    if target.is_symlink():  # replaced by one: emptying it would empty whatever the role pointed it at
        raise OSError(f"{target} is a link now; nothing is copied through it")
    target = target.parent.resolve() / target.name  # its entries are where they are, not where links point
    for entry in list(target.iterdir()):
        if entry in kept:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    for entry in downloaded.iterdir():
        dest = target / entry.name
        if dest in kept or dest.exists() or dest.is_symlink():
            continue
        shutil.move(str(entry), str(dest))
    shutil.rmtree(downloaded, ignore_errors=True)
    return dropped, came
