"""A role attempt's transcript, read from what hoh kept of it (`WS/state/loops/NNNN/roles/<role>/attempt-K/`):
the prompt, then what the agent said, thought, ran and got back (its harness adapter maps the CLI's events,
`HarnessAdapter.event_entries`), then hoh's verdict. Read-only, and it works on a live attempt (no
result.json yet, a last line half written) as on a finished one. Nothing here raises for what a file holds:
the event stream is an untrusted agent's output, so whatever is wrong with it becomes an ERROR entry."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..harness.entries import (MAX_STREAM_BYTES, MAX_TEXT, EntryKind, TranscriptEntry, clip, entries_of_stream,
                              generic_entries)
from ..harness.secrets import redact
from ..paths import ROLES
from ..usage import Usage

__all__ = ["AttemptRef", "EntryKind", "Transcript", "TranscriptEntry", "attempts_of", "read_transcript"]

MAX_JSON_BYTES = 4 * 1024 * 1024
"""hoh's own small files (inputs.json, result.json) larger than this are not read: not hoh's."""
ATTEMPT = re.compile(r"attempt-([0-9]{1,6})")
ROLE_DIR = re.compile(r"(planner|developer|qa)(?:-((?:merge-)?P[0-9]{1,6}))?(?:\.interrupted-([0-9]{1,6}))?")
"""A role's attempts' dir: the role (`developer-P1` a work package's Developer), set aside when interrupted."""
RERUN = re.compile(r"events\.(transient|quota)-([0-9]{1,6})\.jsonl")
RERUN_NOTE = {"transient": "this run ended in a transient failure (rate limit, network); hoh ran the attempt again",
              "quota": "this run hit the usage limit; hoh waited for its reset and ran the attempt again"}


@dataclass(frozen=True)
class AttemptRef:
    """One attempt directory of a loop."""

    role: str
    attempt: int
    path: Path
    interrupted: bool = False
    """The attempt was cut off (a crash, Ctrl-C) and set aside on resume, in `roles/<role>.interrupted-N/`."""
    set_aside: int | None = None
    """N of `<role>.interrupted-N`, for an interrupted attempt."""
    loop: int | None = None
    package: str | None = None
    """The work package of a Developer that worked beside others (`P1`, `merge-P2`)."""


@dataclass
class Transcript:
    role: str
    loop: int
    attempt: int
    harness: str
    """The harness that ran the attempt, as hoh recorded it ("unknown" when nothing says)."""
    entries: list[TranscriptEntry]
    outcome: str | None
    """The harness outcome (`ok`, `rate_limited`, ...); None while the attempt runs."""
    final_message: str | None
    usage: Usage
    errors: list[str]
    """Why hoh rejected the reply (schema errors, violations): what the next re-ask was about."""
    live: bool = False
    """No result.json yet and not set aside: the attempt is running (or hoh died with it, until a resume)."""
    interrupted: bool = False
    """The attempt was cut off and set aside on resume (`roles/<role>.interrupted-N/`)."""
    ok: bool | None = None
    """hoh accepted the reply; None while live."""
    session_id: str | None = None
    duration_s: float | None = None
    model: str | None = None
    path: Path | None = None
    rejected_next: bool = False
    """A later attempt of the role re-asked after this one's errors."""

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "loop": self.loop, "attempt": self.attempt, "harness": self.harness,
                "entries": [e.to_json() for e in self.entries], "outcome": self.outcome,
                "final_message": self.final_message, "usage": self.usage.to_json(), "errors": self.errors,
                "live": self.live, "interrupted": self.interrupted, "ok": self.ok, "session_id": self.session_id,
                "duration_s": self.duration_s,
                "model": self.model}


