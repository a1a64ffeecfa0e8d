"""`RoleEnvironment`: the executor of one role's attempts in one Harbor environment.

How it starts, pauses, is checked and replaced between attempts, and stops: `lifecycle.py`. Every attempt: the
role's view of the workspace goes in (in a Docker or Podman container where the attempt runs alone, only what
differs from what it keeps there, checked first: `sync.py`; else afresh, what the previous attempt left of it
removed first: `transfer.py`), the CLI runs under `supervise`, and only the role's writable paths come back
(what changed in them, or all of them). The Runtime never enters the environment: the journal, the state, the
ledger, history.git, the lock and every key stay on hoh's side; the model is reached through hoh's egress proxy,
which adds the key.

A networked role's container on a Compose engine (docker, podman) is closed: it has no network but its
loopback, where hoh's forwarder (`egress/shim.py`, run by the image's python3 before the CLI) relays to the
proxy's unix socket, bound in from this machine. So every connection it makes goes through the proxy's
allow-list and into `egress.jsonl`, as a jailed role's do. An image without python3 cannot run the forwarder:
its container is started again on a bridge network, with the proxy on the gateway, and the run says so once.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from ..harness.attempt import ProgramSite, RoleRequest
from ..harness.sandbox import PLACEHOLDER_KEY
from . import supervise, sync, transfer, verify
from .base import CommandRecord, Execution, Executor, Launch, Queued
from .batch import run_batch
from .channel import pack, usable
from .egress.policy import INSIDE_PORT, INSIDE_SOCKET
from .egress.route import attempt_egress, proxy_env
from .gateway import through_gateway
from .harbor_env import one_line
from .install import FORWARDER, SITE, stage_programs
from .lifecycle import COPY_TIMEOUT, EnvironmentLife
from .moving import Move

if TYPE_CHECKING:
    from harbor.environments.base import BaseEnvironment

    from ..harness.base import HarnessAdapter

PATH = f"{supervise.ROOT}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class RoleEnvironment(EnvironmentLife, Executor):
    """One role's attempts, and the batches of QA's checks, in its environment (`EnvironmentLife`)."""

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
        command = CommandRecord(launch.argv, str(launch.cwd), sorted(variables), self.spec.name, self.spec.session_id,
                                attempt.dir)
        command.write(attempt_dir)
        scratch = Path(tempfile.mkdtemp(prefix="hoh-env-exec-"))
        try:
            ran = self._start_attempt(env, move, launch, request, variables, argv, alone, scratch)
            self._collect(env, move, request, attempt_dir, alone, scratch, ran)
        except (OSError, TimeoutError, RuntimeError, shutil.Error) as error:
            self._server_killed()
            for name in ("events.jsonl", "stderr.log"):
                if not (attempt_dir / name).exists():
                    (attempt_dir / name).write_bytes(b"")
            empty = supervise.result(None, None, 0.0, attempt_dir / "events.jsonl", attempt_dir / "stderr.log",
                                     launch.argv[0])
            return Execution(empty, f"the {self.spec.name} environment failed ({one_line(error)})")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        dataclasses.replace(command, bytes_in=move.moved_in, bytes_out=move.moved_out).write(attempt_dir)
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
        found = usable(env, self.container, self.python, self.session) if alone and self.owned else None
        return supervise.Through(found, scratch / "in.tar", scratch) if found is not None else None

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
            keep = self.spared if alone else None
            gather = move.gather(request.max_output_bytes, self.spared) if through is not None else None  # alone
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
        keep = self.spared if alone else None
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
