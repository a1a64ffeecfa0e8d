"""The journal's fold saved up to a byte offset, so that a reader folds only what was appended since.

    state/fold.json   line 1, the header: schema_version, hoh (the version that wrote it), offset and lines
                      (how much of the journal is folded), sha256 (of the journal's first `offset` bytes),
                      body_sha256 and steps_sha256 (of lines 2 and 3), loop_fields and step_fields, config
                      (hoh.yaml's sha256 and its `Settings`)
                      line 2, the body: the `RunHistory` and `NoteBook` of those bytes (a loop as a row of
                      values in `loop_fields`' order)
                      line 3: `RunHistory.steps`, as rows (status does not read them)

Derived data, written by the Runtime alone (it holds the workspace lock) when a loop or a session ends, whole
or not at all; never by a reader: `hoh status` runs beside a live run, on read-only copies, as other users.
A reader takes the body only when it binds to the journal: this schema and this hoh, an offset at a line's
end within the journal, the journal's bytes up to it and the body as hashed. Anything else (no file, a
corrupt or foreign one, a journal truncated, rewritten or restored from a backup) and the whole journal is
folded as before: a checkpoint can make status faster, never different.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..paths import WorkspacePaths
from ..statuses import LoopStatus
from ..usage import Usage
from .events import KINDS, Event, StepFinished
from .journal import Journal, LoopStats, Record, RunHistory, parse_lines
from .notes import NoteBook
from .readview import Settings, config_digest

FOLD_SCHEMA_VERSION = 1
"""Bump it whenever `RunHistory.apply` or `NoteBook.apply` folds differently: older checkpoints are then ignored."""
log = logging.getLogger("hoh.fold")


@dataclass
class Fold:
    """The journal's folds, and how much of it a checkpoint of them would cover."""

    history: RunHistory
    notes: NoteBook
    offset: int = 0
    """Bytes of the journal folded in complete lines (a last line without its newline is not counted)."""
    lines: int = 0


# ---- reading ----------------------------------------------------------------------------------------------
def _open(paths: WorkspacePaths, steps: bool) -> tuple[dict[str, Any], bytes, bytes | None] | None:
    """The header, the body and (if asked for) the steps' line of a checkpoint of this schema and this hoh."""
    try:
        with open(paths.fold, "rb") as fh:
            header = json.loads(fh.readline())
            if not isinstance(header, dict) or header.get("schema_version") != FOLD_SCHEMA_VERSION \
                    or header.get("hoh") != __version__:
                return None
            body = fh.readline()
            return header, body, fh.readline() if steps else None
    except (OSError, ValueError):
        return None


def cached_settings(paths: WorkspacePaths) -> Settings | None:
    """hoh.yaml's settings as the Runtime validated them, if hoh.yaml is still those bytes."""
    try:
        with open(paths.fold, "rb") as fh:
            header = json.loads(fh.readline())
        config = header["config"]
        if header.get("schema_version") != FOLD_SCHEMA_VERSION or header.get("hoh") != __version__ \
                or not config or config["settings_sha256"] != _settings_digest(config["settings"]) \
                or config["sha256"] != config_digest(paths):
            return None
        return Settings.from_json(config["settings"])
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def read_fold(paths: WorkspacePaths, steps: bool = True) -> Fold:
    """The fold of the whole journal: the checkpoint's plus its tail's when it binds, else all of it. With
    `steps` False the checkpoint's `history.steps` are not read (status does not show them; resume needs them):
    only the tail's are there."""
    try:
        with open(paths.journal, "rb") as fh:
            data = fh.read()
        if (fold := _checkpoint(paths, data, steps)) is not None:
            for record in parse_lines(paths.journal, _lines(data[fold.offset:]), before=fold.lines):
                fold.history.apply(record)
                fold.notes.apply(record)
            return fold
    except Exception as err:  # noqa: BLE001 - whatever is wrong, the full fold below says it as it always has
        log.debug("checkpoint %s not used: %s: %s", paths.fold, type(err).__name__, err)
    records = list(Journal(paths.journal).records())
    return Fold(RunHistory.fold(records), NoteBook.fold(records))


