"""The values that cross the adapter contract: one attempt's request, what its event stream said, its
result, and the typed outcome (with the error patterns that type a CLI's messages)."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal

from ..usage import Usage
from .quota import QUOTA_REGEX
from .sandbox import JailSpec, Limits


class Outcome(str, Enum):
    """How one harness invocation ended, judged from its events rather than its exit code."""

    ok = "ok"
    rate_limited = "rate_limited"
    auth_error = "auth_error"
    network_error = "network_error"
    model_error = "model_error"
    timeout = "timeout"
    idle_timeout = "idle_timeout"
    no_final_message = "no_final_message"
    crashed = "crashed"
    quota_exhausted = "quota_exhausted"
    """A subscription's usage limit ("You've hit your limit · resets 1pm"): the run waits for the reset."""
    jail_error = "jail_error"
    """The OS jail could not be set up (bwrap failed before the CLI started): the machine's doing, not the agent's."""

    @property
    def transient(self) -> bool:
        """Worth retrying with backoff before spending a role attempt."""
        return self in (Outcome.rate_limited, Outcome.network_error, Outcome.jail_error)


ErrorPattern = tuple["re.Pattern[str]", Outcome]


def compile_patterns(*pairs: tuple[str, Outcome]) -> tuple[ErrorPattern, ...]:
    """Compile (regex, outcome) pairs, case-insensitive; write each regex word-bounded."""
    return tuple((re.compile(regex, re.IGNORECASE), outcome) for regex, outcome in pairs)


QUOTA_PATTERN = (QUOTA_REGEX, Outcome.quota_exhausted)
"""The usage-limit words every subscription CLI's message uses; adapters list it with their own patterns."""


def outcome_of_status(status: int | None) -> Outcome | None:
    """An HTTP status, when the harness reports one, decides before any message text."""
    if status == 429:
        return Outcome.rate_limited
    if status in (401, 403):
        return Outcome.auth_error
    if status in (408, 502, 503, 504):
        return Outcome.network_error
    return Outcome.model_error if status is not None and status >= 400 else None


def outcome_of_message(patterns: tuple[ErrorPattern, ...], message: str, status: int | None = None) -> Outcome:
    """Type an error a CLI reported: a usage limit (often sent as a 429) first, then its HTTP status, then
    the CLI's patterns, else a model error."""
    for pattern, outcome in patterns:
        if outcome is Outcome.quota_exhausted and pattern.search(message):
            return outcome
    by_status = outcome_of_status(status)
    if by_status is not None:
        return by_status
    for pattern, outcome in patterns:
        if pattern.search(message):
            return outcome
    return Outcome.model_error


Access = Literal["read-only", "write"]

HOH_PACKAGE = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ProgramSite:
    """Where the process of an attempt finds hoh's own programs (the scripted agent)."""

    python: str
    """The interpreter that runs them."""
    hoh_path: str
    """The directory holding hoh's package, for PYTHONPATH."""


LOCAL_SITE = ProgramSite(sys.executable, str(HOH_PACKAGE.parent))


@dataclass(frozen=True)
class RoleRequest:
    """Everything one role attempt needs, fixed by the Runtime before the CLI starts."""

    role: str
    loop: int
    attempt: int
    prompt: str
    workdir: Path
    """The CLI's working directory."""
    access: Access
    """Whether the role may write its workdir (Developer) or not (Planner, QA)."""
    writable: tuple[Path, ...] = ()
    """Directories besides the workdir the role may write (QA's evidence dir)."""
    home: Path | None = None
    """An isolated config home for this harness inside the workspace."""
    wall_timeout: float = 3600.0
    idle_timeout: float = 600.0
    max_output_bytes: int = 512 * 1024 * 1024
    resume_session: str | None = None
    """Continue this CLI session (schema re-ask) where the harness supports it."""
    context: dict[str, Any] = field(default_factory=dict)
    """Facts the prompt also states (candidate id, evidence dir); fakes read them directly."""
    jail: JailSpec | None = None
    """Run inside this OS jail (None: no jail, `sandbox.mode: off`)."""
    endpoint: str | None = None
    """The model base URL as the CLI must use it: hoh's egress proxy in front of `base_url` (set for the
    attempt by `run`); None: `base_url` itself."""
    proxy_url: str | None = field(default=None, repr=False)
    """hoh's egress proxy for every other host (HTTPS_PROXY), inside the jail, the token in its userinfo;
    None: no proxy."""
    egress_token: str | None = field(default=None, repr=False)
    """The attempt's token for hoh's egress proxy, which the CLI holds in place of its key (set for the attempt
    with `endpoint`); None: no proxy of hoh's serves the attempt."""
    limits: Limits = field(default_factory=Limits)
    """Processes and memory of the attempt together (`sandbox.limits`)."""
    site: ProgramSite = LOCAL_SITE
    """Where hoh's own programs are, as the attempt's process sees them (set by its executor)."""
    package: str | None = None
    """The work package of a Developer working beside others (`P1`, `merge-P2`); None: the loop's only one."""


@dataclass
class ParsedRun:
    """What an adapter reads out of one event stream."""

    final_message: str | None = None
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    session_id: str | None = None
    error: str | None = None
    error_outcome: Outcome | None = None
    """Set when the events themselves report a failure (pi exits 0 on model errors)."""
    denials: list[dict[str, str]] = field(default_factory=list)
    """Tool calls the CLI's own permission layer refused: `tool`, `target` (path or command), `reason`."""
    last_tool: str | None = None
    """The last tool call as `name target` (`tool_label`), for live progress."""


@dataclass
class HarnessResult:
    outcome: Outcome
    final_message: str | None
    usage: Usage
    tool_calls: int
    session_id: str | None
    exit_code: int | None
    duration_s: float
    error: str | None = None
    denials: list[dict[str, str]] = field(default_factory=list)
    cost_source: str | None = None
    """Where `usage.cost_usd` came from: harness (the CLI's own figure), price (the configured price),
    table (the price table, by model name); None: unknown."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        return data


@dataclass(frozen=True)
class FrozenInput:
    """A file a harness reads that hoh freezes with the spec at build (the scripted agent's script), so a
    resume, or a task environment it is uploaded to, runs on the same input."""

    setting: str
    """The setting that names the file (`harness.script`); rewritten to name the frozen copy."""
    source: Path
    """The file as the user gave it (resolved, checked to exist)."""
    name: str
    """The copy's file name in the workspace (and in a task environment's run dir)."""


def json_events(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL event stream; anything else (logs, garbage, cut lines) is skipped."""
    for line in lines:
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(event, dict):
            yield event


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069]+")


def tool_label(name: Any, target: Any = "", limit: int = 80) -> str:
    """A tool call in one short printable line: `write calc.py`. Both parts come from the agent's stream, so
    control and bidi characters (a terminal escape, a carriage return that hides the line) become spaces and
    the result is cut to `limit` characters."""
    text = f"{name if isinstance(name, str) else ''} {target if isinstance(target, str) else ''}"
    text = " ".join(_UNPRINTABLE.sub(" ", text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def input_target(tool_input: Any) -> str:
    """What a tool call's input aims at (its path or command), whichever key the CLI names it by."""
    if not isinstance(tool_input, dict):
        return ""
    for key in ("file_path", "filePath", "path", "command", "cmd", "pattern", "url"):
        if isinstance(tool_input.get(key), str):
            return tool_input[key]
    return ""
