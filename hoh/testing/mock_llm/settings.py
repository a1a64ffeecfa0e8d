"""Runtime settings of the mock: failure injection and output tweaks.

Changed at runtime with `POST /__control` (JSON object) or `MockLLM.control(**changes)`,
read back with `GET /__state`; the same names exist as constructor keywords and CLI flags.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

FAIL_MODES = ("none", "500", "429", "400", "close", "midstream", "stall")
TOOL_PREFS = ("write", "shell")


@dataclass
class Settings:
    """What the next model requests get. Model endpoints only; /__control and /v1/models never fail."""

    fail_mode: str = "none"
    """none | 500 | 429 | 400 (HTTP error with an OpenAI-style body) | close (close the socket without
    answering) | midstream (200, headers and one event, then close without ending the stream) |
    stall (200 and headers, then `stall_after_frames` frames, then silence for `stall_seconds`, then the rest)."""
    fail_count: int = -1
    """How many more requests fail; -1 = forever. Setting `fail_mode` alone re-arms it to -1."""
    retry_after_ms: int | None = None
    """Adds a `retry-after-ms` header to injected HTTP errors (OpenCode and the openai SDK honour it)."""
    stall_seconds: float = 30.0
    stall_after_frames: int = 0
    """How many SSE frames a `stall` sends before going silent: >0 stalls in the middle of a message."""
    final_text: str | None = None
    """Replaces every final message (placeholders are still substituted)."""
    minimal_sse: bool = False
    """Send the minimal SSE form both Codex and the chat clients accepted (no usage, no `event:` lines)."""
    tool_pref: str = "write"
    """write: write steps use an advertised write tool when there is one; shell: always the shell fallback."""
    require_key: bool = False
    """A model request that carries no credential header (authorization, x-api-key, api-key) gets a 401, as a
    keyed endpoint answers; off, the mock is a key-less endpoint that takes any request."""

    def update(self, **changes: Any) -> None:
        """Validate and apply `changes`; raises ValueError naming a bad key or value."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ValueError(f"unknown setting(s) {unknown}; known: {sorted(known)}")
        new = Settings(**asdict(self))
        for key, value in changes.items():
            setattr(new, key, _coerce(key, value))
        if "fail_mode" in changes and "fail_count" not in changes:
            new.fail_count = -1
        self.__dict__.update(new.__dict__)

    def take_failure(self) -> str | None:
        """The failure to inject into the current request, consuming one from the budget."""
        if self.fail_mode == "none" or self.fail_count == 0:
            return None
        if self.fail_count > 0:
            self.fail_count -= 1
        return self.fail_mode

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _coerce(key: str, value: Any) -> Any:
    if key == "fail_mode":
        mode = "none" if value in (None, False) else str(value)
        if mode not in FAIL_MODES:
            raise ValueError(f"fail_mode must be one of {FAIL_MODES}, got {value!r}")
        return mode
    if key == "tool_pref":
        if value not in TOOL_PREFS:
            raise ValueError(f"tool_pref must be one of {TOOL_PREFS}, got {value!r}")
        return value
    if key in ("minimal_sse", "require_key"):
        return value is True or str(value).lower() in ("true", "1", "bare", "yes")
    if key in ("fail_count", "stall_after_frames"):
        return int(value)
    if key == "retry_after_ms":
        return None if value is None else int(value)
    if key == "stall_seconds":
        return float(value)
    if key == "final_text":
        return None if value is None else str(value)
    return value