def attempts_of(loop_dir: Path) -> list[AttemptRef]:
    """Every attempt of a loop (`WS/state/loops/NNNN`), in the order they ran: by role (planner, developer, qa),
    a role's interrupted runs before its last one, attempts by number."""
    roles = loop_dir / "roles"
    loop = int(loop_dir.name) if loop_dir.name.isdigit() else None
    if not roles.is_dir() or roles.is_symlink():
        return []
    found: list[tuple[int, int, int, AttemptRef]] = []
    for role_dir in roles.iterdir():
        if role_dir.is_symlink() or not role_dir.is_dir():
            continue
        named = ROLE_DIR.fullmatch(role_dir.name)
        if named is None:
            continue
        role, package = named[1], named[2]
        n = int(named[3]) if named[3] else None
        for attempt_dir in role_dir.iterdir():
            match = ATTEMPT.fullmatch(attempt_dir.name)
            if match and attempt_dir.is_dir() and not attempt_dir.is_symlink():
                ref = AttemptRef(role, int(match[1]), attempt_dir, n is not None, n, loop, package)
                # Packages side by side in package order; a conflict's merge after them.
                found.append((ROLES.index(role), _package_order(package), n if n is not None else 1 << 30,
                              ref.attempt, ref))
    return [ref for *_key, ref in sorted(found, key=lambda item: item[:4])]


def _package_order(package: str | None) -> tuple[int, int]:
    if package is None:
        return (0, 0)
    merge = package.startswith("merge-")
    return (2 if merge else 1, int(package.removeprefix("merge-P") if merge else package[1:]))


def read_transcript(attempt_dir: Path) -> Transcript:
    """The transcript of one attempt directory, live or finished."""
    attempt_dir = Path(attempt_dir)
    entries: list[TranscriptEntry] = []
    inputs = _json_file(attempt_dir / "inputs.json", entries)
    result = _json_file(attempt_dir / "result.json", entries)
    role, loop, attempt = _identity(attempt_dir, inputs)
    # A set-aside attempt was cut off and will never finish; any other without result.json is still running (or
    # its process died with hoh's, which only the next resume tells: it sets the attempt aside).
    named = ROLE_DIR.fullmatch(attempt_dir.parent.name)
    set_aside = named is not None and named[3] is not None
    interrupted = set_aside and result is None  # a set-aside role's earlier attempts may have finished
    live = result is None and not set_aside
    prompt = _text_file(attempt_dir / "prompt.md")
    # hoh writes prompt.md just before the CLI starts: its time is the attempt's start, for every CLI.
    entries.insert(0, TranscriptEntry(EntryKind.PROMPT, prompt if prompt is not None else "[no prompt.md]",
                                      at=_mtime(attempt_dir / "prompt.md")))
    harness_result = result.get("harness") if result is not None and isinstance(result.get("harness"), dict) else {}
    events = _stream(attempt_dir / "events.jsonl")
    name = _harness_name(attempt_dir, inputs, role, events)
    adapter = _adapter(name)
    for rerun in _reruns(attempt_dir):
        why = RERUN.fullmatch(rerun.name)[1]  # type: ignore[index]  # _reruns only lists matching names
        entries += _entries(adapter, _stream(rerun) or b"", True)
        entries.append(TranscriptEntry(EntryKind.ERROR, RERUN_NOTE[why]))
    if events is None:
        entries.append(TranscriptEntry(EntryKind.ERROR, "no events.jsonl" + (" yet" if live else "")))
    else:
        entries += _entries(adapter, events, not live)
    if interrupted:
        entries.append(TranscriptEntry(EntryKind.ERROR, "the attempt was cut off (hoh stopped or crashed) and set "
                                                        "aside when the run resumed", at=_mtime(attempt_dir)))
    recorded = (result or {}).get("errors")
    errors = [clip(e if isinstance(e, str) else json.dumps(e, default=str), MAX_TEXT)
              for e in (recorded if isinstance(recorded, list) else [])]
    rejected_next = (attempt_dir.parent / f"attempt-{attempt + 1}").is_dir()
    if errors:
        then = f"hoh re-asked in attempt {attempt + 1}" if rejected_next else "no re-ask followed"
        entries.append(TranscriptEntry(EntryKind.REASK, f"hoh rejected this reply ({then}):\n" +
                                       "\n".join(f"- {e}" for e in errors), at=_mtime(attempt_dir / "result.json")))
    unfinished = result is None  # what hoh did not record is read from the stream itself
    usage, final, session = _live_facts(adapter, events) if unfinished else (None, None, None)
    if unfinished:
        # hoh scrubs known secrets from a stream when its attempt ends; one still running (or cut off) is not yet
        # scrubbed, so the secrets a reader could show or export (a login token the agent printed) are masked here.
        secrets = _secrets(attempt_dir, role)
        entries = _redacted(entries, secrets)
        final = redact(final, secrets) if final and secrets else final
    return Transcript(
        role=role, loop=loop, attempt=attempt, harness=name, entries=entries,
        outcome=_str(harness_result.get("outcome")),
        final_message=_str(harness_result.get("final_message"), MAX_TEXT) if not unfinished else final,
        usage=_usage(harness_result.get("usage")) if not unfinished else (usage or Usage()), errors=errors,
        live=live, interrupted=interrupted,
        ok=result.get("ok") if result is not None and isinstance(result.get("ok"), bool) else None,
        session_id=_str(harness_result.get("session_id")) if not unfinished else session,
        duration_s=_float(harness_result.get("duration_s")), model=_str((inputs or {}).get("model")),
        path=attempt_dir, rejected_next=bool(errors) and rejected_next)


