"""Crash-safe file primitives: every state file is written whole or not at all."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from contextvars import ContextVar, Token
from pathlib import Path
from typing import Any

from .errors import StateError


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_PROCESS_WRITES: set[str] = set()
_WRITES: ContextVar[set[str]] = ContextVar("hoh_own_writes")
"""Every path hoh wrote since `take_written` was last called (the guard between roles reads it): one record per
process, or one per Runtime where several run in one process (`own_writes`, e.g. Harbor's trials)."""


def _written() -> set[str]:
    return _WRITES.get(_PROCESS_WRITES)


def own_writes() -> Token:
    """A record of hoh's own writes for the Runtime run in this context (its thread, and the coroutines it
    submits, which copy the context) alone; another Runtime in the same process keeps its own."""
    return _WRITES.set(set())


def note_written(path: Path) -> None:
    """Record a write of hoh's own (a file, or a directory it rewrote as a whole)."""
    _written().add(os.path.abspath(path))


def written_since() -> set[str]:
    return set(_written())


def take_written() -> set[str]:
    written = _written()
    found = set(written)
    written.clear()
    return found


def atomic_write_bytes(path: Path, data: bytes, durable: bool = True) -> None:
    """Write via a temp file in the same directory renamed over `path`: no reader ever sees half a file, however
    the process ends. `durable` also fsyncs the file before the rename and the directory after, so the write
    outlives a crash of the machine; a role attempt's own records go without (`roles.py` says why)."""
    note_written(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # here: readers (`hoh status`) write nothing and need not import it
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def is_temp_file(name: str) -> bool:
    """A temp file of `atomic_write_bytes` (`.NAME.XXXXXXXX.tmp`), left only by a kill -9 mid-write."""
    return name.startswith(".") and name.endswith(".tmp") and name.count(".") >= 3


def remove_temp_files(root: Path) -> list[Path]:
    """Remove every such temp file under `root` (links are not followed); returns what was removed."""
    removed = []
    for directory, _dirs, files in os.walk(root):
        for name in files:
            if is_temp_file(name):
                path = Path(directory, name)
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


def atomic_write_text(path: Path, text: str, durable: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), durable)


def dump_json(obj: Any) -> str:
    """The one JSON rendering used for state files, so equal data gives equal bytes."""
    return json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def atomic_write_json(path: Path, obj: Any, durable: bool = True) -> None:
    atomic_write_text(path, dump_json(obj), durable)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_state(path: Path, required: tuple[str, ...] = ("schema_version",), version: int = 1) -> dict[str, Any]:
    """Read a JSON state file, or stop with a one-line StateError naming it; never a traceback.

    The file must be a JSON object with the `required` keys and a `schema_version` no newer than
    `version` (a newer file was written by a newer hoh, which this one must not overwrite)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StateError(f"{path}: missing; restore it from a backup, nothing was changed") from None
    except (OSError, ValueError, RecursionError) as err:
        raise StateError(f"{path}: unreadable or corrupt ({type(err).__name__}); restore it, nothing was changed") from None
    if not isinstance(data, dict) or not set(required) <= data.keys():
        raise StateError(f"{path}: corrupt (expected the fields {', '.join(required)}); nothing was changed")
    if isinstance(data.get("schema_version"), int) and data["schema_version"] > version:
        raise StateError(f"{path}: schema_version {data['schema_version']} is newer than this hoh; upgrade hoh")
    return data


MAX_COPY_DEPTH = 32


def copy_regular_tree(src: Path, dst: Path, max_file_bytes: int) -> list[str]:
    """Copy the regular files and directories under `src` (not a link itself) to `dst`; links, FIFOs,
    sockets, devices and files over `max_file_bytes` are left behind. Returns what was left, by name.
    Nothing is followed: an agent's symlink can never pull a file from elsewhere into state/."""
    import stat as _stat
    skipped: list[str] = []
    note_written(dst)
    dst.mkdir(parents=True, exist_ok=True)
    stack = [(src, dst, "")]
    while stack:
        here, there, prefix = stack.pop()
        try:
            entries = list(os.scandir(here))
        except OSError:  # a path too long or deep for the system: left behind, never a crash
            skipped.append(prefix or ".")
            continue
        for entry in entries:
            rel = prefix + entry.name
            try:
                st = entry.stat(follow_symlinks=False)
                if _stat.S_ISDIR(st.st_mode) and rel.count("/") < MAX_COPY_DEPTH:
                    (there / entry.name).mkdir()
                    stack.append((Path(entry.path), there / entry.name, rel + "/"))
                elif _stat.S_ISREG(st.st_mode) and st.st_size <= max_file_bytes:
                    fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                    with os.fdopen(fd, "rb") as fin, open(there / entry.name, "wb") as fout:
                        while chunk := fin.read(1 << 20):
                            fout.write(chunk)
                else:
                    skipped.append(rel)
            except OSError:
                skipped.append(rel)
    prune_empty_dirs(dst)
    return skipped


def remove_path(path: Path) -> bool:
    """Remove whatever is at `path` (a link as itself, a directory with everything in it); whether there was
    something."""
    import shutil
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.is_symlink() or path.exists():
        path.unlink()
    else:
        return False
    return True


def prune_empty_dirs(root: Path) -> None:
    """Remove the directories under `root` (not `root` itself) with nothing in them, deepest first, so one
    that held only empty ones goes too; a link is something (never followed). A sealed loop holds files only:
    directories left with nothing copied into them (what was there was left behind) are not kept."""
    for directory, _dirs, _files in os.walk(root, topdown=False):
        try:
            if directory != str(root) and not os.listdir(directory):
                os.rmdir(directory)
        except OSError:  # one that cannot be read or removed is kept (and the sealed check names it)
            continue


def remove_dead_process_dirs(base: str | Path, prefix: str) -> None:
    """This user's directories `<prefix><pid>-…` in `base` whose process no longer runs (it was killed: kill -9
    skips its cleanup); a pid taken again by another process keeps its directory. Never through a link."""
    try:
        names = [n for n in os.listdir(base) if n.startswith(prefix)]
    except OSError:
        return
    for name in names:
        pid, path = name[len(prefix):].split("-", 1)[0], os.path.join(base, name)
        try:
            st = os.lstat(path)
            if not pid.isdigit() or st.st_uid != os.getuid() or not stat.S_ISDIR(st.st_mode):
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue  # alive (another user's process), or gone already
