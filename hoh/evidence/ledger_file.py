"""state/ledger.json on disk: the quick shape check on load, the one-item-per-line encoding, and the copy this
process last read or wrote (so the Runtime's load at every loop is a read and a compare, not a parse)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Generic, TypeVar

LEDGER_SCHEMA_VERSION = 1
ISSUE_KEYS = {"id", "title", "severity", "status", "first_loop", "last_loop", "regressions", "history"}
BEHAVIOUR_KEYS = {"id", "behaviour", "status", "first_verified", "issues", "history"}
SECTIONS = ("issues", "behaviours")

T = TypeVar("T")


def shape_problem(data: dict[str, Any], statuses: Any) -> str | None:
    """A quick structural check on load; the full schema (schemas/ledger.schema.json) is for tests,
    since validating thousands of issues on every load would cost more than the loop's own work."""
    for key, required in (("issues", ISSUE_KEYS), ("behaviours", BEHAVIOUR_KEYS)):
        items = data.get(key)
        if not isinstance(items, list):
            return f"'{key}' is missing or not a list"
        for n, item in enumerate(items):
            if not isinstance(item, dict) or not required <= item.keys():
                return f"{key}[{n}] lacks {', '.join(sorted(required - set(item))) if isinstance(item, dict) else 'fields'}"
            if key == "issues" and item["status"] not in statuses:
                return f"{key}[{n}] has unknown status {item['status']!r}"
    return None


class SavedLines:
    """The file's lines as last saved: one issue or behaviour per line (its JSON), readable, diffable, and fast
    to write at thousands of issues (an indented dump goes through json's slow pure-Python encoder). The
    ledger grows with the run and is saved every loop, so a save encodes only the items `changed` since the
    last, and joins again only the chunks of ROWS_CHUNK lines that hold one."""

    ROWS_CHUNK = 64

    def __init__(self) -> None:
        self.changed: set[tuple[str, str]] = set()
        """(section, id) of every item changed since the last save."""
        self._lines: dict[tuple[str, str], str] = {}
        self._chunks: dict[str, dict[int, tuple[tuple[str, ...], bytes]]] = {}
        """Section → a chunk's first index → (its items' ids, its lines joined, in UTF-8)."""

    def encode(self, data: dict[str, Any]) -> bytes:
        head = {k: v for k, v in data.items() if k not in SECTIONS}
        parts = [json.dumps(head, ensure_ascii=False)[:-1].encode("utf-8")]
        for section in SECTIONS:
            rows = self._rows(section, data[section])
            if rows:
                parts += [f', "{section}": [\n'.encode("utf-8"), *rows, b"\n]"]
            else:
                parts.append(f', "{section}": []'.encode("utf-8"))
        self.changed.clear()
        return b"".join([*parts, b"}\n"])  # one copy of what can be megabytes

    def _rows(self, section: str, items: list[dict[str, Any]]) -> list[bytes]:
        """The section's chunks, each its lines joined and encoded, with the separators between them."""
        chunks = self._chunks.setdefault(section, {})
        changed = {item_id for s, item_id in self.changed if s == section}
        parts: list[bytes] = []
        for start in range(0, len(items), self.ROWS_CHUNK):
            chunk = items[start:start + self.ROWS_CHUNK]
            ids = tuple(item["id"] for item in chunk)
            known = chunks.get(start)
            if known is None or known[0] != ids or not changed.isdisjoint(ids):
                text = ",\n".join(self._line(section, item, changed) for item in chunk)
                known = chunks[start] = (ids, text.encode("utf-8"))
            parts += [b",\n", known[1]] if parts else [known[1]]
        return parts

    def _line(self, section: str, item: dict[str, Any], changed: set[str]) -> str:
        key = (section, item["id"])
        line = self._lines.get(key)
        if line is None or item["id"] in changed:
            line = self._lines[key] = json.dumps(item, ensure_ascii=False)
        return line


class LastCopy(Generic[T]):
    """Path → (the file's bytes when this process last read or wrote it, what it held then)."""

    def __init__(self) -> None:
        self._known: dict[Path, tuple[bytes, T]] = {}

    def get(self, path: Path, now: bytes) -> T | None:
        """What the file held, if its bytes are still `now` (compared whole: no stat is trusted)."""
        known = self._known.get(path)
        return known[1] if known is not None and known[0] == now else None

    def put(self, path: Path, data: bytes, value: T) -> None:
        self._known[path] = (data, value)
