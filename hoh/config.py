"""The run configuration, `hoh.yaml`: pydantic models that refuse unknown keys.

Layering, lowest first: defaults, a `--config FILE`, command-line flags, `--set a.b=c` overrides.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import StateError, UsageError

CONFIG_SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True)


def _no_bool(value: Any) -> Any:
    """YAML reads `yes`/`true` as a boolean, which pydantic would take as the number 1."""
    if isinstance(value, bool):
        raise ValueError("expected a number, got a boolean")
    return value


class PriceConfig(_Model):
    """A model's price in USD per million tokens, for a model the price table does not know (a self-hosted
    or custom endpoint). Pi and OpenCode are given it and report the cost themselves; for the other
    harnesses hoh prices the tokens with it."""

    input: float = Field(ge=0, allow_inf_nan=False)
    """Per million input tokens that were not cache reads."""
    output: float = Field(ge=0, allow_inf_nan=False)
    """Per million output tokens (reasoning included)."""
    cache_read: float | None = Field(None, ge=0, allow_inf_nan=False)
    """Per million input tokens read from the provider's cache; None: the input price."""

    no_bools = field_validator("input", "output", "cache_read", mode="before")(_no_bool)


class HarnessConfig(_Model):
    name: str | None = None
    """Harness adapter: codex, opencode, pi, claude, scripted (hoh's model-free fake), or a third party's
    `package.module:Class`; required, there is no default (`hoh doctor` lists them)."""
    model: str | None = None
    """Model name passed to the harness; None lets the harness use its own default."""
    base_url: str | None = None
    """A model endpoint: OpenAI-compatible (vLLM, Ollama, a mock), Anthropic Messages for claude; None uses the
    harness's own login."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key for `base_url` (never the key itself)."""
    script: str | None = None
    """Scripted harness only: the script file (copied into the workspace at build)."""
    extra_args: list[str] = Field(default_factory=list)
    """Extra argv appended to every harness invocation."""
    command: str | None = None
    """The CLI's executable (a name on PATH or a path); None uses the harness's usual name."""
    check_version: bool = True
    """Refuse to run a CLI whose version differs from the one hoh was tested with."""
    price: PriceConfig | None = None
    """The model's price, when the price table does not know it; None: the harness's own figure, else the table."""


class RoleConfig(_Model):
    """One role's own harness and model; unset keys come from `harness.*`."""

    harness: str | None = None
    """Harness adapter for this role (e.g. a cheap CLI for the Planner): a name or `package.module:Class`."""
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    price: PriceConfig | None = None
    """This role's model price; with its own `model`, `harness.price` is not inherited."""


class RolesConfig(_Model):
    """Per-role overrides of `harness.*`: `roles.planner.model: cheap-model`."""

    planner: RoleConfig | None = None
    developer: RoleConfig | None = None
    qa: RoleConfig | None = None


def role_harness(config: "HohConfig", role: str) -> HarnessConfig:
    """The harness settings a role runs with: `harness.*` with `roles.<role>.*` laid over it. A role on
    another harness drops the base harness's command and extra arguments; a role with its own model
    drops the base price (a price belongs to a model)."""
    override = getattr(config.roles, role)
    if override is None:
        return config.harness
    changes = override.model_dump(exclude_none=True, exclude={"harness"})
    if override.harness is not None and override.harness != config.harness.name:
        changes.update(name=override.harness, command=None, extra_args=[])
    if override.model is not None and override.price is None:
        changes["price"] = None
    if override.price is not None:
        changes["price"] = override.price
    return config.harness.model_copy(update=changes)


