"""The request log: one JSON line per request, with credentials redacted.

Secret headers are replaced by `<redacted len=N>`. As a second guard, the secret values
are also scrubbed from the whole serialized line, so a key that a client echoes into a
body or another header never reaches the file either.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Iterable

SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key",
                            "x-goog-api-key", "cookie", "set-cookie"})


def redact_headers(headers: Iterable[tuple[str, str]]) -> tuple[dict[str, str], list[str]]:
    """(headers with secrets replaced, the secret strings found) — header names lower-cased."""
    out: dict[str, str] = {}
    secrets: list[str] = []
    for name, value in headers:
        key = name.lower()
        if key in SECRET_HEADERS:
            out[key] = f"<redacted len={len(value)}>"
            secrets.append(value)
            scheme, _, token = value.partition(" ")
            if token and scheme.lower() in ("bearer", "basic", "token"):
                secrets.append(token)
        else:
            out[key] = value
    return out, secrets


def scrub(line: str, secrets: Iterable[str]) -> str:
    """Remove every secret (as it appears JSON-escaped) from a serialized line."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        if len(secret) >= 4:  # a 1-3 char "secret" would shred unrelated text
            line = line.replace(json.dumps(secret)[1:-1], "<redacted>")
    return line


class RequestLog:
    """Thread-safe in-memory list of entries, mirrored to an append-only JSONL file if a path is given."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else None
        self._lock = threading.Lock()
        self._entries: list[dict[str, Any]] = []
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, entry: dict[str, Any], secrets: Iterable[str] = ()) -> None:
        line = scrub(json.dumps(entry, ensure_ascii=False, default=str), secrets)
        with self._lock:
            self._entries.append(json.loads(line))
            if self.path:
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(line + "\n")

    def entries(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._entries)
