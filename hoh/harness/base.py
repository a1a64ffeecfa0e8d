"""The harness adapter contract and the request/result types that cross it.

A harness is one non-interactive coding-agent CLI (codex, opencode, pi, ...). An adapter knows
how to turn a `RoleRequest` into argv + environment (`build_argv`, `env`: pure) and how to read
the CLI's event stream back into a `ParsedRun` (`parse_events`: pure). `run` joins them through
the subprocess choke point. Adapters know nothing of loops, plans or ledgers.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Literal

from ..config import HarnessConfig
from .process import ProcessResult, run_process


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

    @property
    def transient(self) -> bool:
        """Worth retrying with backoff before spending a role attempt."""
        return self in (Outcome.rate_limited, Outcome.network_error)


Access = Literal["read-only", "write"]


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
    resume_session: str | None = None
    """Continue this CLI session (schema re-ask) where the harness supports it."""
    context: dict[str, Any] = field(default_factory=dict)
    """Facts the prompt also states (candidate id, evidence dir); fakes read them directly."""


@dataclass
class Usage:
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None

    def add(self, other: "Usage") -> "Usage":
        cost = None if self.cost_usd is None and other.cost_usd is None else (self.cost_usd or 0) + (other.cost_usd or 0)
        return Usage(self.input_tokens + other.input_tokens, self.cached_input_tokens + other.cached_input_tokens,
                     self.output_tokens + other.output_tokens, self.reasoning_tokens + other.reasoning_tokens, cost)


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

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        return data


class HarnessAdapter(ABC):
    """One CLI. Subclasses set the class attributes and implement the two pure methods."""

    name: ClassVar[str]
    supports_resume: ClassVar[bool] = False
    has_sandbox: ClassVar[bool] = False
    """Whether the CLI itself can stop a read-only role from writing."""

    def __init__(self, config: HarnessConfig):
        self.config = config

    @abstractmethod
    def build_argv(self, request: RoleRequest) -> list[str]:
        """The full argv for one attempt. Pure: no files touched, no processes started."""

    @abstractmethod
    def parse_events(self, lines: Iterable[str]) -> ParsedRun:
        """Read the CLI's stdout event stream. Pure; tolerant of garbage lines."""

    def stdin(self, request: RoleRequest) -> bytes | None:
        """What to send on stdin; None means /dev/null. Never an open pipe."""
        return request.prompt.encode("utf-8")

    def env(self, request: RoleRequest) -> dict[str, str]:
        """Only the variables the CLI needs; subclasses extend this."""
        keep = ("PATH", "LANG", "LC_ALL", "TERM", "TZ", "SYSTEMROOT")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        env["HOME"] = str(request.home or Path.home())
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def prepare(self, request: RoleRequest) -> None:
        """Create config files in the request's isolated home before the run (may write files)."""

    def classify(self, proc: ProcessResult, parsed: ParsedRun) -> tuple[Outcome, str | None]:
        """Turn process facts and parsed events into a typed outcome."""
        if proc.spawn_error:
            return Outcome.crashed, f"could not start {self.name}: {proc.spawn_error}"
        if proc.timed_out == "wall":
            return Outcome.timeout, f"wall timeout after {proc.duration_s:.0f}s"
        if proc.timed_out == "idle":
            return Outcome.idle_timeout, f"no output for the idle timeout (ran {proc.duration_s:.0f}s)"
        if parsed.error_outcome is not None:
            return parsed.error_outcome, parsed.error
        if proc.exit_code != 0:
            detail = parsed.error or proc.stderr_excerpt.strip().splitlines()[-1:] or ["no stderr"]
            return Outcome.crashed, f"exit code {proc.exit_code}: {detail if isinstance(detail, str) else detail[0]}"
        if not parsed.final_message:
            return Outcome.no_final_message, "the harness ended without a final message"
        return Outcome.ok, None

    def run(self, request: RoleRequest, attempt_dir: Path,
            on_spawn: Callable[[int], None] | None = None) -> HarnessResult:
        self.prepare(request)
        proc = run_process(
            self.build_argv(request), cwd=request.workdir, env=self.env(request), stdin=self.stdin(request),
            stdout_path=attempt_dir / "events.jsonl", stderr_path=attempt_dir / "stderr.log",
            wall_timeout=request.wall_timeout, idle_timeout=request.idle_timeout, on_spawn=on_spawn,
        )
        with open(proc.stdout_path, encoding="utf-8", errors="replace") as fh:
            parsed = self.parse_events(fh)
        outcome, error = self.classify(proc, parsed)
        return HarnessResult(outcome, parsed.final_message, parsed.usage, parsed.tool_calls, parsed.session_id,
                             proc.exit_code, proc.duration_s, error)