# ---- the files ---------------------------------------------------------------------------------------------
def _regular(path: Path) -> bool:
    # hoh writes these files itself; a symlink in their place was not written by hoh.
    return path.is_file() and not path.is_symlink()


def _read(path: Path, limit: int) -> bytes | None:
    if not _regular(path):
        return None
    try:
        with open(path, "rb") as fh:
            return fh.read(limit + 1)
    except OSError:
        return None


def _mtime(path: Path) -> str | None:
    try:
        stamp = path.lstat().st_mtime
    except OSError:
        return None
    return datetime.fromtimestamp(stamp, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _json_file(path: Path, entries: list[TranscriptEntry]) -> dict[str, Any] | None:
    """A small JSON object file of hoh's; None when absent. A half-written or foreign one is an ERROR entry."""
    data = _read(path, MAX_JSON_BYTES)
    if data is None:
        return None
    try:
        value = json.loads(data.decode("utf-8", errors="replace")) if len(data) <= MAX_JSON_BYTES else None
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        entries.append(TranscriptEntry(EntryKind.ERROR, f"{path.name} is not a JSON object hoh can read"))
        return None
    return value


def _text_file(path: Path) -> str | None:
    data = _read(path, MAX_TEXT * 4)
    return None if data is None else clip(data.decode("utf-8", errors="replace"))


def _stream(path: Path) -> bytes | None:
    """An event stream's bytes, one more than the reader keeps so it can say the stream was cut."""
    return _read(path, MAX_STREAM_BYTES)


def _reruns(attempt_dir: Path) -> list[Path]:
    """Earlier runs of the attempt set aside after a transient failure or a usage limit, oldest first."""
    try:
        found = [p for p in attempt_dir.iterdir() if RERUN.fullmatch(p.name) and _regular(p)]
    except OSError:
        return []
    return sorted(found, key=lambda p: (p.stat().st_mtime, p.name))


def _identity(attempt_dir: Path, inputs: dict[str, Any] | None) -> tuple[str, int, int]:
    """(role, loop, attempt): from the directory's place in the tree, which hoh chose, else from inputs.json."""
    match = ATTEMPT.fullmatch(attempt_dir.name)
    named = ROLE_DIR.fullmatch(attempt_dir.parent.name)
    role = named[1] if named else attempt_dir.parent.name
    loop_name = attempt_dir.parent.parent.parent.name
    inputs = inputs or {}
    return (role if role in ROLES else _str(inputs.get("role")) or role,
            int(loop_name) if loop_name.isdigit() else _int(inputs.get("loop")),
            int(match[1]) if match else _int(inputs.get("attempt")))


# ---- the harness -------------------------------------------------------------------------------------------
def _harness_name(attempt_dir: Path, inputs: dict[str, Any] | None, role: str, events: bytes | None) -> str:
    """What hoh recorded at the attempt's start (inputs.json), else the workspace's configuration for the role
    (hoh.yaml may have changed since: it is read only for attempts older than that record), else what the
    stream's first event looks like."""
    recorded = _str((inputs or {}).get("harness"), 200)
    if recorded:
        return recorded
    configured = _configured(attempt_dir, role)
    return configured or _sniffed(events) or "unknown"


def _configured(attempt_dir: Path, role: str) -> str | None:
    config = attempt_dir.parents[5] / "hoh.yaml" if len(attempt_dir.parents) > 5 else None
    data = _read(config, MAX_JSON_BYTES) if config is not None else None
    if data is None:
        return None
    try:
        import yaml
        doc = yaml.safe_load(data.decode("utf-8", errors="replace"))
    except Exception:  # noqa: BLE001 - a broken hoh.yaml only means the name is looked for elsewhere
        return None
    if not isinstance(doc, dict):
        return None
    roles = doc.get("roles") if isinstance(doc.get("roles"), dict) else {}
    own = roles.get(role) if isinstance(roles.get(role), dict) else {}
    base = doc.get("harness") if isinstance(doc.get("harness"), dict) else {}
    return _str(own.get("harness")) or _str(base.get("name"))


def _sniffed(events: bytes | None) -> str | None:
    """The CLI whose first event this is (each opens its stream its own way; see HARNESSES.md)."""
    for line in (events or b"").split(b"\n", 20)[:20]:
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "thread.started":
            return "codex"
        if kind == "system" and event.get("subtype") == "init":
            return "claude"
        if kind == "session" and "version" in event:
            return "pi"
        if kind == "session" and str(event.get("id", "")).startswith("scripted-"):
            return "scripted"
        if "sessionID" in event:
            return "opencode"
    return None


def _adapter(name: str) -> Any:
    """The adapter class for `name`, or None (then events are shown as they came). Only hoh's own adapters
    and importable third-party ones; a failed import is no error here."""
    from ..harness import registry
    try:
        return registry.adapter_class(name)
    except Exception:  # noqa: BLE001 - UsageError, or whatever a third party's module raises on import
        return None


def _entries(adapter: Any, data: bytes, final: bool) -> list[TranscriptEntry]:
    if adapter is None:
        return entries_of_stream(data, generic_entries, final)
    try:
        return adapter.transcript_entries(data, final)
    except Exception as err:  # noqa: BLE001 - a third party's mapping may fail in any way; show that, not raise
        return [TranscriptEntry(EntryKind.ERROR, f"{adapter.name}'s adapter could not read its stream "
                                                 f"({type(err).__name__})")]


def _live_facts(adapter: Any, events: bytes | None) -> tuple[Usage | None, str | None, str | None]:
    """Usage, last message and session so far of a running attempt, from its adapter's own parser."""
    if adapter is None or events is None:
        return None, None, None
    try:
        from ..config import HarnessConfig
        parsed = adapter(HarnessConfig(name=adapter.name)).parse_events(
            events[:MAX_STREAM_BYTES].decode("utf-8", errors="replace").splitlines())
        return parsed.usage, _str(parsed.final_message, MAX_TEXT), _str(parsed.session_id)
    except Exception:  # noqa: BLE001 - parsers are tolerant, but a live view must outlive any stream
        return None, None, None


def _secrets(attempt_dir: Path, role: str) -> list[str]:
    """The values hoh's scrub would remove from this attempt's logs: the API key named by the role's harness
    settings and the tokens of the logins it is given (`HarnessAdapter.secrets`)."""
    if len(attempt_dir.parents) <= 5:
        return []
    root = attempt_dir.parents[5]
    try:
        from ..config import load_config, role_harness
        from ..harness import registry
        from ..harness.attempt import RoleRequest
        from ..paths import WorkspacePaths
        adapter = registry.create(role_harness(load_config(root / "hoh.yaml"), role))
        home = WorkspacePaths(root).harness_home(adapter.name) / role
        return adapter.secrets(RoleRequest(role=role, loop=0, attempt=0, prompt="", workdir=root, access="read-only",
                                           home=home))
    except Exception:  # noqa: BLE001 - no readable settings: nothing is known to mask (the end-of-attempt scrub stays)
        return []


def _redacted(entries: list[TranscriptEntry], secrets: list[str]) -> list[TranscriptEntry]:
    if not secrets:
        return entries
    return [replace(e, text=redact(e.text, secrets)) if any(s in e.text for s in secrets) else e for e in entries]


# ---- typed reads of untyped values -------------------------------------------------------------------------
def _str(value: Any, limit: int = 200) -> str | None:
    return clip(value, limit) if isinstance(value, str) else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _usage(value: Any) -> Usage:
    try:
        return Usage.from_json(value if isinstance(value, dict) else None)
    except (TypeError, ValueError):
        return Usage()
