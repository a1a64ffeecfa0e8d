"""The trial's environment as hoh's role environments use it (`hoh.envs`): all three roles share it.

Harbor started it and stops it; hoh only copies each attempt's view in, runs the CLI there under its
supervisor and copies the role's writable paths back (`RoleEnvironment`). Because the roles share one
environment here, every attempt's view and streams are removed after it, so the next role finds nothing of
it (another role's transcript or home is hidden from every role, as in the OS jail).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..errors import EnvironmentUnavailable, TaskEnvironmentError
from . import transfer
from .base import Execution, Launch
from .harbor_env import one_line
from .install import gateway_of
from .role import RoleEnvironment
from .supervise import ROOT

if TYPE_CHECKING:
    from harbor.environments.base import BaseEnvironment

    from ..harness.attempt import RoleRequest

LEFTOVERS = f"{ROOT}/attempts {ROOT}/in {ROOT}/out"
"""Every attempt's streams and what was copied in and out for it (the out copy holds the role's home)."""


class TrialRole(RoleEnvironment):
    """One role's executor in the trial's environment."""

    def start(self) -> None:
        """Nothing to start or install (Harbor started it, the agent's setup installed the CLI): only the gateway
        hoh's egress proxy listens on is read."""
        if self.ready:
            return
        try:
            if self.spec.network and self.adapter.upstream():
                self.gateway = self._run(gateway_of(self.env), 120)
        except (KeyboardInterrupt, EnvironmentUnavailable):
            raise
        except Exception as err:  # noqa: BLE001 - any provider's failure is the one line the user reads
            raise EnvironmentUnavailable(f"the trial's environment does not answer: {one_line(err)}") from None
        self.ready = True

    def execute(self, launch: Launch, request: "RoleRequest", attempt_dir: Path,
                on_spawn: Callable[[int], None] | None) -> Execution:
        try:
            return super().execute(launch, request, attempt_dir, on_spawn)
        finally:
            self.clear(launch)

    def clear(self, launch: Launch) -> None:
        jail = launch.jail
        roots = [p for p in (*(jail.writable if jail else ()), *(jail.read_only if jail else ()), launch.cwd)
                 if self._inside(p)]
        quoted = " ".join(shlex.quote(str(p)) for p in transfer.outermost(roots) if len(p.parts) > 2)
        self._run(self.env.exec(f"rm -rf {quoted} {LEFTOVERS}", timeout_sec=600), 660)


def environment_name(environment: "BaseEnvironment") -> str:
    """The trial environment's name as hoh's `environment.name` takes it: Harbor's type, else its class."""
    from harbor.models.environment_type import EnvironmentType
    kind = environment.type()
    value = getattr(kind, "value", kind)
    if value in {t.value for t in EnvironmentType}:
        return str(value)
    cls = type(environment)
    return f"{cls.__module__}:{cls.__qualname__}"


async def workdir_of(environment: "BaseEnvironment") -> str:
    """`[environment] workdir`, else the image's WORKDIR (the default cwd of a command there)."""
    workdir = environment.task_env_config.workdir
    if not workdir:
        result = await environment.exec("pwd", timeout_sec=60)
        workdir = (result.stdout or "").strip().splitlines()[-1] if (result.stdout or "").strip() else ""
    if not workdir.startswith("/") or workdir.rstrip("/") == "":
        raise TaskEnvironmentError(f"the task's working directory is {workdir or 'unknown'!r}; hoh builds the "
                                   "project there and needs a directory of its own: set [environment] workdir "
                                   "(or WORKDIR in the image) to one, e.g. /app")
    return workdir.rstrip("/")
