"""state/ledger.json on disk: the quick shape check on load, the one-item-per-line encoding, and the copy this
process last read or wrote (so the Runtime's load at every loop is a read and a compare, not a parse)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

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


def encode(data: dict[str, Any], line: Callable[[str, dict[str, Any]], str]) -> bytes:
    """One issue or behaviour per line (`line(section, item)`: its JSON): readable, diffable, and fast to write
    at thousands of issues (an indented dump goes through json's slow pure-Python encoder)."""
    head = {k: v for k, v in data.items() if k not in SECTIONS}
    parts = [json.dumps(head, ensure_ascii=False)[:-1]]
    for section in SECTIONS:
        rows = ",\n".join(line(section, item) for item in data[section])
        parts.append(f', "{section}": [\n{rows}\n]' if rows else f', "{section}": []')
    return ("".join(parts) + "}\n").encode("utf-8")


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
