"""The harness adapter contract and the request/result types that cross it.

A harness is one non-interactive coding-agent CLI (codex, opencode, pi, ...). An adapter knows
how to turn a `RoleRequest` into argv + environment (`build_argv`, `env`: pure) and how to read
the CLI's event stream back into a `ParsedRun` (`parse_events`: pure). `run` joins them through
the subprocess choke point. Adapters know nothing of loops, plans or ledgers.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Iterator, Literal

from ..config import HarnessConfig
from ..errors import HarnessUnavailable
from ..fsutil import atomic_write_json
from .jail import JAIL_SETUP_RETRIES, JailSpec, bwrap_argv, setup_failed
from .limits import AttemptLimits, Limits
from .network import attempt_egress, proxy_env, shim_argv
from .process import ProcessResult, call, run_process
from .quota import QUOTA_REGEX
from .secrets import copy_credentials, login_secrets, redact, redact_files, scrub_tree, unlink_links
from ..usage import Usage

__all__ = ["Usage", "copy_credentials", "redact", "redact_files"]  # re-exported for the adapters

HOH_PACKAGE = Path(__file__).resolve().parents[1]


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
    proxy_url: str | None = None
    """hoh's egress proxy for every other host (HTTPS_PROXY), inside the jail; None: no proxy."""
    limits: Limits = field(default_factory=Limits)
    """Processes and memory of the attempt together (`sandbox.limits`)."""


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


