"""The contract of a place where a role's attempt runs: this machine's jail (`local/`), or an environment of
Harbor's (`role.py`; the Harbor trial's own: `trial.py`). `registry.py` makes the places `--env` names.

The Runtime builds a `Launch` from the adapter (its argv, environment and stdin) and the request's jail, and
gives it to the role's `Executor`, which owns everything about the place: how the attempt reaches hoh's egress
proxy and where hoh's own programs are (`placed`), the run itself with its wall and idle timeouts, its output cap
and the kill of everything it started, what comes back of its writable paths, and the record of what ran
(`command.json`, one `CommandRecord` shape for every place). An adapter never sees its executor.

What the methods raise is part of the contract (`Raises:`): a place that cannot run anything at all raises
`EnvironmentUnavailable`, and the run stops with that one line; a place that failed for one attempt returns an
`Execution` with its `setup_error` (a transient `jail_error` the Runtime retries); nothing the role did makes a
method raise.
"""

from __future__ import annotations

import dataclasses
import time
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from ..fsutil import atomic_write_json
from ..harness.process import ProcessResult
from ..harness.sandbox import JailSpec

if TYPE_CHECKING:
    from ..harness.attempt import RoleRequest
    from ..harness.base import HarnessAdapter


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
    """A place where role attempts run. Every method may be called from several threads at once (parallel
    Developers, a check step): a place serialises what must be serialised."""

    name: str

    def prepare(self) -> None:
        """Make the place ready for a run that needs no `placed` (the Runtime's own checks); this machine is.

        Raises:
            EnvironmentUnavailable: the place cannot be started (its engine or provider does not answer).
        """

    @abstractmethod
    def placed(self, adapter: "HarnessAdapter", request: "RoleRequest",
               attempt_dir: Path) -> AbstractContextManager["RoleRequest"]:
        """The request as the CLI must see it from this place (its endpoint, proxy and program site), while
        whatever serves it (hoh's egress proxy, its log in `attempt_dir`) runs.

        Raises:
            EnvironmentUnavailable: the place cannot be started, or was lost and cannot be made again.
            OSError: hoh's egress proxy for the attempt cannot listen (its socket directory, a port).
        """

    @abstractmethod
    def execute(self, launch: Launch, request: "RoleRequest", attempt_dir: Path,
                on_spawn: Callable[[int], None] | None) -> Execution:
        """Run the launch to its end or its timeout; `events.jsonl`, `stderr.log` and `command.json` land in
        `attempt_dir`, and what the role wrote to its writable paths is where hoh reads it. `on_spawn` gets the
        pid of the process hoh started for it (on this machine, bwrap's), for the journal.

        Raises:
            EnvironmentUnavailable: as for `placed`. A failure of the place for this attempt alone (a jail that
            could not be set up, an environment that would not take the files) is not raised: it is the
            `Execution`'s `setup_error`.
        """

    def execute_many(self, runs: Sequence[Queued], deadline: float | None = None) -> list[Execution | None]:
        """Each run, in order, as `execute` runs it alone; None for each after the first that was not started
        because the monotonic `deadline` had passed. An environment runs them in one call where it soundly can
        (`envs/batch.py`).

        Raises:
            EnvironmentUnavailable: as for `execute`.
        """
        return [None if i and deadline is not None and time.monotonic() >= deadline
                else self.execute(run.launch, run.request, run.attempt_dir, None) for i, run in enumerate(runs)]
