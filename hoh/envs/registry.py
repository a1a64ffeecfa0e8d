"""`--env NAME`: what each name means, and the places it makes; every session and replay gets its places here.

    local            this machine: each attempt in its OS jail (`local/`), the same `LOCAL` for every role
    docker, podman   one warm environment per role, on Harbor's Compose environments, closed to the network
                     but for hoh's proxy, kept in step by what changed (`role.py`, `lifecycle.py`, `sync.py`)
    NAME             any other environment type of Harbor's (modal, daytona, e2b, …): the same, as far as
                     its provider allows (each fallback said once)
    module:Class     a third party's subclass of Harbor's `BaseEnvironment`, the same way

A Harbor trial's environment (`Given`, `trial.py`) is not a name: it is passed to the session by the one who
started it, and serves every role.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from ..config import HohConfig
from ..errors import EnvironmentUnavailable
from .base import Executor
from .harbor_env import preflight
from .local.executor import LOCAL
from .pool import Environments, Given, detached, stop_detached
from .role import RoleEnvironment

if TYPE_CHECKING:
    from ..harness.base import HarnessAdapter
    from ..paths import WorkspacePaths
    from ..store.journal import Journal

LOCAL_NAME = "local"

__all__ = ["LOCAL", "LOCAL_NAME", "Environments", "Given", "check", "places", "replay_place",
           "stop_replay_place"]


def check(config: HohConfig) -> None:
    """Before anything is made for a run: the environment's class exists and its engine or provider answers.
    Nothing to ask for `local` (its jail is checked where the session opens, `jail.require_jail`).

    Raises:
        EnvironmentUnavailable: in one line, what is missing and what to do.
    """
    if not config.environment.local:
        preflight(config.environment)


def places(config: HohConfig, paths: "WorkspacePaths", journal: "Journal",
           adapters: Mapping[str, "HarnessAdapter"], warn: Callable[[str], None] = lambda message: None,
           given: Given | None = None) -> Environments:
    """The places of one session's roles, as `config.environment.name` says (`given`: someone else's, for
    every role). The caller closes them (`Environments.close`); nothing is started before a role's turn."""
    return Environments(config, paths, journal, adapters, warn=warn, given=given)


def replay_place(config: HohConfig, name: str, root: Path, scratch: Path, qa: Callable[[], "HarnessAdapter"],
                 warn: Callable[[str], None], hint: str = "") -> Executor:
    """Where `hoh replay` runs a workspace's checks: `name` (the workspace's own environment, or `--env`), with
    QA's image and limits; its files under `scratch`. `qa` makes QA's adapter, for an environment only: a local
    replay never needs the harness (a third party's that is gone since). Stop it with `stop_replay_place`.

    Raises:
        EnvironmentUnavailable: the environment cannot be made; `hint` is added to its one line.
    """
    if name == LOCAL_NAME:
        return LOCAL
    config = config.model_copy(update={"environment": config.environment.model_copy(update={"name": name})})
    try:
        return detached(config, root, scratch, qa(), warn)
    except EnvironmentUnavailable as err:
        raise EnvironmentUnavailable(f"{err}{hint}") from None


def stop_replay_place(place: Executor) -> str | None:
    """Stop what `replay_place` started (nothing for `local`); its error as one line when the stop failed."""
    return stop_detached(place) if isinstance(place, RoleEnvironment) else None