class HarnessAdapter(ABC):
    """One CLI. Subclasses set the class attributes and implement the two pure methods."""

    name: ClassVar[str]
    supports_resume: ClassVar[bool] = False
    executable: ClassVar[str | None] = None
    """The CLI's usual command name; None for harnesses that ship inside hoh."""
    npm_package: ClassVar[str | None] = None
    tested_version: ClassVar[str | None] = None

    own_layer: ClassVar[dict[str, str]] = {"planner": "none", "developer": "none", "qa": "none"}
    """What the CLI itself enforces for each role (its sandbox, permission modes, tool lists), as hoh uses
    it; `hoh doctor` shows it beside hoh's jail and guard."""
    error_patterns: ClassVar[tuple[ErrorPattern, ...]] = ()
    """This CLI's error messages that name a usage limit, a rate limit, an auth or a network failure (see
    `outcome_of`)."""
    login_hosts: ClassVar[tuple[str, ...]] = ()
    """The vendor's hosts the CLI reaches with its own login (no `base_url`), through hoh's egress."""
    default_api_url: ClassVar[str | None] = None
    """The vendor's API the CLI uses with an API key and no `base_url`: hoh's egress proxy stands in front
    of it, so the key stays outside the role. None: such a CLI needs `base_url` for an API key."""

    def __init__(self, config: HarnessConfig):
        self.config = config

    def outcome_of(self, message: str, status: int | None = None) -> Outcome:
        """Type an error the CLI reported: a usage limit (often sent as a 429) first, then its HTTP status,
        then this CLI's patterns, else a model error."""
        for pattern, outcome in self.error_patterns:
            if outcome is Outcome.quota_exhausted and pattern.search(message):
                return outcome
        by_status = outcome_of_status(status)
        if by_status is not None:
            return by_status
        for pattern, outcome in self.error_patterns:
            if pattern.search(message):
                return outcome
        return Outcome.model_error

    # ---- cost --------------------------------------------------------------------------------
    def reported_cost_counts(self) -> bool:
        """Whether a cost this CLI reports is its real price, not a placeholder for a model it cannot price."""
        return True

    def always_reports_cost(self) -> bool:
        """Whether every run of this CLI, as configured, reports its own cost (then a cost budget needs no price)."""
        return False

    def can_price(self) -> bool:
        """Whether the cost of this CLI's runs is known: its own figure, the configured price, or the table's."""
        from .pricing import table_knows
        return self.always_reports_cost() or self.config.price is not None or table_knows(self.config.model)

    # ---- installation ------------------------------------------------------------------------
    @property
    def command(self) -> str:
        return self.config.command or self.executable or self.name

    @property
    def install_hint(self) -> str:
        return f"npm install -g {self.npm_package}@{self.tested_version}" if self.npm_package else "reinstall hoh"

    def installed_version(self) -> str | None:
        """The CLI's version string, or None when it cannot be run."""
        if self.executable is None:
            return self.tested_version
        path = shutil.which(self.command)
        if path is None:
            return None
        try:
            proc = call([path, "--version"], timeout=30)
        except OSError:
            return None
        match = re.search(r"\d+\.\d+\.\d+", proc.stdout.decode(errors="replace") + proc.stderr)
        return match.group(0) if proc.ok and match else None

    def check_available(self) -> None:
        """Raise HarnessUnavailable, naming the install command, if this CLI cannot be used."""
        if self.executable is None:
            return
        version = self.installed_version()
        if version is None:
            raise HarnessUnavailable(f"{self.name}: '{self.command}' is not installed or does not run; "
                                     f"install it with: {self.install_hint}")
        if self.config.check_version and version != self.tested_version:
            raise HarnessUnavailable(f"{self.name}: version {version} is installed but hoh is tested with "
                                     f"{self.tested_version}; install it with: {self.install_hint} "
                                     "(or --set harness.check_version=false)")

    def sandbox_probe(self, scratch: Path) -> str:
        """A one-line verdict on the CLI's own sandbox on this machine (for `hoh doctor`)."""
        return "none: the harness has no sandbox; hoh's fingerprint guard still reverts forbidden writes"

    # ---- endpoint and secrets ------------------------------------------------------------------
    def base_url(self, request: RoleRequest) -> str | None:
        """The model endpoint as the CLI must use it: hoh's proxy for this attempt, else `base_url`."""
        return request.endpoint or self.config.base_url

    def upstream(self) -> str | None:
        """The model endpoint hoh's egress forwards to: `base_url`, or the vendor's API for an API key."""
        return self.config.base_url or (self.default_api_url if self.config.api_key_env else None)

    def api_key(self) -> str | None:
        """The real key named by `api_key_env`; only hoh's egress proxy ever sends it."""
        return os.environ.get(self.config.api_key_env or "") or None

    def forward_api_key(self, env: dict[str, str], request: RoleRequest, name: str | None = None) -> None:
        """Give the CLI its key variable: the proxy's placeholder when hoh's proxy stands in front of the
        endpoint (the real key never enters the role), else the key itself."""
        from .egress import PLACEHOLDER_KEY
        name = name or self.config.api_key_env
        if not name or not self.config.api_key_env:
            return
        if request.endpoint:
            env[name] = PLACEHOLDER_KEY
        elif self.config.api_key_env in os.environ:
            env[name] = os.environ[self.config.api_key_env]

    def logins(self, request: RoleRequest) -> list[tuple[Path, Path]]:
        """(the user's login file, its copy in the role's home) for a CLI that uses its own login."""
        return []

    def secrets(self, request: RoleRequest | None = None) -> list[str]:
        """Values that must never reach a file: the API key named by `api_key_env`, and the tokens of the
        user's login files this CLI is given."""
        value = os.environ.get(self.config.api_key_env or "", "")
        found = [value] if len(value) >= 4 else []
        for source, _copy in (self.logins(request) if request is not None else []):
            found += login_secrets(source)
        return found

    def jail_paths(self, request: RoleRequest) -> list[Path]:
        """What this CLI must read in the jail beyond its home, the machine's programs and hoh's package."""
        return []

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
        if proc.timed_out == "output":
            return Outcome.crashed, "stopped: it printed more output than hoh keeps (an output flood)"
        if parsed.error_outcome is not None:
            return parsed.error_outcome, parsed.error
        if proc.exit_code != 0:
            detail = parsed.error or proc.stderr_excerpt.strip().splitlines()[-1:] or ["no stderr"]
            return Outcome.crashed, f"exit code {proc.exit_code}: {detail if isinstance(detail, str) else detail[0]}"
        if not parsed.final_message:
            return Outcome.no_final_message, "the harness ended without a final message"
        return Outcome.ok, None

    def cwd(self, request: RoleRequest) -> Path:
        return request.workdir

    def run(self, request: RoleRequest, attempt_dir: Path,
            on_spawn: Callable[[int], None] | None = None) -> HarnessResult:
        with attempt_egress(self, request, attempt_dir) as request:
            return self._run(request, attempt_dir, on_spawn)

    def _argv_env(self, request: RoleRequest) -> tuple[list[str], dict[str, str]]:
        argv, env = self.build_argv(request), self.env(request)
        if request.proxy_url:
            env.update(proxy_env(request.proxy_url))
        jail = request.jail
        if jail is not None:
            jail = dataclasses.replace(jail, read_only=(*jail.read_only, HOH_PACKAGE, *self.jail_paths(request)))
            argv = bwrap_argv(jail, shim_argv(argv) if jail.egress_socket else argv, self.cwd(request), program=argv[0])
        return argv, env

    def _run(self, request: RoleRequest, attempt_dir: Path, on_spawn: Callable[[int], None] | None) -> HarnessResult:
        if request.home is not None:
            unlink_links(request.home)
        self.prepare(request)
        argv, env = self._argv_env(request)
        atomic_write_json(attempt_dir / "command.json", {"argv": argv, "cwd": str(self.cwd(request)),
                                                         "env_names": sorted(env)})
        for setup_try in range(JAIL_SETUP_RETRIES + 1):
            limits = AttemptLimits(request.limits)
            try:
                proc = run_process(
                    argv, cwd=self.cwd(request), env=env, stdin=self.stdin(request),
                    stdout_path=attempt_dir / "events.jsonl", stderr_path=attempt_dir / "stderr.log",
                    wall_timeout=request.wall_timeout, idle_timeout=request.idle_timeout, on_spawn=on_spawn,
                    max_output=request.max_output_bytes, preexec=limits.preexec(),
                )
            finally:
                limits.close()
            jail_failure = request.jail is not None and setup_failed(
                proc.exit_code, proc.stdout_path.stat().st_size, proc.stderr_excerpt)
            if not jail_failure:
                break
            time.sleep(0.5 * (setup_try + 1))  # another program's mount vanishing mid-setup passes
        secrets = self.secrets(request)
        redact_files([proc.stdout_path, proc.stderr_path], secrets)
        if request.home is not None:
            scrub_tree(request.home, secrets, keep=[copy for _source, copy in self.logins(request)])
        proc = dataclasses.replace(proc, stderr_excerpt=redact(proc.stderr_excerpt, secrets))
        with open(proc.stdout_path, encoding="utf-8", errors="replace") as fh:
            try:
                parsed = self.parse_events(fh)
            except Exception as err:  # noqa: BLE001 - an agent controls this stream; hoh must survive any of it
                parsed = ParsedRun(error=f"unreadable event stream ({type(err).__name__})",
                                   error_outcome=Outcome.crashed)
        if jail_failure:
            outcome, error = Outcome.jail_error, f"the OS jail could not be set up ({jail_failure})"
        else:
            outcome, error = self.classify(proc, parsed)
        error = redact(error, secrets) if error else error
        from .pricing import cost_usage
        usage, source = cost_usage(parsed.usage, self.config, self.reported_cost_counts())
        return HarnessResult(outcome, parsed.final_message, usage, parsed.tool_calls, parsed.session_id,
                             proc.exit_code, proc.duration_s, error, parsed.denials, source)


def json_events(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL event stream; anything else (logs, garbage, cut lines) is skipped."""
    for line in lines:
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(event, dict):
            yield event
