"""A role's file as the report links it: through a copy the report makes, named `.txt`, that every browser shows
as text.

QA names and writes its evidence files. Linked as they are, a report opened from file:// would hand each to the
browser to open by its name: `x.html`, `x.svg` or `x.xhtml` would run its script in the user's browser, with
the user's files in reach. So the report links a copy of
each beside its pages (`files/loop-0007/<digest>-<name>.txt`: text/plain, as `hoh view` serves the files),
cut at `COPY_LIMIT` with a note saying so. A `.txt` file and a raster image keep their link to the file itself:
by its name every browser opens it as text or as an image, which runs nothing whatever it holds (the evidence
folder holds regular files only: hoh copies QA's in and leaves every link behind, whose target's name a browser
would go by).

The copies are read as they are written, with the loop's page (`render.py`), one at a time: a report of many
loops never holds their evidence in memory.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

COPY_LIMIT = 2 * 1024 * 1024
"""A copy holds this much of its file at most (as `hoh view` serves at most): QA may leave 16 MB per file."""
FOLDER = "files"
"""The copies' folder, inside the report's folder of pages."""
AS_THEY_ARE = frozenset({".txt", ".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".avif"})
"""Names every browser opens as text or as an image, and only as that (SVG is no image here: it is a document
that runs script); their files are linked as they are."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
NAME_CHARS = 60
"""Of a file's own name, the copy keeps its last this many characters (its extension among them)."""


def copy_name(loop: int, name: str) -> str | None:
    """Where the report's copy of loop `loop`'s evidence file `name` goes, inside its folder of pages; None when
    the file is linked as itself (text or an image). Its own name, made safe and cut, says which file it is; a
    digest of the whole name keeps two files apart."""
    if PurePosixPath(name).suffix.lower() in AS_THEY_ARE:
        return None
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    shown = _UNSAFE.sub("_", PurePosixPath(name).name)[-NAME_CHARS:]
    return f"{FOLDER}/loop-{loop:04d}/{digest}-{shown}.txt"


@dataclass(frozen=True)
class FileCopy:
    """A copy to write: the role's file it is of, and how that file is named in the workspace (for the notes)."""

    source: Path
    shown_as: str

    def read(self) -> bytes:
        """The copy's bytes: the file's first `COPY_LIMIT`, and a note if it was cut. Opened without following a
        link or waiting on a FIFO; what cannot be read leaves a note in its place."""
        try:
            fd = os.open(self.source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                    raise OSError(f"{self.shown_as} is not a regular file")
                data = fh.read(COPY_LIMIT + 1)
        except OSError as err:
            data = _text(f"hoh report could not copy {self.shown_as}: {err.strerror or err}\n")
        if len(data) > COPY_LIMIT:
            data = data[:COPY_LIMIT] + _text(f"\n… cut at {COPY_LIMIT:,} bytes by hoh report; the whole file is "
                                             f"{self.shown_as} in the workspace\n")
        return data


def _text(note: str) -> bytes:
    return note.encode("utf-8", "surrogateescape")  # a name that was not UTF-8 comes back as its bytes