def _checkpoint(paths: WorkspacePaths, data: bytes, steps: bool = True) -> Fold | None:
    """The checkpoint's fold, when it binds to the journal's bytes `data`."""
    found = _open(paths, steps)
    if found is None:
        return None
    header, body, step_line = found
    offset, lines = header["offset"], header["lines"]
    if not (isinstance(offset, int) and isinstance(lines, int) and 0 < offset <= len(data)) \
            or data[offset - 1:offset] != b"\n" or _digest(body) != header["body_sha256"] \
            or step_line is not None and _digest(step_line) != header["steps_sha256"] \
            or header["loop_fields"] != LOOP_FIELDS or header["step_fields"] != STEP_FIELDS \
            or hashlib.sha256(memoryview(data)[:offset]).hexdigest() != header["sha256"]:
        return None
    return _from_json(json.loads(body), json.loads(step_line) if step_line is not None else [], offset, lines)


def _digest(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


def _lines(data: bytes) -> list[str]:
    """Lines as `Journal.records` reads them (text mode, universal newlines)."""
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8").readlines()


# ---- writing ----------------------------------------------------------------------------------------------
LOOP_END_TAIL = 64 * 1024
"""At a loop's end the checkpoint is written again only once the journal has grown this much past it (about 20
loops): the checkpoint grows with the run, and a reader folds at most this much after it, whatever the run's age."""


def save(paths: WorkspacePaths, unless_tail_under: int = 0) -> bool:
    """Write the checkpoint of the journal as it is (for the Runtime, which holds the lock). hoh.yaml's settings
    go in the header when it validates and names one of hoh's own harnesses. False when nothing was written: the
    journal has a line this fold cannot take (it stays for the full fold to report), the write failed, or this
    process's last checkpoint is less than `unless_tail_under` bytes behind the journal. Not fsynced: derived
    data, which a reader takes only when it binds to the journal (a file a crash cut short is folded around).

    The process keeps what its last save folded (`_Writer`), so a save reads, hashes and folds only the lines
    appended since and encodes again only the loops they touched: its cost follows the loop, not the run. What
    it writes is the same as a save from nothing (a test compares the bytes); a journal that is not the one it
    folded (another file, shorter, other bytes before the offset) is read whole again."""
    from .. import fsutil  # looked up at call time: the crash tests count this write
    try:
        if unless_tail_under and (kept := _WRITERS.get(paths.journal)) is not None \
                and os.path.getsize(paths.journal) - kept.fold.offset < unless_tail_under:
            return False
        writer = _WRITERS.pop(paths.journal, None)
        writer = writer.advance(paths) if writer is not None else None
        writer = writer or _Writer.start(paths)
        if writer is None or writer.fold.offset == 0:
            return False
        body_line, step_line = writer.encode()
        header = {"schema_version": FOLD_SCHEMA_VERSION, "hoh": __version__, "offset": writer.fold.offset,
                  "lines": writer.fold.lines, "sha256": writer.prefix.hexdigest(),
                  "body_sha256": _digest(body_line), "steps_sha256": _digest(step_line),
                  "loop_fields": LOOP_FIELDS, "step_fields": STEP_FIELDS, "config": writer.config(paths)}
        fsutil.atomic_write_bytes(paths.fold, json.dumps(header).encode("utf-8") + b"\n" + body_line + step_line,
                                  durable=False)
        _WRITERS[paths.journal] = writer  # the most recently used last
        while len(_WRITERS) > MAX_WRITERS:  # a process that runs many workspaces (Harbor's) keeps the latest few
            del _WRITERS[next(iter(_WRITERS))]
        return True
    except Exception as err:  # noqa: BLE001 - derived data: a run never fails for it
        log.warning("could not write %s: %s: %s", paths.fold, type(err).__name__, err)
        return False


PROBE_BYTES = 4096
"""The journal's last bytes before the folded offset, compared again at the next save: a journal rewritten since
(restored, truncated and regrown) is read whole again."""


class _Writer:
    """The fold a save in this process wrote, the hash of the journal bytes it covers, and each loop's and step's
    encoded row: the next save starts from there."""

    def __init__(self, fold: Fold, prefix: Any, identity: tuple[int, int], probe: bytes):
        self.fold, self.prefix, self.identity, self.probe = fold, prefix, identity, probe
        self.rows: dict[int, str] = {}
        self.dirty: set[int] | None = None
        """The loops whose rows must be encoded again; None: all of them."""
        self.steps: dict[tuple[int, str], tuple[StepFinished, str]] = {}
        self._config: tuple[str, dict[str, Any]] | None = None

    @classmethod
    def start(cls, paths: WorkspacePaths) -> "_Writer | None":
        """From the journal read whole (and the checkpoint on disk, when it binds)."""
        with open(paths.journal, "rb") as fh:
            identity = _identity(os.fstat(fh.fileno()))
            data = fh.read()
        if b"\r" in data:  # line ends other than \n: the byte offsets would not be the lines'
            return None
        try:
            fold = _checkpoint(paths, data)
        except Exception:  # noqa: BLE001 - not used, as by a reader
            fold = None
        fold = fold or Fold(RunHistory(), NoteBook())
        probe = data[max(0, fold.offset - PROBE_BYTES):fold.offset]
        writer = cls(fold, hashlib.sha256(memoryview(data)[:fold.offset]), identity, probe)
        writer._fold_in(paths, data[fold.offset:])
        return writer

    def advance(self, paths: WorkspacePaths) -> "_Writer | None":
        """The same writer with what was appended since folded in; None when the journal is not the one it
        folded (then `start` reads it whole)."""
        offset = self.fold.offset
        with open(paths.journal, "rb") as fh:
            if _identity(os.fstat(fh.fileno())) != self.identity:
                return None
            fh.seek(offset - len(self.probe))
            if fh.read(len(self.probe)) != self.probe:
                return None
            tail = fh.read()
        if b"\r" in tail:
            return None
        self._fold_in(paths, tail)
        return self

    def _fold_in(self, paths: WorkspacePaths, tail: bytes) -> None:
        """Fold the complete lines of `tail` (the journal from the offset on) in; a line that cannot be read
        raises, and the writer is not kept."""
        fold = self.fold
        lines = _lines(tail)
        if lines and not lines[-1].endswith("\n"):
            lines.pop()  # a final write cut short: the next append cuts it off
        records: list[Record] = list(parse_lines(paths.journal, lines, before=fold.lines))
        if len(records) < len(lines):
            lines.pop()  # the last line is not JSON: the full fold leaves it out, and fails once one follows it
        for record in records:
            fold.history.apply(record)
            fold.notes.apply(record)
            loop = getattr(record.event, "loop", None)
            if self.dirty is not None:
                if isinstance(loop, int):
                    self.dirty.add(loop)
                else:
                    self.dirty = None  # a session's start or end: every loop's span may move
        consumed = sum(len(line.encode("utf-8")) for line in lines)
        self.prefix.update(tail[:consumed])
        fold.offset += consumed
        fold.lines += len(lines)
        self.probe = (self.probe + tail[:consumed])[-PROBE_BYTES:]

    def encode(self) -> tuple[bytes, bytes]:
        """The body's and the steps' lines, as `json.dumps` of `_to_json` would write them (a test compares)."""
        h = self.fold.history
        if self.dirty is None:
            self.rows = {}
        for t in self.dirty or ():
            self.rows.pop(t, None)
        self.dirty = set()
        loops = ",".join(self.rows.get(t) or self.rows.setdefault(t, _dumps(_loop_row(stats)))
                         for t, stats in h.loops.items())
        body, steps = _to_json(self.fold, loops=False)
        history = "{" + ",".join(_dumps(name) + ":" + (f"[{loops}]" if name == "loops" else _dumps(value))
                                 for name, value in body["history"].items()) + "}"
        body_line = "{" + _dumps("history") + ":" + history + "," + _dumps("notes") + ":" + _dumps(body["notes"]) + "}"
        kept: dict[tuple[int, str], tuple[StepFinished, str]] = {}
        for key, step in h.steps.items():
            known = self.steps.get(key)
            kept[key] = known if known is not None and known[0] is step else (step, _dumps(_step_row(step)))
        self.steps = kept
        step_line = "[" + ",".join(row for _, row in kept.values()) + "]"
        return body_line.encode("utf-8") + b"\n", step_line.encode("utf-8") + b"\n"

    def config(self, paths: WorkspacePaths) -> dict[str, Any] | None:
        """The header's config, validated again only when hoh.yaml's bytes changed."""
        digest = config_digest(paths)
        if self._config is not None and self._config[0] == digest:
            return self._config[1]
        found = _config(paths)
        self._config = (found["sha256"], found) if found is not None else None
        return found


_WRITERS: dict[Path, _Writer] = {}
MAX_WRITERS = 16


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _config(paths: WorkspacePaths) -> dict[str, Any] | None:
    from ..config import load_config
    from ..harness.registry import ADAPTERS
    digest = config_digest(paths)
    try:
        config = load_config(paths.config)
    except Exception:  # noqa: BLE001 - a hoh.yaml edited into something invalid: readers validate it themselves
        return None
    if digest is None or digest != config_digest(paths) or config.harness.name not in ADAPTERS:
        return None  # changed while read, or a third party's harness: readers import and check it themselves
    settings = Settings.of(config).to_json()
    return {"sha256": digest, "settings": settings, "settings_sha256": _settings_digest(settings)}


def _settings_digest(settings: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode("utf-8")).hexdigest()


# ---- the folds as JSON: a loop and a step as a row of values, in their fields' order ------------------------
LOOP_FIELDS = [f.name for f in dataclasses.fields(LoopStats)]
STEP_FIELDS = [f.name for f in dataclasses.fields(StepFinished)]
USAGE_FIELDS = [f.name for f in dataclasses.fields(Usage)]
_EVENT_FIELDS = {f.name for f in dataclasses.fields(RunHistory)
                 if str(f.type).removesuffix(" | None") in {kind.__name__ for kind in KINDS.values()}}
"""The fields that hold one event (or None): the run's start and end, the attempt in flight, a wait, a stop."""
_STATUS, _USAGE = LOOP_FIELDS.index("status"), LOOP_FIELDS.index("usage")


def _to_json(fold: Fold, loops: bool = True) -> tuple[dict[str, Any], list[list[Any]]]:
    """The body and the steps' rows; with `loops` False the body's `loops` is left for the caller to fill in (its
    value is None) and no step row is made."""
    h = fold.history
    history: dict[str, Any] = {}
    for f in dataclasses.fields(RunHistory):
        value = getattr(h, f.name)
        if f.name == "steps":
            continue
        if f.name == "loops":
            value = [_loop_row(stats) for stats in value.values()] if loops else None
        elif f.name in _EVENT_FIELDS:
            value = value.to_json() if value is not None else None
        elif f.name == "live_environments":
            value = {sid: started.to_json() for sid, started in value.items()}
        history[f.name] = value
    book = fold.notes
    notes = {"stored": book.stored, "inbox_names": sorted(book.inbox_names), "taken_by": book.taken_by,
             "loop_notes": {str(t): notes for t, notes in book.loop_notes.items()}}
    steps = [_step_row(step) for step in h.steps.values()] if loops else []
    return {"history": history, "notes": notes}, steps


def _step_row(step: StepFinished) -> list[Any]:
    return [getattr(step, name) for name in STEP_FIELDS]


def _loop_row(stats: LoopStats) -> list[Any]:
    row = [getattr(stats, name) for name in LOOP_FIELDS]
    row[_STATUS] = stats.status.value
    row[_USAGE] = {role: [getattr(usage, name) for name in USAGE_FIELDS] for role, usage in stats.usage.items()}
    return row


def _loop_from(row: list[Any]) -> LoopStats:
    row[_STATUS] = LoopStatus(row[_STATUS])
    # Usage(*u), not from_json: a cost summed to the int 0 stays 0, as status prints it
    row[_USAGE] = {role: Usage(*u) for role, u in row[_USAGE].items()}
    return LoopStats(*row)


def _from_json(data: dict[str, Any], steps: list[list[Any]], offset: int, lines: int) -> Fold:
    raw = data["history"]
    values: dict[str, Any] = {}
    for f in dataclasses.fields(RunHistory):
        if f.name == "steps":
            values["steps"] = {(row[0], row[1]): StepFinished(*row) for row in steps}
            continue
        value = raw[f.name]  # a field this checkpoint lacks: a KeyError, and the full fold runs
        if f.name == "loops":
            value = {row[0]: _loop_from(row) for row in value}
        elif f.name in _EVENT_FIELDS:
            value = Event.from_json(value) if value is not None else None
        elif f.name == "live_environments":
            value = {sid: Event.from_json(started) for sid, started in value.items()}
        elif f.name == "live_processes":
            value = [(pid, ticks) for pid, ticks in value]
        elif f.name == "role_setting":
            value = {role: (harness, model) for role, (harness, model) in value.items()}
        values[f.name] = value
    n = data["notes"]
    book = NoteBook(stored=list(n["stored"]), inbox_names=set(n["inbox_names"]), taken_by=dict(n["taken_by"]),
                    loop_notes={int(t): list(v) for t, v in n["loop_notes"].items()})
    return Fold(RunHistory(**values), book, offset, lines)