class BudgetConfig(_Model):
    """Limits on the whole run, cumulative over every session (resumes included). Each is checked before
    every role attempt against what is spent plus that role's largest attempt so far; a run that would
    pass one stops as `budget_exhausted` and `hoh resume --set budget.KEY=...` continues it."""

    tokens: int | None = Field(None, gt=0)
    """Input plus output tokens of every attempt (cache reads are input)."""
    cost_usd: float | None = Field(None, gt=0, allow_inf_nan=False)
    """USD: the harness's own figure where it reports one, else tokens × price. Every role's model must have
    a known price."""
    wall_hours: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Wall-clock hours of all sessions together (waits for a usage-limit reset included)."""

    no_bools = field_validator("tokens", "cost_usd", "wall_hours", mode="before")(_no_bool)


HookCommand = str | list[str]


class HooksConfig(_Model):
    """Commands for people who leave a run alone for days. Each gets a JSON summary on stdin; a failure or
    timeout is recorded in the journal and never stops the run."""

    on_loop_end: HookCommand | None = None
    """Run after every finished loop with the loop's summary (a string is split like a shell would, but no
    shell runs it; for pipes use ["sh", "-c", "..."])."""
    on_stop: HookCommand | None = None
    """Run when a session of the run ends (finished, complete, stalled, budget_exhausted, stopped, a role
    failed), with the run's summary."""
    timeout_seconds: float = Field(60.0, gt=0, allow_inf_nan=False)
    """A hook still running after this is killed (and recorded)."""

    @field_validator("on_loop_end", "on_stop")
    @classmethod
    def _a_command(cls, value: HookCommand | None) -> HookCommand | None:
        if value is None:
            return value
        try:
            argv = shlex.split(value) if isinstance(value, str) else value
        except ValueError as err:
            raise ValueError(f"cannot split the command like a shell would ({err})") from None
        if not argv or not all(argv):
            raise ValueError("a hook needs a command")
        return value


class TimeoutsConfig(_Model):
    wall_seconds: float = Field(3600.0, gt=0)
    """Hard limit for one role attempt."""
    idle_seconds: float = Field(600.0, gt=0)
    """Kill an attempt whose harness printed nothing for this long."""
    max_output_mb: float = Field(512.0, gt=0)
    """Stop an attempt whose harness printed more than this (stdout and stderr): a flood, not work."""


class MechanismsConfig(_Model):
    """The three HoH mechanisms; switch one off for an ablation."""

    plan_update: bool = True
    """Off: the Planner runs once and D_1 is reused every loop."""
    evidence_feedback: bool = True
    """Off: the Planner gets no evidence from earlier loops (no index, no ledger, no QA reports)."""
    warm_start: bool = True
    """Off: the Developer starts each loop from an empty project."""


class PolicyConfig(_Model):
    max_retries: int = Field(2, ge=0)
    """Re-asks of a role after a schema, semantic or permission violation."""
    on_role_failure: Literal["stop", "continue"] = "stop"
    """When a role exhausts its attempts: stop the run (resumable), or record the loop as failed and go on."""
    transient_retries: int = Field(3, ge=0)
    """Reruns of an attempt that failed on a rate limit or network error, before it counts as failed."""
    transient_backoff_seconds: float = Field(5.0, ge=0)
    """First wait before such a rerun; each later wait is four times longer."""
    patience: int | None = Field(None, ge=1)
    """End the run as `stalled` after this many loops in a row without progress (no criterion newly verified,
    no issue closed, no behaviour added); None: never."""
    max_quota_wait_hours: float = Field(12.0, ge=0, allow_inf_nan=False)
    """When a subscription CLI reports its usage limit, wait for the reset up to this long (per attempt);
    a later reset stops the run as `quota_exhausted`."""
    developers: int = Field(1, ge=1, le=8)
    """Developers that may work at once in a loop: the Planner may group its tasks into up to this many work
    packages, each built by its own Developer on its own copy of A_{t-1}, merged by the Runtime in package order
    (`runtime/packages.py`). 1: one Developer, no packages."""

    no_bools = field_validator("patience", "max_quota_wait_hours", "developers", mode="before")(_no_bool)


class IndexConfig(_Model):
    budget_bytes: int = Field(2000, ge=500)
    """Upper bound on INDEX.md, whatever the length of the history."""
    top_issues: int = Field(8, ge=1)
    """Issues listed by name in the index; the rest are counted and pointed to."""
    recent_loops: int = Field(5, ge=1)
    """Loops shown in the verdict trend."""


