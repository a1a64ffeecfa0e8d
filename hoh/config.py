"""The run configuration, `hoh.yaml`: pydantic models that refuse unknown keys.

Layering, lowest first: defaults, a `--config FILE`, command-line flags, `--set a.b=c` overrides.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import StateError, UsageError

CONFIG_SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True)


class HarnessConfig(_Model):
    name: str = "scripted"
    """Harness adapter: scripted, codex, opencode, pi, claude, ... (`hoh doctor` lists them)."""
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


class TimeoutsConfig(_Model):
    wall_seconds: float = Field(3600.0, gt=0)
    """Hard limit for one role attempt."""
    idle_seconds: float = Field(600.0, gt=0)
    """Kill an attempt whose harness printed nothing for this long."""


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


class IndexConfig(_Model):
    budget_bytes: int = Field(2000, ge=500)
    """Upper bound on INDEX.md, whatever the length of the history."""
    top_issues: int = Field(8, ge=1)
    """Issues listed by name in the index; the rest are counted and pointed to."""
    recent_loops: int = Field(5, ge=1)
    """Loops shown in the verdict trend."""


class GuardConfig(_Model):
    ignore: list[str] = Field(default_factory=lambda: ["__pycache__", ".pytest_cache", "*.pyc"])
    """Names of caches that tools create as a side effect; not counted as writes to read-only areas."""


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
    guard: GuardConfig = Field(default_factory=GuardConfig)


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
            if not isinstance(node.get(part), dict):
                raise UsageError(f"--set {key}: unknown key '{part}'")
            node = node[part]
        node[parts[-1]] = value
    return parse_config(data, "settings")


def dump_config(config: HohConfig) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
