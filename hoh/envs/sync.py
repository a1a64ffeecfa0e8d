"""What a role's environment holds of its view, kept there between its attempts: hoh's side of `inside.py`.

A fresh environment gets the whole view; after that each attempt sends only what differs between the view and
what hoh knows the environment holds (`Held`, by content), and gets back only what changed in the writable
paths. Both sides keep the same record: hoh the content of every entry it put there or took back, the
environment (`inside.HELD`) each entry's stat key, which hoh's script checks against the sha256 hoh kept of it.

Why a root role cannot make hoh accept a stale or planted file: before anything is placed, every process an attempt
left is killed (but the container's init and hoh's server, neither of which a role can trace:
`harbor_env.UNTRACEABLE_INIT`, `serve.py`; so no code of a role outlives the kill inside them), hoh's programs are
put in afresh, and the engine (not the container) is asked what changed outside hoh's paths (`verify.py`: a changed
python3 or libc replaces the environment). Then hoh's own script, sent with the call, lists the view and compares
every entry's key with the record whose sha256 hoh holds: whatever a role changed, added or removed there (a ctime
no process can set back) is removed and sent again, and journaled. That listing is done once the attempt before was
collected instead (a sealed record), when no process but the environment's own was left alive then: nothing could
change the view after it. What comes back is listed by the same script after the same kill, applied here entry by
entry (`apply`): deletions, then regular files, directories and links, never a special file or a setuid bit, never
through a link; paths another owner keeps (`keep`) are left alone. Only Docker and Podman containers, which hoh can
ask this way, keep a view between attempts; elsewhere every attempt gets a fresh copy (`transfer.py`).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from ..fsutil import sha256_file
from ..store.hashcache import HashCache

SOURCE = (Path(__file__).parent / "inside.py").read_text(encoding="utf-8")


@dataclass(frozen=True, slots=True)  # one per entry of a view, which may hold hundreds of thousands
class Entry:
    """What is at a path, by content: a file's sha256, a link's target, a directory's mode."""

    kind: str
    """f, d, l; `o` for anything else (a FIFO a role made: never matches a view's entry, so it is removed)."""
    mode: int = 0
    content: str | None = None


JUNK = Entry("o")
MAX_LINE = 1 << 20
"""A longer line of the environment's change list is not one `inside.py` wrote: dropped, never held whole."""


@dataclass
class Held:
    """What hoh knows the environment holds: each path's entry, and the sha256 of the environment's record."""

    digest: str = "-"
    entries: dict[str, Entry] = field(default_factory=dict)

    def forget(self, path: str) -> None:
        """`path` and, for a directory, everything under it."""
        if self.entries.pop(path, JUNK).kind == "d":
            prefix = path.rstrip("/") + "/"
            for known in [p for p in self.entries if p.startswith(prefix)]:
                del self.entries[known]