class LedgerConfig(_Model):
    same_defect_loops: int = Field(10, ge=0)
    """A QA finding that names no issue or behaviour is the issue of the same title (case, whitespace and
    punctuation folded) when that issue is active, or was closed within this many loops: reopened, not filed
    again. 0: active issues only."""


class ChecksConfig(_Model):
    replay: bool = True
    """Replay every admitted check on each new candidate before QA (the verified behaviours as a regression
    suite the Runtime runs itself)."""
    replay_budget_s: float | None = Field(600.0, gt=0)
    """Time for one loop's replay, and again for the admission of QA's new checks; over it, the rest is skipped
    (at-risk checks run first) or not admitted. null: no limit."""


class GuardConfig(_Model):
    ignore: list[str] = Field(default_factory=lambda: ["__pycache__", ".pytest_cache", "*.pyc"])
    """Names of caches that tools create as a side effect; not counted as writes to read-only areas."""


class RoleHostsConfig(_Model):
    """Hosts a jailed role may reach through hoh's egress besides its model endpoint ("host", "host:port",
    "*.domain"). None: the role's default."""

    planner: list[str] = Field(default_factory=list)
    """Nothing by default: the Planner reads and plans."""
    developer: list[str] | None = None
    """None: the package registries this machine's pip, npm and apt are configured for (`hoh doctor` lists
    them), so the Developer can install dependencies."""
    qa: list[str] = Field(default_factory=list)
    """Nothing by default: QA judges the candidate as it is."""


class LimitsConfig(_Model):
    """What one role attempt may use of the machine (`hoh doctor` says how each is enforced here)."""

    tmp_mb: int = Field(1024, ge=16)
    """Size of the role's private /tmp (a tmpfs: it would otherwise hold RAM)."""
    memory_mb: int | None = Field(None, ge=64)
    """Memory of the attempt's processes together (a cgroup where the machine delegates one, else each
    process's address space); None: no limit."""
    processes: int | None = Field(4096, ge=16)
    """Processes and threads of the attempt together (a cgroup where the machine delegates one, else the
    role user's process count); None: no limit."""


