"""A workspace opened for reading (`hoh status`, `hoh show`) without importing pydantic.

`open_workspace` validates hoh.yaml with the config's pydantic models, which costs more than the rest of
`hoh status` together. What status reads of the config (`Settings`) is saved in `state/fold.json`'s header by
the Runtime, with the sha256 of the hoh.yaml it validated; a reader whose hoh.yaml has that hash takes the
settings from there. Any other hoh.yaml (edited, or no header yet) goes through `open_workspace`, so a
broken one fails with the same message as ever. The checks on identity, project and spec are the same code
as `open_workspace`'s.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import StateError, UsageError
from ..fsutil import load_state, sha256_file
from ..paths import ROLES, WorkspacePaths

if TYPE_CHECKING:
    from ..config import HohConfig

WORKSPACE_SCHEMA_VERSION = 2
"""2: the authoritative history moved from project/.git to history.git; `project_dir` added."""


@dataclass(frozen=True)
class BudgetLimits:
    """`budget.*` as `store.budget.figures` reads it."""

    tokens: int | None = None
    cost_usd: float | None = None
    wall_hours: float | None = None


@dataclass(frozen=True)
class Settings:
    """What `hoh status` reads of a workspace's hoh.yaml."""

    harness: str | None
    sandbox: str
    loops: int
    budget: BudgetLimits
    patience: int | None
    roles: dict[str, tuple[str | None, str | None]]
    """role → the harness and model it is configured with (`role_harness`)."""

    @classmethod
    def of(cls, config: HohConfig) -> "Settings":
        from ..config import role_harness
        b = config.budget
        roles = {}
        for role in ROLES:
            configured = role_harness(config, role)
            roles[role] = (configured.name, configured.model)
        return cls(config.harness.name, config.sandbox.mode, config.loops,
                   BudgetLimits(b.tokens, b.cost_usd, b.wall_hours), config.policy.patience, roles)

    def to_json(self) -> dict[str, Any]:
        return {"harness": self.harness, "sandbox": self.sandbox, "loops": self.loops,
                "budget": {"tokens": self.budget.tokens, "cost_usd": self.budget.cost_usd,
                           "wall_hours": self.budget.wall_hours},
                "patience": self.patience, "roles": {role: list(pair) for role, pair in self.roles.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Settings":
        roles = {role: (data["roles"][role][0], data["roles"][role][1]) for role in ROLES}
        return cls(data["harness"], data["sandbox"], data["loops"], BudgetLimits(**data["budget"]),
                   data["patience"], roles)


@dataclass(frozen=True)
class ReadView:
    """A checked workspace for readers: its paths, identity and the settings status shows."""

    paths: WorkspacePaths
    identity: dict[str, Any]
    settings: Settings


def is_workspace(root: Path) -> bool:
    return WorkspacePaths(root).identity.is_file()


def identify(root: Path) -> tuple[WorkspacePaths, dict[str, Any]]:
    """The workspace at `root` (resolved): its paths and identity, or a one-line error."""
    if not is_workspace(root):
        raise UsageError(f"{root} is not a hoh workspace (no state/workspace.json); start one with: hoh build SPEC -w {root}")
    identity = load_state(WorkspacePaths(root).identity, ("schema_version", "spec_sha256", "root_commit"),
                          WORKSPACE_SCHEMA_VERSION)
    project = identity.get("project_dir")
    return WorkspacePaths(root, Path(project) if project else None), identity


def check_files(paths: WorkspacePaths, identity: dict[str, Any]) -> None:
    """The project directory is there and the frozen spec is as it was frozen."""
    if not paths.project.is_dir():
        raise StateError(f"the project directory {paths.project} is missing; restore it (its history is in "
                         f"{paths.history})")
    if not paths.spec.is_file() or sha256_file(paths.spec) != identity["spec_sha256"]:
        raise StateError(f"{paths.spec}: the frozen spec was changed or removed; restore it (sha256 {identity['spec_sha256'][:12]}…)")


def config_digest(paths: WorkspacePaths) -> str | None:
    try:
        return hashlib.sha256(paths.config.read_bytes()).hexdigest()
    except OSError:
        return None


def open_for_reading(root: Path) -> ReadView:
    """`open_workspace` for readers: the same checks and errors, the config's settings from the fold's header
    when hoh.yaml is the one they were taken from."""
    from .fold import cached_settings
    root = root.expanduser().resolve()
    paths, identity = identify(root)
    if identity["schema_version"] >= 2:
        check_files(paths, identity)
        if (settings := cached_settings(paths)) is not None:
            return ReadView(paths, identity, settings)
    from .workspace import open_workspace  # pydantic: an old workspace, a new hoh.yaml, a third party's harness
    ws = open_workspace(root)
    return ReadView(ws.paths, ws.identity, Settings.of(ws.config))
