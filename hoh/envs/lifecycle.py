"""`EnvironmentLife`: one role's environment from its start to its stop, between the attempts that run there.

Started at the role's first attempt, or readied ahead while the role before it runs, and kept for the session:
paused while the other roles run and thawed before its next use (`idle.py`), checked before an attempt that
runs alone there and replaced by a fresh one when a role changed it outside hoh's paths (`verify.py`),
stopped by `pool.Environments.close`, or by the next session after a crash. What runs in it, one attempt at a
time or a batch of checks, is `executor.RoleEnvironment`'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import threading
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Coroutine, TypeVar

from ..errors import EnvironmentUnavailable
from ..store import events as ev
from ..store.hashcache import HashCache
from . import channel, enforced, supervise, sync, verify
from .egress.route import socket_dir
from .harbor_env import EnvironmentSpec, EventLoop, compose_based, one_line, unscoped
from .idle import CANNOT_PAUSE, CANNOT_THAW, Idle, set_paused, thawed
from .install import Programs, gateway_of, install_forwarder, install_harness
from .session import OPEN_TIMEOUT, Session
from .viewwatch import ViewWatch

if TYPE_CHECKING:
    from harbor.environments.base import BaseEnvironment

    from ..harness.base import HarnessAdapter

T = TypeVar("T")
OPEN_FALLBACK = ("--env {name}: the image has no python3 to run hoh's forwarder to its proxy, so the roles' containers "
                 "are on a bridge network: pointed at the proxy, but their direct connections are not blocked; add "
                 "python3 to the image to close them")
UNVERIFIED = ("--env {name}: hoh cannot ask this provider what a role changed in its environment between two "
              "attempts; a role's leftovers outside its view are not looked for there")
START_TIMEOUT = 1800.0
"""An image may be built at the start (a Dockerfile): half an hour before hoh gives up on it."""
COPY_TIMEOUT = 1800.0
STOP_TIMEOUT = 300.0


class EnvironmentLife:
    def __init__(self, spec: EnvironmentSpec, loop: EventLoop, adapter: "HarnessAdapter", bounds: tuple[Path, ...],
                 on_start: Callable[[EnvironmentSpec], None], env: "BaseEnvironment | None" = None,
                 warn: Callable[[str], None] = lambda message: None,
                 record: Callable[[ev.Event], None] = lambda event: None):
        """`env`: an environment someone else started and stops (a Harbor trial's); else hoh makes its own.
        `warn`: tells the user, once, what the environment fell back to; `record`: journals what it found."""
        self.spec, self.loop, self.adapter = spec, loop, adapter
        self.name = spec.name
        self.bounds = tuple(b.resolve() for b in bounds)
        """What may go in at all: the workspace and the project (never a host path a setting names)."""
        self.on_start = on_start
        self.warn, self.record = warn, record
        self.env = env
        self.programs: Programs = {}
        """hoh's programs there, put in afresh before every attempt that runs alone there (`verify.py`)."""
        self.inflight = 0
        self.own: tuple[int, ...] = ()
        """The environment's own processes (its init, what init started): never killed between attempts."""
        self.session: Session | None = None
        """hoh's server in its container (`session.py`), opened as it starts: its steps without an `exec` each."""
        self.container: str | None = None
        """Its engine's id of the container (Docker, Podman), asked once it has started (`verify.py`)."""
        self.watch: verify.Watch | None = None
        """How hoh asks what changed in it between attempts (`verify.py`)."""
        self._verified: set[Path] = set()
        self._asked: tuple[int, Future[list[str]]] | None = None
        """What changed, asked of the engine's record as attempt N (alone there) was collected, every process it
        left killed: the next attempt waits for that answer, asked while other roles ran, instead of asking again."""
        self.socket_dir: Path | None = None
        """Where hoh's proxy listens for a closed environment (bound in at `INSIDE_SOCKET`'s dir)."""
        self.owned = env is None
        self.ready = False
        self.gateway: str | None = None
        self.key_inside = spec.network and not compose_based(spec.name)
        """A cloud sandbox cannot reach hoh's proxy: its CLI gets the endpoint and the key as Harbor's own agents
        pass them, and what comes back is scrubbed of the key (`HarnessAdapter._run`)."""
        self.python = False
        """Whether its image has python3, which keeps a view there between attempts (`sync.py`)."""
        self.held: sync.Held | None = None
        """What it keeps of the role's view; None: the next attempt alone there sends all of it."""
        self.cache = HashCache()
        self.views: ViewWatch | None = None
        """hoh's side of the views kept there, followed by the kernel (`viewwatch.py`); None: listed whole."""
        self.runs = 0
        self.idle = Idle()
        """Paused while the other roles run (`idle.py`)."""
        self.on_attempt: Callable[[str], None] | None = None
        """Told the role when an attempt is about to run here (`idle.Ahead.turn_of`)."""
        self._failed: BaseException | None = None
        """What its start made ahead raised: raised again when its role starts it."""
        self._lock = threading.Lock()
        """Developers working at once (`runtime/packages.py`) share their role's environment: it starts once, and
        each attempt gets its own number (its own streams dir inside)."""

    def start(self) -> None:
        with self._lock:
            failed, self._failed = self._failed, None
            if failed is not None:
                raise failed
            self._start()

    def ready_ahead(self) -> None:
        """Started, or thawed, before its role's turn (in `idle.Ahead`'s thread): what failed is raised when the
        role starts it itself, never here."""
        try:
            self.start()
        except BaseException as err:  # noqa: BLE001 - kept for the role's own start, which raises it
            with self._lock:
                self._failed = err

    def pause(self) -> None:
        """Paused while the other roles run, where its engine can (`idle.py`); never under an attempt or a batch."""
        with self._lock:
            env, container = self.env, self.container
            if not self.ready or not self.owned or env is None or container is None or not self.idle.may_pause():
                return
            try:
                self._run(set_paused(env, container, True), verify.TIMEOUT)
            except (OSError, TimeoutError) as err:
                self.idle.can = False
                self.warn(CANNOT_PAUSE.format(name=self.spec.name, role=self.spec.role, why=one_line(err)))
                return
            self.idle.paused = True

    def _thaw(self) -> None:
        """Resumed before hoh uses it; one that does not resume is replaced by a fresh one (journaled)."""
        assert self.env is not None and self.container is not None
        try:
            self._run(set_paused(self.env, self.container, False), verify.TIMEOUT)
            self.idle.paused = False
        except (OSError, TimeoutError) as err:
            self.warn(CANNOT_THAW.format(name=self.spec.name, role=self.spec.role, why=one_line(err)))
            self._replace()

    def _start(self) -> None:
        if self.ready:
            if self.idle.paused:
                self._thaw()
            return
        if self.env is None:
            self.on_start(self.spec)
            if self.spec.closed and self.socket_dir is None:
                self.socket_dir = socket_dir()
            self.env = self.spec.make(self.socket_dir)  # from here on `stopped` has something to stop
        env = self.env
        try:
            if self.owned:
                self._run(env.start(force_build=False), START_TIMEOUT)
                limits = self._limits_asked()
                probe = f"; echo {enforced.MARK}; {enforced.PROBE}" if limits else ""
                own = self._run(env.exec(f"{supervise.own_processes()}; command -v python3 >/dev/null && echo python3"
                                         f"{probe}", timeout_sec=60), 120)
                found, _, seen = (own.stdout or "").partition(enforced.MARK)
                self.own = tuple(int(p) for p in found.split() if p.isdigit())
                self.python = "python3" in found.split()
                if limits and (missing := enforced.unenforced(seen, self.spec.processes, self.spec.memory_mb)):
                    self.warn(enforced.warning(self.spec.name, missing))
                if verify.engine_of(env) is not None:
                    self.container = self._run(verify.container_of(env, self.spec.session_id), 300)
                    allowed = (supervise.ROOT, "/tmp", *map(str, self.bounds))
                    self.watch = verify.Watch(env, self.container, allowed)
                    self._run(self.watch.begin(), 300)
            self.programs = self._run(install_harness(env, self.adapter), START_TIMEOUT)
            if self.spec.closed:
                forwarder = self._run(install_forwarder(env), START_TIMEOUT)
                if forwarder is None:
                    self._reopen()
                    return self._start()
                self.programs.update(forwarder)
            if self.spec.network and not self.spec.closed and self.adapter.upstream() and not self.key_inside:
                self.gateway = self._run(gateway_of(env), 120)
            if self.python and (found := channel.usable(env, self.container, True)) is not None:
                self.session = self._run(Session.open(found.engine, found.container), OPEN_TIMEOUT + 10)
            self.ready = True
        except EnvironmentUnavailable:
            raise
        except Exception as err:  # noqa: BLE001 - Docker, a cloud API: any failure is the one line the user reads
            raise EnvironmentUnavailable(f"--env {self.spec.name}: the {self.spec.role} environment did not start: "
                                         f"{one_line(err)}") from None

    def _limits_asked(self) -> bool:
        """Whether the start reads the limits a Compose engine took (`enforced.py`), in its one exec there. Another
        provider is given no `pids_limit` (hoh's overlay is Compose's), so none is asked of it."""
        return bool(self.spec.processes or self.spec.memory_mb) and compose_based(self.spec.name)

    def _reopen(self) -> None:
        """The same environment again, on a bridge network (an image that cannot run the forwarder)."""
        self.warn(OPEN_FALLBACK.format(name=self.spec.name))
        error = self.loop.run(self.stopped())
        if error:
            raise EnvironmentUnavailable(f"--env {self.spec.name}: the {self.spec.role} environment did not stop "
                                         f"to start again on a bridge network: {error}")
        self.spec = dataclasses.replace(self.spec, closed=False)

    @property
    def spared(self) -> supervise.Keep:
        """What no sweep kills: the environment's own processes, and hoh's server there while it lives."""
        return self.own + ((self.session.spared,) if self.session is not None else ())

    def _check_between(self, attempt_dir: Path) -> None:
        """Before an attempt that runs alone there: an environment an earlier one changed outside hoh's paths
        is replaced by a fresh one (`verify.py`), and that is journaled."""
        with self._lock:
            if self.inflight or not self.owned or self.env is None or self.runs == 0 or attempt_dir in self._verified:
                return
            self._verified.add(attempt_dir)
            if self.watch is None:
                self.warn(UNVERIFIED.format(name=self.spec.name))
                return
            asked, self._asked = self._asked, None
            try:
                if asked is not None and asked[0] == self.runs and not asked[1].cancelled():
                    changes = asked[1].result(300)
                else:
                    changes = self._run(self._unexpected(), 300)
            except (OSError, TimeoutError) as err:
                changes = [f"? the engine could not say what changed: {one_line(err)}"]
            if not changes:
                return
            self._tampered(changes=verify.summary(changes))
            self._replace()

    def _unexpected(self) -> Coroutine[Any, Any, list[str]]:
        assert self.env is not None and self.watch is not None
        return unscoped(self.env, self.watch.unexpected())

    def _replace(self) -> None:
        """A fresh environment in place of this one (its proxy's socket dir kept), journaled."""
        old, error = self.spec.session_id, self.loop.run(self.stopped(keep_socket=True))
        self.record(ev.EnvironmentStopped(session_id=old, error=error))
        fresh = f"hoh-{self.spec.role}-{uuid.uuid4().hex[:10]}"
        self.spec = dataclasses.replace(self.spec, session_id=fresh, dir=self.spec.dir.parent / fresh)
        self._start()

    def prepare(self) -> None:
        self.start()

    async def stopped(self, keep_socket: bool = False) -> str | None:
        """Stop and delete it, if it is hoh's (on the event loop); the error as one line when that failed.
        `keep_socket`: its proxy's directory stays, for the fresh environment that replaces it."""
        env, self.env, self.ready, self.gateway, container = self.env, None, False, None, self.container
        self.watch, self.container, paused, self.idle.paused = None, None, self.idle.paused, False
        self.held, self._asked, session, self.session = None, None, self.session, None
        if session is not None:
            await session.close()
        if self.socket_dir is not None and not keep_socket:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            self.socket_dir = None
        if env is None or not self.owned:
            return None
        try:
            if paused or container is None:
                await thawed(env, container, self.spec.session_id)
            await asyncio.wait_for(env.stop(delete=not verify.keeps_images(env)), STOP_TIMEOUT)
        except Exception as err:  # noqa: BLE001 - reported in the journal; the run's own outcome stands
            return one_line(err)
        finally:
            shutil.rmtree(self.spec.dir, ignore_errors=True)
        return None

    def _tampered(self, changes: list[str] | None = None, processes: int = 0, server: bool = False) -> None:
        self.record(ev.EnvironmentTampered(role=self.spec.role, session_id=self.spec.session_id,
                                           changes=changes or [], processes=processes, server=server))

    def _server_killed(self) -> None:
        """A role that killed hoh's server is journaled once, and the environment goes on without the server."""
        if self.session is not None and self.session.lost:
            self.session = None
            self._tampered(server=True)

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """`coro` on the event loop, its execs in the environment carrying only what hoh gives each (`unscoped`)."""
        return self.loop.run(unscoped(self.env, coro), timeout)

    def _inside(self, path: Path) -> bool:
        return any(path.resolve().is_relative_to(b) for b in self.bounds)

