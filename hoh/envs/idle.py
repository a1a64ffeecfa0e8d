"""A role's environment between its turns: paused once it has been idle a few seconds while the other roles run,
where its engine can, and thawed before hoh uses it again; the next role's environment readied while the current
role runs (`Ahead`).

Docker and Podman pause a container with the cgroup freezer: its processes get no CPU, and its files, its
memory and its engine's record of what changed stay as they were. So a pause changes nothing the checks between
attempts rely on (`verify.py`); only an `exec` into it must wait for the thaw, which every use of it does first
(`RoleEnvironment._start`). The engine is on this machine: a role can neither pause, thaw nor notice its own
pause. An engine that cannot pause (another provider, a cgroup without the freezer) leaves its environments
running, and the run says so once. A container is thawed before it is stopped (`thawed`): `podman-compose down`
refuses a paused one, and a killed session may have left one paused.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from . import verify

if TYPE_CHECKING:
    from harbor.environments.base import BaseEnvironment

    from .role import RoleEnvironment

ORDER = ("planner", "developer", "qa")
"""The roles' turns in a loop; after QA's checks the next loop's Planner."""
PAUSE_AFTER = 5.0
"""Seconds an environment stays idle before it is paused: a shorter gap costs more than it saves (a pause and a
thaw are two engine calls, whose CPU is taken from the role that runs)."""
CANNOT_PAUSE = ("--env {name}: the engine could not pause the {role} environment while the other roles ran "
                "({why}); idle environments stay running")
CANNOT_THAW = "--env {name}: the paused {role} environment did not resume ({why}); a fresh one replaces it"


async def set_paused(env: "BaseEnvironment", container: str, paused: bool) -> None:
    """`docker pause` or `unpause` (Podman's the same); OSError with the engine's words when it failed."""
    await verify.ask(env, "pause" if paused else "unpause", container)


async def thawed(env: "BaseEnvironment", container: str | None, project: str) -> None:
    """Unpaused if it was, before its stop: `container`, else the `main` container of Compose `project` (one a
    killed session left, in a state no one knows). Best effort: the stop says what went wrong."""
    if verify.engine_of(env) is None:
        return
    try:
        await set_paused(env, container or await verify.container_of(env, project), False)
    except OSError:
        pass  # not paused, or gone


class Idle:
    """How one role's environment is paused between its turns, and when it must not be (`in_use`)."""

    def __init__(self) -> None:
        self.paused = False
        self.can = True
        """False once its engine failed to pause it: not asked again."""
        self.uses = 0
        """Attempts and batches that hold it now (`in_use`): it is never paused under them."""

    @contextmanager
    def in_use(self, lock: threading.Lock) -> Iterator[None]:
        with lock:
            self.uses += 1
        try:
            yield
        finally:
            with lock:
                self.uses -= 1

    def may_pause(self) -> bool:
        return self.can and not self.paused and not self.uses


def following(role: str, roles: Sequence[str]) -> tuple[str | None, str | None]:
    """The roles whose turns come before and after `role`'s, among `roles` (None: no other role there)."""
    turns = [r for r in ORDER if r in roles]
    if role not in turns or len(turns) < 2:
        return None, None
    at = turns.index(role)
    return turns[at - 1], turns[(at + 1) % len(turns)]


class Ahead:
    """Starts (or thaws) the next role's environment in a thread of its own while the current role runs, and
    pauses the one whose turn is over once it has stayed idle `pause_after` seconds. A start that failed there is
    said when that role starts it itself (`RoleEnvironment.start` raises it again), never in the thread."""

    def __init__(self, environment: Callable[[str], "RoleEnvironment | None"], roles: Sequence[str],
                 pause_after: float = PAUSE_AFTER):
        self._environment, self._roles, self.pause_after = environment, tuple(roles), pause_after
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._pauses: dict[str, threading.Timer] = {}
        """The pause due for each idle role's environment, cancelled when its turn comes first."""
        self.closed = False

    def turn_of(self, role: str) -> None:
        """`role`'s attempt is about to run there."""
        before, after = following(role, self._roles)
        with self._lock:
            for due in (role, after):
                timer = self._pauses.pop(due, None) if due is not None else None
                if timer is not None:
                    timer.cancel()
        ahead = self._environment(after) if after is not None and after != role else None
        if ahead is not None:
            self._aside(f"ready-{after}", ahead.ready_ahead)
        done = self._environment(before) if before is not None and before not in (role, after) else None
        if done is not None:
            self._later(before, done.pause)

    def _later(self, role: str, pause: Callable[[], None]) -> None:
        with self._lock:
            if self.closed:
                return
            timer = threading.Timer(self.pause_after, _quietly, args=(pause,))
            timer.name, timer.daemon = f"hoh-envs-pause-{role}", True
            old, self._pauses[role] = self._pauses.get(role), timer
            if old is not None:
                old.cancel()
            timer.start()

    def _aside(self, name: str, work: Callable[[], None]) -> None:
        with self._lock:
            if self.closed:
                return
            self._threads = [t for t in self._threads if t.is_alive()]
            thread = threading.Thread(target=_quietly, args=(work,), name=f"hoh-envs-{name}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def close(self) -> None:
        """No more work aside: the pauses due are cancelled, and what is under way is waited for (a start or a
        pause must not race the session's stop)."""
        with self._lock:
            self.closed, threads, timers = True, list(self._threads), list(self._pauses.values())
            self._pauses.clear()
        for timer in timers:
            timer.cancel()
        for thread in (*threads, *timers):
            thread.join()


def _quietly(work: Callable[[], None]) -> None:
    try:
        work()
    except KeyboardInterrupt:
        pass  # hoh is stopping at once (`EventLoop.interrupt`): the main thread says so, not this one
