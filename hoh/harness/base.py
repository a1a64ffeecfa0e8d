"""The harness adapter contract.

A harness is one non-interactive coding-agent CLI (codex, opencode, pi, ...). An adapter declares
what its CLI can do (`capabilities`), turns a `RoleRequest` into argv + environment (`build_argv`,
`env`: pure) and reads the CLI's event stream back into a `ParsedRun` (`parse_events`: pure); the one
attempt pipeline joins them wherever the attempt runs (`hoh/envs/attempt.py`). Adapters know nothing of loops,
plans, ledgers, or of the place their CLI runs in. The values that cross this contract are in `attempt.py`; what
a request says of its jail and limits, in `sandbox.py`.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Iterable

from ..config import HarnessConfig
from ..errors import HarnessUnavailable
from ..usage import Usage
from . import keys
from .attempt import (QUOTA_PATTERN, ErrorPattern, FrozenInput, HarnessResult, Outcome, ParsedRun, RoleRequest,
                      compile_patterns, json_events, outcome_of_message)
from .capabilities import NO_SANDBOX, Capabilities, CostReport, installed_version
from .entries import EntryKind, TranscriptEntry, entries_of_stream, generic_entries
from .process import ProcessResult
from .sandbox import TOKEN_VARIABLE, Network
from .secrets import copy_credentials, known_secrets

__all__ = ["QUOTA_PATTERN", "Capabilities", "CostReport", "EntryKind", "FrozenInput", "HarnessAdapter", "HarnessResult",
           "Outcome", "ParsedRun", "RoleRequest", "TranscriptEntry", "Usage", "compile_patterns", "copy_credentials",
           "json_events"]
"""What an adapter module imports from here: the contract, and the values and helpers it is written with."""

class HarnessAdapter(ABC):
    """One CLI. Subclasses set `name`, `capabilities` and `error_patterns`, and implement the two pure methods.
    A third party's adapter is chosen as `--harness package.module:Class` (see `registry.py`)."""

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities] = Capabilities()
    error_patterns: ClassVar[tuple[ErrorPattern, ...]] = ()
    """This CLI's error messages that name a usage limit, a rate limit, an auth or a network failure (see
    `outcome_of`)."""

    def __init__(self, config: HarnessConfig):
        self.config = config

    def outcome_of(self, message: str, status: int | None = None) -> Outcome:
        """Type an error the CLI reported (`attempt.outcome_of_message` with this CLI's patterns)."""
        return outcome_of_message(self.error_patterns, message, status)

    @classmethod
    def frozen_inputs(cls, config: HarnessConfig, spec_dir: Path) -> list[FrozenInput]:
        """The files this harness reads that hoh freezes into the workspace at build (default none); `spec_dir`
        is where such a file is looked for when the setting names none. Raises UsageError for a missing one."""
        return []

    # ---- cost --------------------------------------------------------------------------------
    def _own_prices(self) -> bool:
        return self.capabilities.cost is CostReport.always or (
            self.capabilities.cost is CostReport.unless_unpriced_endpoint
            and (not self.config.base_url or self.config.price is not None))

    def reported_cost_counts(self) -> bool:
        """Whether a cost this CLI reports is its real price, not a placeholder for a model it cannot price."""
        return self.capabilities.cost is CostReport.when_given or self._own_prices()

    def always_reports_cost(self) -> bool:
        """Whether every run of this CLI, as configured, reports its own cost (then a cost budget needs no price)."""
        return self._own_prices()

    def can_price(self) -> bool:
        """Whether the cost of this CLI's runs is known: its own figure, the configured price, or the table's."""
        from .pricing import table_knows
        return self.always_reports_cost() or self.config.price is not None or table_knows(self.config.model)

    # ---- installation ------------------------------------------------------------------------
    @property
    def command(self) -> str:
        return self.config.command or self.capabilities.executable or self.name

    def installed_version(self) -> str | None:
        """The CLI's version string, or None when it cannot be run."""
        if self.capabilities.ships_with_hoh:
            return self.capabilities.tested_version
        return installed_version(self.command)

    def check_available(self) -> None:
        """Raise HarnessUnavailable, naming the install command, if this CLI cannot be used."""
        caps = self.capabilities
        if caps.ships_with_hoh:
            return
        version = self.installed_version()
        if version is None:
            raise HarnessUnavailable(f"{self.name}: '{self.command}' is not installed or does not run; "
                                     f"install it with: {caps.install_hint}")
        if self.config.check_version and version != caps.tested_version:
            raise HarnessUnavailable(f"{self.name}: version {version} is installed but hoh is tested with "
                                     f"{caps.tested_version}; install it with: {caps.install_hint} "
                                     "(or --set harness.check_version=false)")

    def sandbox_probe(self, scratch: Path) -> str:
        """A one-line verdict on the CLI's own sandbox on this machine (for `hoh doctor`, when the capabilities
        declare `own_sandbox`)."""
        return NO_SANDBOX

    # ---- endpoint and secrets ------------------------------------------------------------------
    def base_url(self, request: RoleRequest) -> str | None:
        """The model endpoint as the CLI must use it: hoh's proxy for this attempt, else `base_url`."""
        return request.endpoint or self.config.base_url

    def upstream(self) -> str | None:
        """The model endpoint hoh's egress forwards to: `base_url`, or the vendor's API for an API key."""
        return self.config.base_url or (self.capabilities.default_api_url if self.config.api_key_env else None)

    def api_key(self) -> str | None:
        """The real key named by `api_key_env`; only hoh's egress proxy ever sends it."""
        return keys.value(self.config.api_key_env)

    def key_variable(self, request: RoleRequest) -> str | None:
        """The variable the CLI reads its key from: `api_key_env`; for a key-less endpoint behind hoh's proxy,
        `TOKEN_VARIABLE` (the proxy serves only requests that carry the attempt's token, key or no key)."""
        if self.config.api_key_env:
            return self.config.api_key_env
        return TOKEN_VARIABLE if request.egress_token and self.config.base_url else None

    def forward_api_key(self, env: dict[str, str], request: RoleRequest, name: str | None = None) -> None:
        """Give the CLI its key variable (`name`, else `key_variable`): behind hoh's proxy the attempt's token
        (the real key never enters the role; the proxy puts it in the token's place, or drops the token before
        a key-less endpoint), else the key itself. A key-less endpoint with no proxy in front gets
        `PLACEHOLDER_KEY`, for a CLI that will not start without a key."""
        from .sandbox import PLACEHOLDER_KEY
        name = name or self.key_variable(request)
        if not name:
            return
        if request.egress_token:
            env[name] = request.egress_token
        elif request.jail is not None and request.jail.network is Network.none:
            env[name] = PLACEHOLDER_KEY  # a jail with no way out has no use for a key: none enters it
        elif not self.config.api_key_env:
            if self.config.base_url:
                env[name] = PLACEHOLDER_KEY
        elif (key := keys.value(self.config.api_key_env)) is not None:
            env[name] = key

    def logins(self, request: RoleRequest) -> list[tuple[Path, Path]]:
        """(the user's login file, its copy in the role's home) for a CLI that uses its own login."""
        return []

    def secrets(self, request: RoleRequest | None = None) -> list[str]:
        """Values that must never reach a file: the API key named by `api_key_env`, and the tokens of the
        user's login files this CLI is given."""
        logins = self.logins(request) if request is not None else []
        return known_secrets(self.config.api_key_env, [source for source, _copy in logins])

    def jail_paths(self, request: RoleRequest) -> list[Path]:
        """What this CLI must read in the jail beyond its home, the machine's programs and hoh's package."""
        return []

    @abstractmethod
    def build_argv(self, request: RoleRequest) -> list[str]:
        """The full argv for one attempt. Pure: no files touched, no processes started."""

    @abstractmethod
    def parse_events(self, lines: Iterable[str]) -> ParsedRun:
        """Read the CLI's stdout event stream. Pure; tolerant of garbage lines."""

    @classmethod
    def event_entries(cls, event: dict[str, Any], state: dict[str, Any]) -> Iterable[TranscriptEntry]:
        """One event of this CLI's stream as transcript entries (messages, thinking, tool calls with their
        inputs, tool results, errors). Pure; `state` is kept across one stream. A wrongly shaped event may
        raise: the shared reader turns that into an ERROR entry. The default shows the event as it came."""
        return generic_entries(event, state)

    @classmethod
    def transcript_entries(cls, data: bytes | str | Iterable[str], final: bool = True) -> list[TranscriptEntry]:
        """The transcript entries of a raw event stream (`events.jsonl`'s bytes, or its lines). Never raises
        for content; `final=False` for a stream still being written (its unfinished last line is left out)."""
        if isinstance(data, str):
            data = data.encode("utf-8", errors="replace")
        elif not isinstance(data, bytes):
            data = "".join(line if line.endswith("\n") else line + "\n" for line in data).encode(
                "utf-8", errors="replace")
        return entries_of_stream(data, cls.event_entries, final)

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

    def tidy(self, request: RoleRequest) -> None:
        """After an attempt, wherever it ran: remove what the CLI itself leaves in the cwd that is not the role's
        work (its own bookkeeping). Never the role's files."""
