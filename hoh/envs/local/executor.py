"""`LocalExecutor`: an attempt on this machine, in the bubblewrap jail its request carries (`jail.py`), under its
limits (`limits.py`), reaching the network only through hoh's egress proxy (`hoh/envs/egress/`); with
`sandbox.mode: off`, as hoh's user with no jail at all."""

from __future__ import annotations

import dataclasses
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from ...harness.attempt import HOH_PACKAGE
from ...harness.process import run_process
from ...harness.registries import client_settings
from ..base import CommandRecord, Execution, Executor, Launch
from ..egress.route import attempt_egress, shim_argv
from .jail import BWRAP_ENV, JAIL_SETUP_RETRIES, JailEnvironment, bwrap_argv, setup_failed, shows
from .limits import AttemptLimits

if TYPE_CHECKING:
    from ...harness.attempt import RoleRequest
    from ...harness.base import HarnessAdapter


class LocalExecutor(Executor):
    """This machine, in the request's bubblewrap jail (none with `sandbox.mode: off`)."""

    name = "local"

    def placed(self, adapter: "HarnessAdapter", request: "RoleRequest",
               attempt_dir: Path) -> AbstractContextManager["RoleRequest"]:
        return attempt_egress(adapter, request, attempt_dir)

    def execute(self, launch: Launch, request: "RoleRequest", attempt_dir: Path,
                on_spawn: Callable[[int], None] | None) -> Execution:
        if launch.jail is None:  # `sandbox.mode: off`: the process is the role's, as hoh's user
            return self._run(launch, launch.argv, launch.env, None, request, attempt_dir, on_spawn)
        # hoh's package: the egress forwarder and the scripted agent run from it.
        jail = dataclasses.replace(launch.jail, read_only=(*launch.jail.read_only, HOH_PACKAGE))
        argv = shim_argv(launch.argv) if jail.egress_socket else launch.argv
        # The launch's environment is the jail's alone: bwrap gets none of it (`JailEnvironment`).
        # The jail shows neither pip.conf nor npmrc (credentials); what they configure, credentials left out.
        with JailEnvironment({**client_settings(shows), **launch.env}) as inside:
            wrapped = bwrap_argv(jail, argv, launch.cwd, program=launch.argv[0], env_fd=inside.fd)
            return self._run(launch, wrapped, BWRAP_ENV, inside, request, attempt_dir, on_spawn)

    @staticmethod
    def _run(launch: Launch, argv: list[str], env: Mapping[str, str], inside: JailEnvironment | None,
             request: "RoleRequest", attempt_dir: Path, on_spawn: Callable[[int], None] | None) -> Execution:
        CommandRecord(argv, str(launch.cwd), sorted(launch.env)).write(attempt_dir)
        for setup_try in range(JAIL_SETUP_RETRIES + 1):
            limits = AttemptLimits(request.limits)
            if inside is not None:
                inside.rewind()
            try:
                proc = run_process(
                    argv, cwd=launch.cwd, env=env, stdin=launch.stdin,
                    stdout_path=attempt_dir / "events.jsonl", stderr_path=attempt_dir / "stderr.log",
                    wall_timeout=request.wall_timeout, idle_timeout=request.idle_timeout, on_spawn=on_spawn,
                    max_output=request.max_output_bytes, preexec=limits.preexec(),
                    pass_fds=(inside.fd,) if inside is not None else (),
                )
            finally:
                limits.close()
            failure = inside is not None and setup_failed(
                proc.exit_code, proc.stdout_path.stat().st_size, proc.stderr_excerpt)
            if not failure:
                return Execution(proc)
            time.sleep(0.5 * (setup_try + 1))  # another program's mount vanishing mid-setup passes
        return Execution(proc, f"the OS jail could not be set up ({failure})")


LOCAL = LocalExecutor()
