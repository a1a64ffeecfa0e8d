"""A role attempt's transcript entries: what an agent said, thought, ran and got back, read from its CLI's
event stream. Each adapter maps its own wire format (`HarnessAdapter.event_entries`); this module holds
the entry record and the one reader every adapter shares, which turns whatever a line holds into entries
and never raises: the stream is written by an untrusted agent (non-JSON, wrong types, huge lines, binary),
so a bad line becomes an ERROR entry that says what was wrong, and every text is capped."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import StrEnum
from typing import Any, Callable, Iterable, Iterator

MAX_TEXT = 32 * 1024
"""Characters kept of one entry's text; the rest is cut, and the entry says how much."""
MAX_LINE_BYTES = 4 * 1024 * 1024
"""An event line longer than this is not parsed (a flood, not an event); an ERROR entry says so."""
MAX_STREAM_BYTES = 64 * 1024 * 1024
"""Bytes of one stream read for a transcript; what follows is named by an ERROR entry."""
MAX_ENTRIES = 20_000
"""Entries kept of one stream (a reader renders them all); what follows is named by an ERROR entry."""
PREVIEW = 120
"""Characters of a bad line quoted in its ERROR entry."""


class EntryKind(StrEnum):
    PROMPT = "prompt"
    """What hoh sent: the attempt's prompt.md."""
    MESSAGE = "message"
    """Text the agent wrote (its last one is usually its final message)."""
    THINKING = "thinking"
    """Reasoning the CLI showed."""
    TOOL_CALL = "tool_call"
    """A tool the agent called; the text is its input (command, path, JSON arguments)."""
    TOOL_RESULT = "tool_result"
    """What the tool gave back; `call_id` ties it to its call."""
    ERROR = "error"
    """A failure the CLI reported (an HTTP error, a retry, a denial), or a line hoh could not read."""
    REASK = "reask"
    """hoh rejected the attempt's reply (schema errors, violations); the text lists why."""


@dataclass(frozen=True)
class TranscriptEntry:
    kind: EntryKind
    text: str = ""
    tool: str | None = None
    """The tool's name, on TOOL_CALL and TOOL_RESULT entries."""
    call_id: str | None = None
    """The CLI's id of the tool call, shared by a call and its result."""
    is_error: bool = False
    """A TOOL_RESULT that failed (non-zero exit, tool error, denial)."""
    at: str | None = None
    """ISO 8601 time, when the stream has one."""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "text": self.text, "tool": self.tool, "call_id": self.call_id,
                "is_error": self.is_error, "at": self.at}


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """`text` cut to `limit` characters, saying how many were cut; a lone surrogate (JSON's "\\ud800", which no
    UTF-8 file can hold) becomes "?"."""
    if len(text) > limit:
        text = f"{text[:limit]}\n[… {len(text) - limit} more characters cut by hoh]"
    return text.encode("utf-8", errors="replace").decode("utf-8")


def as_text(value: Any) -> str:
    """Any JSON value as a capped text: a string itself, anything else compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return clip(value)
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        text = repr(value)[: MAX_TEXT + 1]
    return clip(text)


def text_of_blocks(content: Any) -> str:
    """The text of a content that is a string or a list of `{"type": "text", "text": ...}` blocks."""
    if isinstance(content, str):
        return clip(content)
    if isinstance(content, list):
        return clip("\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and "text" in b))
    return as_text(content)


def opt_str(value: Any) -> str | None:
    """A field meant to be a short string (an id, a tool name), or None; anything else is stringified short."""
    if value is None:
        return None
    return clip(value if isinstance(value, str) else as_text(value), 200)


def iso_ms(value: Any) -> str | None:
    """An epoch-milliseconds stamp (OpenCode, Pi) as ISO 8601 UTC, or None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return datetime.fromtimestamp(value / 1000, tz=timezone.utc).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return None


def iso(value: Any) -> str | None:
    """An ISO 8601 stamp as the stream gave it, if it is one (so a consumer that parses it cannot fail)."""
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value


def generic_entries(event: dict[str, Any], state: dict[str, Any]) -> list[TranscriptEntry]:
    """An event of a CLI hoh has no mapping for: shown as it came, so nothing is hidden."""
    return [TranscriptEntry(EntryKind.MESSAGE, as_text(event))]


EventMapper = Callable[[dict[str, Any], dict[str, Any]], Iterable[TranscriptEntry]]
"""One adapter's mapping of one event to entries; `state` is a scratch dict kept across one stream's events
(a call seen at its start, so its end adds only the result)."""


def split_lines(data: bytes, final: bool) -> Iterator[tuple[int, bytes | None, str | None]]:
    """(line number, line bytes or None, problem or None) of a stream's bytes. A last line without its newline
    is still being written when the stream is not `final`: it is left out."""
    lines = data.split(b"\n")
    tail = lines.pop()
    for n, line in enumerate(lines, 1):
        yield (n, line, None) if len(line) <= MAX_LINE_BYTES else (
            n, None, f"line {n} is {len(line)} bytes, longer than hoh reads ({MAX_LINE_BYTES} bytes); skipped")
    if tail.strip() and final:
        n = len(lines) + 1
        yield (n, tail, None) if len(tail) <= MAX_LINE_BYTES else (
            n, None, f"line {n} is {len(tail)} bytes, longer than hoh reads ({MAX_LINE_BYTES} bytes); skipped")


def entries_of_stream(data: bytes, mapper: EventMapper, final: bool = True) -> list[TranscriptEntry]:
    """The entries of one raw event stream. Never raises for content: every line that is not a JSON object,
    or whose shape the mapper did not expect, becomes an ERROR entry naming the line and the problem."""
    entries: list[TranscriptEntry] = []
    state: dict[str, Any] = {}
    size = len(data)
    cut = size > MAX_STREAM_BYTES
    if cut:
        data, final = data[:MAX_STREAM_BYTES], False
    for n, raw, problem in split_lines(data, final):
        if len(entries) >= MAX_ENTRIES:
            entries.append(TranscriptEntry(EntryKind.ERROR, f"more than {MAX_ENTRIES} entries: the rest of the "
                                                            f"stream, from line {n}, is not shown"))
            return entries
        if problem:
            entries.append(TranscriptEntry(EntryKind.ERROR, problem))
            continue
        assert raw is not None
        if not raw.strip():
            continue
        text = raw.decode("utf-8", errors="replace")
        try:
            event = json.loads(text)
        except (ValueError, RecursionError):
            entries.append(TranscriptEntry(EntryKind.ERROR, f"line {n} is not JSON: {preview(text)}"))
            continue
        if not isinstance(event, dict):
            entries.append(TranscriptEntry(EntryKind.ERROR, f"line {n} is a JSON {type(event).__name__}, "
                                                            f"not an event object: {preview(text)}"))
            continue
        try:
            found = [entry for entry in mapper(event, state)]
        except Exception as err:  # noqa: BLE001 - an agent controls this stream: a shape no mapper expects
            entries.append(TranscriptEntry(EntryKind.ERROR, f"line {n}: an event of a shape hoh does not read "
                                                            f"({type(err).__name__}): {preview(text)}"))
            continue
        entries += found
    if cut:
        entries.append(TranscriptEntry(EntryKind.ERROR, f"the stream is {size} bytes: only its first "
                                                        f"{MAX_STREAM_BYTES} bytes are shown"))
    return entries


def preview(text: str) -> str:
    """The start of a bad line, printable, for its ERROR entry."""
    short = "".join(c if c.isprintable() else "\N{REPLACEMENT CHARACTER}" for c in text[:PREVIEW])
    return short + ("…" if len(text) > PREVIEW else "")