def view(roots: Iterable[Path], hidden: Iterable[Path], cache: HashCache) -> Iterator[tuple[str, Entry]]:
    """Every entry of the view, roots included: regular files, directories and links, hidden paths left out."""
    skip = {str(p.resolve()) for p in hidden}
    for root in roots:
        stack = [str(root)]
        while stack:
            path = stack.pop()
            if path in skip:
                continue
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                yield path, Entry("l", 0, os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                yield path, Entry("f", mode, cache.digest(path, st))
            elif stat.S_ISDIR(st.st_mode):
                yield path, Entry("d", mode)
                with os.scandir(path) as entries:
                    stack.extend(e.path for e in entries)


def plan(roots: list[Path], hidden: Iterable[Path], held: Held, cache: HashCache,
         staging: Path, wanted: dict[str, Entry] | None = None) -> tuple[dict[str, Entry], int]:
    """Stage what the environment lacks of the view (`staging/plan.json`, files as `staging/files/N`): every
    entry that differs from what it holds, and every held path the view no longer has. `wanted`: the view as
    listed already (`viewwatch.py`). Returns the view and the bytes staged."""
    if wanted is None:
        wanted = dict(view(roots, hidden, cache))
    (staging / "files").mkdir(parents=True, exist_ok=True)
    count, moved = 0, 0
    believed, known = held.digest != "-", held.entries
    differing = [path for path, entry in wanted.items() if not believed or known.get(path) != entry]
    deletions = [p for p in held.entries if p not in wanted] if believed else []
    # Written as it is made, one entry at a time: never the whole plan in memory, however large the view.
    with open(staging / "plan.json", "w", encoding="ascii") as fh:
        fh.write(f'{{"roots": {json.dumps([str(r) for r in roots])}, "delete": {json.dumps(deletions)}, "put": [')
        for path in sorted(differing):  # parents first: a path sorts before every path it is a prefix of
            entry = wanted[path]
            index = None
            if entry.kind == "f":
                index = count
                copy = staging / "files" / str(index)
                shutil.copyfile(path, copy)  # never a hard link: that would change the view's ctimes under git's index
                moved += copy.stat().st_size
            put = [path, entry.kind, entry.mode, entry.content if entry.kind == "l" else None, index]
            fh.write(("," if count else "") + json.dumps(put))
            count += 1
        fh.write("]}")
    return wanted, moved


def placed(held: Held, report: dict, wanted: dict[str, Entry]) -> list[str]:
    """Take in what the environment's `place` said: it holds the view (`wanted`) now, or, where it found changes,
    what it held less what it removed; returns what it found changed."""
    tampered = list(report.get("tampered") or [])
    if report.get("held") is None:
        held.digest, held.entries = "-", {}
        return tampered
    if tampered:  # nothing was placed: what it removed is sent again
        for path in tampered:
            held.forget(path)
    else:
        held.entries = wanted
    held.digest = report["held"]
    return tampered


def apply(changes: Path, files: Path, roots: list[Path], keep: Iterable[Path], held: Held) -> list[str]:
    """Bring what the environment said changed in its writable `roots` here, entry by entry, streaming; returns
    what was dropped (special files; anything whose way here runs through a link)."""
    kept = [str(p.resolve()) for p in keep]
    tops = [str(r) for r in roots]
    dropped: list[str] = []
    with changes.open(encoding="ascii", errors="replace") as lines:
        while line := lines.readline(MAX_LINE):
            change = _valid(line)
            if change is None:  # a script a role replaced may have written anything here
                dropped.append(line[:200].rstrip("\n"))
                continue
            op, path = change[0], change[1]
            inside = any(_under(path, top) for top in tops)
            if not inside or any(_under(path, k) for k in kept):
                held.entries[path] = JUNK  # not the role's to write: removed there before the next attempt
                continue
            if op == "del":
                held.entries.pop(path, None)
                if path in tops:
                    _empty(Path(path), kept)
                elif _through_dirs(path, tops):
                    _remove(path)
                continue
            if op == "drop" or not _through_dirs(path, tops) or path in tops and change[2] != "d":
                held.entries[path] = JUNK
                dropped.append(path)
                continue
            _, _, kind, mode, target, index = change
            source = files / str(index) if index is not None else None
            if source is not None and not _regular(source):  # a link or nothing where its copy should be
                held.entries[path] = JUNK
                dropped.append(path)
                continue
            held.entries[path] = _put(path, kind, mode, target, source)
    return dropped


def _valid(line: str) -> list | None:
    """One change as `inside.py collect` writes it, or None: an absolute, normal path (no `..`), a kind, an integer
    mode and file number. The listing comes from the environment, where a role may have replaced its python3."""
    try:
        change = json.loads(line)
    except ValueError:
        return None
    if not (isinstance(change, list) and len(change) >= 2 and isinstance(change[1], str)
            and change[1].startswith("/") and os.path.normpath(change[1]) == change[1] and "\0" not in change[1]):
        return None
    if change[0] in ("del", "drop") and len(change) == 2:
        return change
    if change[0] != "put" or len(change) != 6:
        return None
    _, _, kind, mode, target, index = change
    fine = isinstance(mode, int) and not isinstance(mode, bool) and 0 <= mode <= 0o7777 and (
        (kind == "f" and isinstance(index, int) and not isinstance(index, bool) and index >= 0 and target is None)
        or (kind == "d" and index is None and target is None)
        or (kind == "l" and index is None and isinstance(target, str) and target and "\0" not in target))
    return change if fine else None


def _put(path: str, kind: str, mode: int, target: str | None, source: Path | None) -> Entry:
    try:
        st: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and (kind != "d" or not stat.S_ISDIR(st.st_mode)):
        _remove(path)
        st = None
    if kind == "d":
        if st is None:
            os.mkdir(path)
        os.chmod(path, mode & 0o777)
        return Entry("d", mode)
    if kind == "l":
        assert target is not None
        os.symlink(target, path)
        return Entry("l", 0, target)
    assert source is not None
    os.chmod(source, mode & 0o777)
    digest = sha256_file(source)
    os.replace(source, path)
    return Entry("f", mode, digest)


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _through_dirs(path: str, tops: list[str]) -> bool:
    """Every directory between its writable root and `path` is a directory here, none a link."""
    top = next(t for t in tops if _under(path, t))
    current = Path(path).parent
    while _under(str(current), top):
        try:
            if not stat.S_ISDIR(os.lstat(current).st_mode):
                return False
        except FileNotFoundError:
            return False
        if str(current) == top:
            return True
        current = current.parent
    return True


def _remove(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _empty(root: Path, kept: list[str]) -> None:
    """A writable root the role removed: emptied here, never removed (and never followed)."""
    if root.is_symlink() or not root.is_dir():
        return
    for entry in root.iterdir():
        if str(entry) not in kept:
            _remove(str(entry))
