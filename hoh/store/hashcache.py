"""File hashes and directory listings known by stat identity, for a run's many looks at the same files.

The Runtime's guard and the environments' sync both ask "what is this file now" of trees that mostly have
not changed since they last asked: a file is read again only when its stat changed, a directory listed again
only when its ctime moved (which no one can set back).
"""

from __future__ import annotations

import fnmatch
import os
import stat
import struct
from pathlib import Path

from ..fsutil import sha256_file
from .mirror import settled

MAX_CACHED_BYTES = 64 * 1024 * 1024


class HashCache:
    """sha256 and bytes of files by stat identity: a file is read again only when its stat changed (every
    attempt's guard snapshots the same state files, which mostly have not)."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[bytes, str]] = {}
        self._bytes: dict[str, tuple[bytes, bytes]] = {}
        self._bytes_held = 0
        self._listings: dict[tuple[str, bool], tuple[tuple[int, int, int, int], frozenset[str], tuple[str, ...],
                                                     list[str]]] = {}

    def listing(self, directory: str, skip: frozenset[str], ignore: tuple[str, ...], top: bool) -> list[str] | None:
        """The names in `directory` a fingerprint looks at (not skipped, not ignored, not a top `.git`); None
        when it cannot be read. Listed again only when the directory changed: any name made, removed or
        renamed there moves its ctime, which no one can set back; state/loops holds a name per loop, nearly
        all of them skipped, and every attempt's guard looks at it many times."""
        try:
            st = os.lstat(directory)  # before the listing: a change after it changes the identity
        except OSError:
            return None
        key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
        known = self._listings.get((directory, top))
        if known is not None and known[0] == key and known[2] == ignore and (known[1] is skip or known[1] == skip):
            return known[3]
        try:
            with os.scandir(directory) as entries:
                names = [e.name for e in entries if e.path not in skip and not (top and e.name == ".git")
                         and not ignored(e.name, ignore)]
        except OSError:
            return None
        if stat.S_ISDIR(st.st_mode) and settled(st):
            self._listings[(directory, top)] = (key, skip, ignore, names)
        return names

    def digest(self, path: str, st: os.stat_result) -> str:
        key = _stat_key(st)
        known = self._known.get(path)
        if known and known[0] == key:
            return known[1]
        digest = sha256_file(Path(path))
        self._known[path] = (key, digest)
        return digest

    def content(self, path: str, st: os.stat_result) -> bytes:
        """The file's bytes (for a snapshot to restore from), kept while its stat stays; at most
        MAX_CACHED_BYTES are kept in all (then the cache starts over)."""
        key = _stat_key(st)
        known = self._bytes.get(path)
        if known and known[0] == key:
            return known[1]
        with open(path, "rb") as fh:
            data = fh.read()
        if known:
            self._bytes_held -= len(known[1])
        if self._bytes_held + len(data) > MAX_CACHED_BYTES:
            self._bytes, self._bytes_held = {}, 0
        self._bytes[path] = (key, data)
        self._bytes_held += len(data)
        return data


_KEY = struct.Struct("<QQqq")


def _stat_key(st: os.stat_result) -> bytes:
    """The stat identity as 32 bytes (a tuple of four ints takes six times that, per file of every tree held)."""
    return _KEY.pack(st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def ignored(name: str, patterns: list[str] | tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)
