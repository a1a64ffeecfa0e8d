"""Every attempt of a loop, and one attempt's transcript, as the view shows them.

The attempts are the ones on disk (`transcript.attempts_of`: those running now and those an interrupted
session set aside included), joined with what the journal says of each finished one (ok, outcome,
seconds, the harness it ran on). A transcript is `transcript.read_transcript` of the attempt's folder,
which reads any harness's stream, a live or torn one too; it is read again only when a file of that folder
moved (kept per workspace, a few at most), not whenever the run's stamp does. An attempt is named in a URL by its folder
under the loop's `roles/` (`developer/attempt-1`, `qa.interrupted-1/attempt-2`) and found by looking
that name up among the attempts on disk, so a request never builds a path of its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import HohError
from ..store.events import AttemptFinished
from ..transcript import AttemptRef, Transcript, TranscriptEntry, attempts_of, read_transcript
from . import model
from .files import unscrubbed
from .sources import Source

MAX_ENTRIES = 3000
"""Entries shown of one transcript; the whole stream stays linked as a file."""
MAX_PAGE_CHARS = 4_000_000
"""Text shown of one transcript (each entry is already clipped by `hoh.transcript`): the page stays usable."""
ATTEMPT_FILES = ("prompt.md", "inputs.json", "events.jsonl", "stderr.log", "result.json", "command.json")


@dataclass(frozen=True)
class AttemptRow:
    """One attempt of a loop: where it is, and what the journal recorded when it finished (None: not yet)."""

    ref: str
    role: str
    attempt: int
    interrupted: bool
    finished: AttemptFinished | None
    package: str | None = None
    """A work package's Developer (`P1`), shown beside the others of its loop."""


@dataclass
class Shown:
    """A transcript ready for the page: entries cut to size, and the attempt's files present on disk."""

    row: AttemptRow
    transcript: Transcript
    entries: list[TranscriptEntry]
    hidden: int
    """Entries past MAX_ENTRIES or MAX_PAGE_CHARS, not shown."""
    files: list[str]
    """Workspace-relative paths of the attempt's records that exist."""


def _ref(loop_dir: Path, ref: AttemptRef) -> str:
    return ref.path.relative_to(loop_dir / "roles").as_posix()


def attempts(source: Source, t: int) -> list[AttemptRow]:
    loop_dir = source.paths.loop(t).dir
    finished = {(ev.role, ev.package, ev.attempt): ev for ev in model.facts(source)["attempts"].get(t, [])}
    rows = []
    for ref in attempts_of(loop_dir):
        # A set-aside attempt's number is reused by the rerun, so the journal's record belongs to the live one.
        done = None if ref.interrupted else finished.get((ref.role, ref.package, ref.attempt))
        rows.append(AttemptRow(_ref(loop_dir, ref), ref.role, ref.attempt, ref.interrupted, done, ref.package))
    return rows


def _find(source: Source, t: int, name: str) -> tuple[AttemptRow, Path] | None:
    loop_dir = source.paths.loop(t).dir
    if not loop_dir.is_dir():
        return None
    refs = {_ref(loop_dir, r): r for r in attempts_of(loop_dir)}
    row = next((r for r in attempts(source, t) if r.ref == name), None)
    return (row, refs[name].path) if row is not None and name in refs else None


def transcript(source: Source, t: int, name: str) -> Shown | None:
    found = _find(source, t, name)
    if found is None:
        return None
    row, path = found
    read = source.kept("transcript", (t, name), _files_stamp(path),
                       lambda: read_transcript(path))
    entries, chars = [], 0
    for entry in read.entries[:MAX_ENTRIES]:
        chars += len(entry.text)
        if chars > MAX_PAGE_CHARS and entries:
            break
        entries.append(entry)
    present = [source.paths.rel(path / f) for f in ATTEMPT_FILES
               if (path / f).is_file() and not (path / f).is_symlink() and not unscrubbed(path / f)]
    return Shown(row, read, entries, len(read.entries) - len(entries), present)


def _files_stamp(path: Path) -> tuple[tuple[str, int, int], ...]:
    """Every file of the attempt's folder with its size and mtime: a transcript is read again only when one moved
    (a finished attempt's never do), not on every poll of its page."""
    out = []
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                out.append((entry.name, st.st_size, st.st_mtime_ns))
    except OSError:
        pass
    return tuple(sorted(out))


def stamp(source: Source, watched: str | None) -> str:
    """The change stamp of an attempt's stream (`loop/ref`, as the poll's `attempt=`): a running attempt's
    transcript grows while the journal stands still. Empty when nothing is watched or it is not found."""
    if not watched or "/" not in watched:
        return ""
    t, _, name = watched.partition("/")
    try:
        found = _find(source, int(t), name)
    except (HohError, ValueError, OSError):  # a journal that cannot be read: the run's own stamp still moves
        return ""
    if found is None:
        return ""
    try:
        st = os.stat(found[1] / "events.jsonl")
    except OSError:
        return "-none"
    return f"-{st.st_size}.{st.st_mtime_ns}"
