"""Where an attempt's process runs: the seam between an adapter (argv, environment, events) and a place.

An adapter builds a `Launch` and parses what came back; an `Executor` decides where the process runs and
owns everything about that place: how the attempt reaches hoh's egress proxy (`placed`), where hoh's own
programs are (`attempt.ProgramSite`), the run itself with its wall and idle timeouts, its output cap and the kill
of everything it started, and the record of what ran (`command.json`).

`LocalExecutor` runs the attempt on this machine, in the bubblewrap jail its request carries (or none with
`sandbox.mode: off`). The executors of `hoh/envs/` run it in a Harbor environment, which the Runtime only
starts, copies into and out of, execs in and stops.
"""

from __future__ import annotations

import dataclasses
import time
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from ..fsutil import atomic_write_json
from .attempt import HOH_PACKAGE
from .jail import BWRAP_ENV, JAIL_SETUP_RETRIES, JailEnvironment, JailSpec, bwrap_argv, setup_failed, shows
from .limits import AttemptLimits
from .network import attempt_egress, shim_argv
from .process import ProcessResult, run_process
from .registries import client_settings

if TYPE_CHECKING:
    from .attempt import RoleRequest
    from .base import HarnessAdapter

@dataclass(frozen=True)
class Launch:
    """One attempt's process, as the adapter built it."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]
    """The process's whole environment, applied where it runs: inside the jail (never to bwrap), inside the
    environment (never to its client or hoh's supervisor there)."""
    stdin: bytes | None
    jail: JailSpec | None
    """What the process may see and write (the CLI's own paths added); an executor's whole view of the role."""


@dataclass(frozen=True)
class Execution:
    """How the process ended, and why it never ran when the place itself failed."""

    process: ProcessResult
    setup_error: str | None = None
    """The place could not run the attempt (bwrap failed before the CLI started, an environment that would
    not take the files): the machine's doing, not the agent's."""


@dataclass(frozen=True)
class CommandRecord:
    """What ran for an attempt or a check, wherever it ran: its `command.json`, one shape for every executor."""

    argv: list[str]
    """As it was started: on this machine bwrap's whole command line; in an environment the CLI's own."""
    cwd: str
    env_names: list[str]
    """The names of the variables it was given, never their values."""
    environment: str | None = None
    """The `--env` it ran in; None: this machine."""
    session_id: str | None = None
    """That environment's session (a Docker Compose project, a sandbox's name)."""
    streams: str | None = None
    """Where its streams were kept in the environment."""
    batch: bool | None = None
    """Run in one call with the other checks of its step (`envs/batch.py`)."""
    bytes_in: int | None = None
    bytes_out: int | None = None
    """What crossed into the environment and back for it, once it ended."""

    def write(self, attempt_dir: Path) -> None:
        """`command.json` in `attempt_dir`; a field that does not apply is left out."""
        atomic_write_json(attempt_dir / "command.json",
                          {k: v for k, v in dataclasses.asdict(self).items() if v is not None}, durable=False)


@dataclass(frozen=True)
class Queued:
    """One of many short runs given to an executor at once (a check step's checks)."""

    launch: Launch
    request: "RoleRequest"
    attempt_dir: Path


class Executor(ABC):
    """A place where role attempts run."""

    name: str

    def prepare(self) -> None:
        """Make the place ready for a run that needs no `placed` (the Runtime's own checks); this machine is."""

    @abstractmethod
    def placed(self, adapter: "HarnessAdapter", request: "RoleRequest",
               attempt_dir: Path) -> AbstractContextManager["RoleRequest"]:
        """The request as the CLI must see it from this place (its endpoint, proxy and program site), while
        whatever serves it (hoh's egress proxy) runs."""

    @abstractmethod
    def execute(self, launch: Launch, request: "RoleRequest", attempt_dir: Path,
                on_spawn: Callable[[int], None] | None) -> Execution:
        """Run the launch to its end or its timeout; events.jsonl and stderr.log land in `attempt_dir`."""

    def execute_many(self, runs: Sequence[Queued], deadline: float | None = None) -> list[Execution | None]:
        """Each run, in order, as `execute` runs it alone; None for each after the first that was not started
        because the monotonic `deadline` had passed. An environment runs them in one call where it soundly can
        (`envs/batch.py`)."""
        return [None if i and deadline is not None and time.monotonic() >= deadline
                else self.execute(run.launch, run.request, run.attempt_dir, None) for i, run in enumerate(runs)]


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
