"""`RoleEnvironment`: the executor of one role's attempts in one Harbor environment.

Started at the role's first attempt and kept for the session (stopped by `pool.Environments.close`, or by
the next session after a crash). Every attempt: the role's view of the workspace goes in (in a Docker or
Podman container where the attempt runs alone, only what differs from what it keeps there, checked first:
`sync.py`; else afresh, what the previous attempt left of it removed first: `transfer.py`), the CLI runs under
`supervise`, and only the role's writable paths come back (what changed in them, or all of them). The Runtime
never enters the environment: the journal, the state, the ledger, history.git, the lock and every key stay on
hoh's side; the model is reached through hoh's egress proxy, which adds the key.

A networked role's container on a Compose engine (docker, podman) is closed: it has no network but its
loopback, where hoh's forwarder (`egress_shim.py`, run by the image's python3 before the CLI) relays to the
proxy's unix socket, bound in from this machine. So every connection it makes goes through the proxy's
allow-list and into `egress.jsonl`, as a jailed role's do. An image without python3 cannot run the forwarder:
its container is started again on a bridge network, with the proxy on the gateway, and the run says so once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import tempfile
import threading
import time
import uuid
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Iterator, Sequence, TypeVar

from ..errors import EnvironmentUnavailable
from ..fsutil import atomic_write_json
from ..harness.attempt import ProgramSite, RoleRequest
from ..harness.egress import PLACEHOLDER_KEY
from ..harness.egress_policy import INSIDE_PORT, INSIDE_SOCKET
from ..harness.executor import Execution, Executor, Launch, Queued
from ..harness.network import attempt_egress, proxy_env, socket_dir
from ..store import events as ev
from ..store.hashcache import HashCache
from . import supervise, sync, transfer, verify
from .batch import run_batch
from .channel import pack, usable
from .gateway import through_gateway
from .harbor_env import EnvironmentSpec, EventLoop, compose_based, one_line, unscoped
from .idle import CANNOT_PAUSE, CANNOT_THAW, Idle, set_paused, thawed
from .install import FORWARDER, SITE, Programs, gateway_of, install_forwarder, install_harness, stage_programs
from .moving import Move
from .viewwatch import ViewWatch

if TYPE_CHECKING:
    from harbor.environments.base import BaseEnvironment

    from ..harness.base import HarnessAdapter

T = TypeVar("T")
PATH = f"{supervise.ROOT}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
OPEN_FALLBACK = ("--env {name}: the image has no python3 to run hoh's forwarder to its proxy, so the roles' containers "
                 "are on a bridge network: pointed at the proxy, but their direct connections are not blocked; add "
                 "python3 to the image to close them")
UNVERIFIED = ("--env {name}: hoh cannot ask this provider what a role changed in its environment between two "
              "attempts; a role's leftovers outside its view are not looked for there")
START_TIMEOUT = 1800.0
"""An image may be built at the start (a Dockerfile): half an hour before hoh gives up on it."""
COPY_TIMEOUT = 1800.0
STOP_TIMEOUT = 300.0


class RoleEnvironment(Executor):
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

    # ---- lifecycle ----------------------------------------------------------------------------
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
                own = self._run(env.exec(f"{supervise.own_processes()}; command -v python3 >/dev/null && echo python3",
                                         timeout_sec=60), 120)
                self.own = tuple(int(p) for p in (own.stdout or "").split() if p.isdigit())
                self.python = "python3" in (own.stdout or "").split()
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
            self.ready = True
        except EnvironmentUnavailable:
            raise
        except Exception as err:  # noqa: BLE001 - Docker, a cloud API: any failure is the one line the user reads
            raise EnvironmentUnavailable(f"--env {self.spec.name}: the {self.spec.role} environment did not start: "
                                         f"{one_line(err)}") from None

    def _reopen(self) -> None:
        """The same environment again, on a bridge network (an image that cannot run the forwarder)."""
        self.warn(OPEN_FALLBACK.format(name=self.spec.name))
        error = self.loop.run(self.stopped())
        if error:
            raise EnvironmentUnavailable(f"--env {self.spec.name}: the {self.spec.role} environment did not stop "
                                         f"to start again on a bridge network: {error}")
        self.spec = dataclasses.replace(self.spec, closed=False)

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
        self.held, self._asked = None, None
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

    # ---- one attempt --------------------------------------------------------------------------
    @contextmanager
    def placed(self, adapter: "HarnessAdapter", request: RoleRequest, attempt_dir: Path) -> Iterator[RoleRequest]:
        self.start()
        self._check_between(attempt_dir)
        request = dataclasses.replace(request, site=ProgramSite("python3", SITE))
        if self.socket_dir is not None:
            # Closed: the role's own loopback, relayed to this proxy, as a jailed role's (the same allow-list).
            with attempt_egress(adapter, request, attempt_dir, listen_in=self.socket_dir) as closed:
                yield closed
            return
        upstream = adapter.upstream()
        if self.gateway is None or not upstream:
            yield request
            return
        with through_gateway(adapter, request, attempt_dir, self.gateway, upstream, self.spec.name) as opened:
            yield opened

    def execute(self, launch: Launch, request: RoleRequest, attempt_dir: Path,
                on_spawn: Callable[[int], None] | None) -> Execution:
        if self.on_attempt is not None:
            self.on_attempt(self.spec.role)
        return self._attempt(launch, request, attempt_dir)

    def _attempt(self, launch: Launch, request: RoleRequest, attempt_dir: Path) -> Execution:
        with self.idle.in_use(self._lock):
            self.start()
            self._check_between(attempt_dir)
            self._verified.discard(attempt_dir)
            with self._lock:
                alone = self.inflight == 0 and self.owned
                self.inflight += 1
            try:
                return self._execute(launch, request, attempt_dir, alone)
            finally:
                with self._lock:
                    self.inflight -= 1

    def execute_many(self, runs: Sequence[Queued], deadline: float | None = None) -> list[Execution | None]:
        with self.idle.in_use(self._lock):
            self.start()
            return self._execute_many(runs, deadline)

    def _execute_many(self, runs: Sequence[Queued], deadline: float | None) -> list[Execution | None]:
        done: list[Execution | None] = [None] * len(runs)
        pending, fruitless = list(range(len(runs))), 0
        # In one `exec` where that is sound; a batch that stopped (a run changed what the next would see) goes on
        # in another, once the view is put right (a batch that finds it changed runs nothing); what no batch
        # ran runs alone.
        while len(pending) > 1 and fruitless < 2 and (deadline is None or time.monotonic() < deadline or not any(done)):
            ran = run_batch(self, [runs[i] for i in pending], deadline)
            for i, execution in zip(pending, ran):
                done[i] = execution
            fruitless = 0 if any(ran) else fruitless + 1
            pending = [i for i in pending if done[i] is None]
        for i, run in enumerate(runs):
            if done[i] is None and (not i or deadline is None or time.monotonic() < deadline):
                done[i] = self._attempt(run.launch, run.request, run.attempt_dir)
        return done

    def _execute(self, launch: Launch, request: RoleRequest, attempt_dir: Path, alone: bool) -> Execution:
        env = self.env
        assert env is not None, "started above"
        writable, visible, hidden = self.paths(launch)
        variables = self.variables(launch, request)
        argv = launch.argv  # as the CLI's own in command.json; in a closed one started by the forwarder
        if self.socket_dir is not None and request.egress_token:
            argv = ["python3", "-I", FORWARDER, "--listen", f"127.0.0.1:{INSIDE_PORT}", "--socket", str(INSIDE_SOCKET),
                    "--", *argv]
        with self._lock:  # its own number; a view kept there is only for attempts that run there alone
            self.runs += 1
            attempt = supervise.Attempt(self.runs)
            if alone and self.python and self.container is not None:
                self.held = self.held or sync.Held()
            elif not alone:
                self.held = None
            move = Move(attempt, transfer.outermost([*writable, *visible]), writable, tuple(hidden),
                        self.held if alone else None, self.cache, self.views)
        command = {"argv": launch.argv, "cwd": str(launch.cwd), "env_names": sorted(variables),
                   "environment": self.spec.name, "session_id": self.spec.session_id, "streams": attempt.dir}
        atomic_write_json(attempt_dir / "command.json", command, durable=False)
        scratch = Path(tempfile.mkdtemp(prefix="hoh-env-exec-"))
        try:
            ran = self._start_attempt(env, move, launch, request, variables, argv, alone, scratch)
            self._collect(env, move, request, attempt_dir, alone, scratch, ran)
        except (OSError, TimeoutError, RuntimeError, shutil.Error) as error:
            for name in ("events.jsonl", "stderr.log"):
                if not (attempt_dir / name).exists():
                    (attempt_dir / name).write_bytes(b"")
            empty = supervise.result(None, None, 0.0, attempt_dir / "events.jsonl", attempt_dir / "stderr.log",
                                     launch.argv[0])
            return Execution(empty, f"the {self.spec.name} environment failed ({one_line(error)})")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        atomic_write_json(attempt_dir / "command.json", {**command, "bytes_in": move.moved_in,
                                                         "bytes_out": move.moved_out}, durable=False)
        out, err = attempt_dir / "events.jsonl", attempt_dir / "stderr.log"
        return Execution(supervise.result(ran.code, ran.limit, ran.seconds, out, err, launch.argv[0]))

    def paths(self, launch: Launch) -> tuple[list[Path], list[Path], tuple[Path, ...]]:
        """What of the launch's jail goes there: its writable paths, what it sees, what it must not see."""
        jail = launch.jail
        writable = transfer.outermost(p for p in (jail.writable if jail else ()) if self._inside(p) and p.is_dir())
        visible = [p for p in (*(jail.read_only if jail else ()), launch.cwd) if self._inside(p)]
        return writable, visible, tuple(jail.hidden if jail else ())

    def variables(self, launch: Launch, request: RoleRequest) -> dict[str, str]:
        """The launch's variables as they are set there."""
        # No key enters an environment hoh's proxy serves: a CLI given its key itself (no proxy in front of its
        # endpoint) gets the placeholder there.
        secrets = set() if self.key_inside else set(self.adapter.secrets(request))
        variables = {name: PLACEHOLDER_KEY if value in secrets else value for name, value in launch.env.items()}
        variables["PATH"] = PATH
        if request.proxy_url:
            variables.update(proxy_env(request.proxy_url))
            if self.gateway:  # the model route is the proxy itself, reached directly, never through itself
                variables["NO_PROXY"] = variables["no_proxy"] = f"{variables['NO_PROXY']},{self.gateway}"
        return variables

    def _through(self, env: "BaseEnvironment", alone: bool, scratch: Path) -> supervise.Through | None:
        """The attempt's channel into its container, when it runs alone in one hoh can address (`channel.py`)."""
        found = usable(env, self.container, self.python) if alone and self.owned else None
        return supervise.Through(found, scratch / "in.tar", scratch) if found is not None else None

    def _tampered(self, changes: list[str] | None = None, processes: int = 0) -> None:
        self.record(ev.EnvironmentTampered(role=self.spec.role, session_id=self.spec.session_id,
                                           changes=changes or [], processes=processes))

    def _start_attempt(self, env: "BaseEnvironment", move: Move, launch: Launch, request: RoleRequest,
                       variables: dict[str, str], argv: list[str], alone: bool, scratch: Path) -> supervise.Ran:
        """The view in, hoh's programs afresh (alone), the CLI started. A kept view a role changed is put right
        first (journaled); a record of it that cannot be believed replaces the environment."""
        for _ in range(3):
            through = self._through(env, alone, scratch)
            with tempfile.TemporaryDirectory(prefix="hoh-env-in-") as staging:
                placed = move.stage(Path(staging))
                if alone:  # hoh's programs afresh too: an earlier attempt may have changed or added to them
                    placed += stage_programs(self.programs, Path(staging))
                supervise.stage_stdin(move.attempt, launch.stdin, Path(staging))
                supervise.stage_env(move.attempt, variables, Path(staging))
                if through is not None:
                    pack(Path(staging), through.sent)
                else:
                    self._run(env.upload_dir(staging, move.attempt.incoming), COPY_TIMEOUT)
            keep = self.own if alone else None
            gather = move.gather(request.max_output_bytes, self.own) if through is not None else None  # alone
            try:
                ran = self._run(supervise.run(env, move.attempt, placed, argv, str(launch.cwd),
                                              wall=request.wall_timeout, idle=request.idle_timeout,
                                              max_output=request.max_output_bytes, keep=keep,
                                              view=move.place_args(), through=through, gather=gather))
            except supervise.Unplaced as unplaced:
                changed = move.placed(unplaced.report)
                self._tampered(verify.summary([f"C {p}" for p in changed] or ["C hoh's record of the view"]))
                if unplaced.report.get("held") is None:
                    with self._lock:
                        self._replace()
                    env = self.env
                    assert env is not None
                    move.held = self.held = sync.Held()
                continue
            if ran.placed is not None:
                move.placed(ran.placed)
            if ran.leftovers:
                self._tampered(processes=ran.leftovers)
            return ran
        raise OSError("its view kept changing before the attempt could start")

    def _collect(self, env: "BaseEnvironment", move: Move, request: RoleRequest, attempt_dir: Path,
                 alone: bool, scratch: Path, ran: supervise.Ran) -> None:
        """Both streams to the attempt's dir, and what the attempt wrote to its writable paths here (what its own
        `exec` collected, when it could: `ran`). Alone there, every process the attempt left is killed first and
        the engine is asked what changed (`_asked`)."""
        through = self._through(env, alone, scratch)
        incoming = transfer.scratch_beside(attempt_dir)
        keep = self.own if alone else None
        inline: supervise.Ran | None = ran  # what the attempt's own `exec` may have collected
        try:
            report = None
            if move.held is not None:
                try:
                    streams, text = self._run(supervise.collect(
                        env, move.attempt, move.collect_steps(request.max_output_bytes, keep), incoming, through,
                        inline), COPY_TIMEOUT)
                    report = supervise.changes_report(text)
                except supervise.Unlisted:  # the next attempt finds out why (`verify.py`); this one comes back whole
                    with self._lock:
                        move.held = self.held = None
                    shutil.rmtree(incoming, ignore_errors=True)
                    incoming.mkdir()
                    inline = None
            if report is None:
                streams, text = self._run(supervise.collect(
                    env, move.attempt, move.collect_steps(request.max_output_bytes, keep), incoming, through,
                    inline), COPY_TIMEOUT)
                copies = [incoming / "writable" / str(n) for n in range(len(move.writable))]
            with self._lock:
                if alone and self.owned and self.watch is not None and self.runs == move.attempt.number:
                    self._asked = (self.runs, self.loop.submit(self._unexpected()))
            if supervise.left(text):
                self._tampered(processes=supervise.left(text))
            supervise.adopt_streams(streams, attempt_dir)
            if report is None:
                move.adopt_copies(copies)
                return
            move.adopt_changes(incoming, report)
            if not report.get("believed"):
                self._tampered(changes=["C hoh's record of the view"])
        finally:
            shutil.rmtree(incoming, ignore_errors=True)

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """`coro` on the event loop, its execs in the environment carrying only what hoh gives each (`unscoped`)."""
        return self.loop.run(unscoped(self.env, coro), timeout)

    def _inside(self, path: Path) -> bool:
        return any(path.resolve().is_relative_to(b) for b in self.bounds)