class SandboxConfig(_Model):
    """The OS jail every role attempt runs in (see hoh/envs/local/jail.py)."""

    mode: Literal["bwrap", "off"] = "bwrap"
    """`bwrap`: each attempt in a bubblewrap jail (no capabilities, a root filesystem of what the role needs,
    its own PID and network namespaces, its own /tmp). `off`: no jail; only hoh's guard and the harness's own
    flags remain (for containers without namespaces); every run says so."""
    network: Literal["egress", "none", "shared"] = "egress"
    """`egress`: each jailed role in its own network namespace, out only through hoh's proxy (the model
    endpoint, plus `allow_hosts`), every connection logged per attempt. `none`: no network at all (a harness
    whose model runs in-process, like the scripted agent). `shared`: the machine's network (loopback and
    abstract sockets included); an opt-out that every run states."""
    allow_hosts: RoleHostsConfig = Field(default_factory=RoleHostsConfig)
    read_only_paths: list[str] = Field(default_factory=list)
    """More directories the roles may read (a toolchain outside /usr and PATH, e.g. /opt/go); absolute paths."""
    limits: LimitsConfig = Field(default_factory=LimitsConfig)

    @field_validator("mode", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        return "off" if value is False else value  # YAML reads a bare `off` as false

    @field_validator("read_only_paths")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        for path in value:
            if not Path(path).is_absolute():
                raise ValueError(f"'{path}' is not an absolute path")
        return value


class EnvironmentConfig(_Model):
    """Where role attempts run (see hoh/envs/): `local` (this machine, in the OS jail of `sandbox`) or an
    environment of Harbor's (`docker`, `podman`, `modal`, … or a third party's `package.module:Class`),
    one per role, which the Runtime only starts, copies into and out of, execs in and stops."""

    name: str = "local"
    image: str | None = None
    """The image every role's environment starts from (`--env-image`); it needs a POSIX shell, and a `python3`
    for the scripted harness."""
    dockerfile: str | None = None
    """A Dockerfile to build that image from instead (`--env-dockerfile`), frozen into the workspace."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Passed to the Harbor environment class as it is (e.g. a cloud sandbox's options)."""

    @model_validator(mode="after")
    def _one_image(self) -> "EnvironmentConfig":
        if self.image and self.dockerfile:
            raise ValueError("give an image or a Dockerfile, not both")
        if self.name == "local" and (self.image or self.dockerfile):
            raise ValueError("an image or a Dockerfile needs an environment other than local (--env docker)")
        return self

    @property
    def local(self) -> bool:
        return self.name == "local"


class HohConfig(_Model):
    schema_version: int = CONFIG_SCHEMA_VERSION
    mode: Literal["hoh", "developer_only"] = "hoh"
    """`hoh`: Planner → Developer → QA. `developer_only`: the harness alone, re-run each loop on its own
    output with the spec as its plan and no QA (the benchmark's vanilla and continuation baselines)."""
    harness: HarnessConfig = Field(default_factory=HarnessConfig)
    loops: int = Field(3, ge=1)
    """Target number of loops for this run."""
    timeouts: TimeoutsConfig = Field(default_factory=TimeoutsConfig)
    mechanisms: MechanismsConfig = Field(default_factory=MechanismsConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    index: IndexConfig = Field(default_factory=IndexConfig)
    ledger: LedgerConfig = Field(default_factory=LedgerConfig)
    checks: ChecksConfig = Field(default_factory=ChecksConfig)
    guard: GuardConfig = Field(default_factory=GuardConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    roles: RolesConfig = Field(default_factory=RolesConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    hooks: HooksConfig = Field(default_factory=HooksConfig)

    @property
    def jailed_here(self) -> bool:
        """Every role (and check run) runs in this machine's OS jail: not without it, not in an environment."""
        return self.sandbox.mode == "bwrap" and self.environment.local

    @property
    def roles_apart(self) -> bool:
        """No role runs on this machine unjailed: each is in its OS jail or in an environment, whose writes reach
        the project only through hoh's copy-back (plain writes by name, as a change feed sees them)."""
        return self.jailed_here or not self.environment.local


def _describe(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "(top level)"
    return f"{source}: invalid key '{key}': {first['msg']}"


def parse_config(data: dict[str, Any], source: str) -> HohConfig:
    if not isinstance(data, dict):
        raise UsageError(f"{source}: expected a mapping of settings, got {type(data).__name__}")
    version = data.get("schema_version", CONFIG_SCHEMA_VERSION)
    if isinstance(version, int) and version > CONFIG_SCHEMA_VERSION:
        raise StateError(f"{source}: schema_version {version} is newer than this hoh supports; upgrade hoh")
    try:
        return HohConfig.model_validate(data)
    except ValidationError as err:
        raise UsageError(_describe(err, source)) from None


def load_config(path: Path) -> HohConfig:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise UsageError(f"{path}: config file not found") from None
    except yaml.YAMLError as err:
        raise UsageError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    return parse_config(data, str(path))


def apply_overrides(config: HohConfig, overrides: list[str], flags: dict[str, Any] | None = None) -> HohConfig:
    """Return a new config with `flags` (dotted key → value, None = unset) and `a.b=c` strings applied."""
    data = config.model_dump()
    pairs: list[tuple[str, Any]] = [(k, v) for k, v in (flags or {}).items() if v is not None]
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r}: expected KEY=VALUE, e.g. --set policy.max_retries=3")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            raise UsageError(f"--set {item!r}: the value is not valid YAML; quote it") from None
        pairs.append((key.strip(), value))
    for key, value in pairs:
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            if node.get(part) is None:
                node[part] = {}  # an unset section (roles.qa, harness.price); validation names a wrong key
            if not isinstance(node[part], dict):
                raise UsageError(f"--set {key}: '{part}' is not a section of settings")
            node = node[part]
        node[parts[-1]] = value
    return parse_config(data, "settings")


def dump_config(config: HohConfig) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
