"""A directory of plain files written into a git object store by hoh itself, with no git process.

Sealing a loop (`seal.py`) records a few dozen files hoh wrote; one git process per step (add, write-tree,
mktree) cost more than the hashing. The objects are git's own loose format (`<kind> <size>\\0<bytes>`,
zlib-deflated, named by the SHA-1 of that), written the way git writes them: to a temporary file beside
their place, made read-only, then renamed; an object already there is left as it is. Only what git would
record the same way is handled here: directories and regular files. A tree holding anything else (a link, a
special file, a nested `.git`) returns None and the caller asks git, so the two never disagree.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import zlib
from pathlib import Path

FILE_MODE, EXECUTABLE_MODE, TREE_MODE = b"100644", b"100755", b"40000"


class LooseObjects:
    def __init__(self, git_dir: Path):
        self.dir = git_dir / "objects"

    def write(self, kind: bytes, data: bytes) -> str:
        """Store one object; its id."""
        raw = b"%s %d\0" % (kind, len(data)) + data
        oid = hashlib.sha1(raw).hexdigest()
        fan = self.dir / oid[:2]
        path = fan / oid[2:]
        if path.exists():
            return oid
        fan.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=fan, prefix="tmp_obj_")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(zlib.compress(raw))
            os.chmod(tmp, 0o444)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        return oid

    def tree_of(self, directory: Path) -> tuple[str, dict[str, str]] | None:
        """The tree git would record for `directory` (what `add --force` and `write-tree` make of it), and
        each file's blob id by its path relative to `directory`; None when it holds what only git should
        judge. An empty directory is no entry, as in git."""
        blobs: dict[str, str] = {}
        oid = self._tree(str(directory), "", blobs)
        return None if oid is False else (oid or self.write(b"tree", b""), blobs)

    def _tree(self, directory: str, prefix: str, blobs: dict[str, str]) -> str | None | bool:
        """The directory's tree id, None when it holds no file, False when git must decide."""
        entries: list[tuple[bytes, bytes, str]] = []
        for entry in os.scandir(directory):
            if entry.name == ".git":
                return False  # git would see an embedded repository
            st = entry.stat(follow_symlinks=False)
            name = os.fsencode(entry.name)
            if stat.S_ISDIR(st.st_mode):
                sub = self._tree(entry.path, prefix + entry.name + "/", blobs)
                if sub is False:
                    return False
                if sub:
                    entries.append((name + b"/", TREE_MODE, sub))
            elif stat.S_ISREG(st.st_mode):
                with open(entry.path, "rb") as fh:
                    blob = self.write(b"blob", fh.read())
                blobs[prefix + entry.name] = blob
                entries.append((name, EXECUTABLE_MODE if st.st_mode & stat.S_IXUSR else FILE_MODE, blob))
            else:
                return False
        return self._write_tree(entries) if entries else None

    def tree(self, entries: dict[str, str]) -> str:
        """A tree of subtrees: name → tree id."""
        return self._write_tree([(os.fsencode(name) + b"/", TREE_MODE, oid) for name, oid in entries.items()])

    def _write_tree(self, entries: list[tuple[bytes, bytes, str]]) -> str:
        """(sort key: the name, a subtree's ending in "/"; mode; id) → the tree's id. git orders a tree's entries
        by name, a subtree's name as if it ended in "/"."""
        return self.write(b"tree", b"".join(mode + b" " + key.rstrip(b"/") + b"\0" + bytes.fromhex(oid)
                                            for key, mode, oid in sorted(entries)))
