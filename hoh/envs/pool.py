"""The role environments of one Runtime session: one per role, started at its first attempt, all stopped
when the session ends; and, when a session begins, the environments an earlier one left running.

While a role runs, the next role's environment is started (or thawed) and the previous one's paused, where
its engine can (`idle.py`).

Every start is journaled before it happens (`EnvironmentStarted`) and every stop after (`EnvironmentStopped`),
so after `kill -9` at any point the next session knows what to stop, and stops it before anything runs.
`hoh replay` only reads its workspace: its QA environment's record is in its own temporary directory
(`detached`), where the next replay or session finds it after a kill -9 (`stop_abandoned`).

A `Given` environment, passed to the session (`Runtime.open`), is one that someone else started and stops
(a Harbor trial's, see hoh/harbor/), for every role: nothing is started, journaled or stopped for it, and its
coroutines run on its owner's loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from ..config import HohConfig
from ..fsutil import atomic_write_json
from ..harness.base import HarnessAdapter
from ..harness.process import start_ticks
from ..paths import WorkspacePaths
from ..store import events as ev
from ..store.hashcache import HashCache
from ..store.journal import Journal, RunHistory
from .base import Executor
from .harbor_env import EnvironmentSpec, EventLoop, compose_based, one_line, preflight
from .idle import Ahead
from .local.executor import LOCAL
from .role import RoleEnvironment
from .viewwatch import ViewWatch

if TYPE_CHECKING:
    from harbor.environments.base import BaseEnvironment


@dataclass(frozen=True)
class Given:
    """An environment someone else started and stops, for every role, with the loop it belongs to."""

    env: "BaseEnvironment"
    loop: EventLoop
    executor: type[RoleEnvironment] = RoleEnvironment


class Environments:
    def __init__(self, config: HohConfig, paths: WorkspacePaths, journal: Journal,
                 adapters: Mapping[str, HarnessAdapter], warn: Callable[[str], None] = lambda message: None,
                 given: Given | None = None):
        """`warn`: tells the user what an environment fell back to (once per environment); `given`: the one
        environment every role runs in, someone else's (a Harbor trial's)."""
        self.config, self.paths, self.journal, self.adapters = config, paths, journal, adapters
        self._warn, self._said = warn, set[str]()
        self.local = config.environment.local
        self._loop: EventLoop | None = None
        self._roles: dict[str, RoleEnvironment] = {}
        self.cache = HashCache()
        """File hashes by stat, for every role's environment of the session."""
        self.views = ViewWatch(self.cache)
        """hoh's side of every role's view, followed by the kernel (`viewwatch.py`)."""
        self.given = None if self.local else given
        self.ahead = Ahead(self._roles.get, tuple(adapters)) \
            if not self.local and self.given is None and config.mode != "developer_only" else None
        """Readies the next role's environment and pauses the last one's; none for a Harbor trial's."""

    @property
    def loop(self) -> EventLoop:
        if self.given is not None:
            return self.given.loop
        if self._loop is None:
            self._loop = EventLoop()
        return self._loop

    def check(self) -> None:
        """The environment's class exists and its engine or provider answers (nothing is started)."""
        if not self.local and self.given is None:
            preflight(self.config.environment)

    def spec(self, role: str, session_id: str) -> EnvironmentSpec:
        settings, sandbox = self.config.environment, self.config.sandbox
        # As a jailed role's: egress (the proxy, its allow-list) unless `sandbox.network: none`. An environment hoh
        # cannot close (a provider's, a Harbor trial's, made by its owner) gets a network only for a role that needs
        # its model.
        closable = compose_based(settings.name) and self.given is None
        needs_model = self.adapters[role].capabilities.needs_model
        network = sandbox.network == "shared" or (sandbox.network == "egress" and (needs_model or closable))
        return role_spec(self.config, self.paths.root, role, self.paths.environments / session_id, network,
                         closed=network and sandbox.network == "egress" and closable)

    def executor(self, role: str) -> Executor:
        if self.local:
            return LOCAL
        if role not in self._roles:
            spec = self.spec(role, f"hoh-{role}-{uuid.uuid4().hex[:10]}")
            bounds = (self.paths.root, self.paths.project)
            given = self.given
            make = given.executor if given is not None else RoleEnvironment
            made = make(spec, self.loop, self.adapters[role], bounds, self._started,
                        env=given.env if given is not None else None, warn=self.warn, record=self.journal.append)
            made.cache = self.cache  # the roles' views are mostly the same files: hashed and held once
            made.views = self.views
            made.on_attempt = self.ahead.turn_of if self.ahead is not None else None
            self._roles[role] = made
        return self._roles[role]

    def warn(self, message: str) -> None:
        """Said once, however many roles' environments it is true of."""
        if message not in self._said:
            self._said.add(message)
            self._warn(message)

    def executors(self) -> dict[str, Executor]:
        return {role: self.executor(role) for role in self.adapters}

    def _started(self, spec: EnvironmentSpec) -> None:
        self.journal.append(ev.EnvironmentStarted(role=spec.role, environment=spec.name, session_id=spec.session_id))

    def stop_orphans(self, history: RunHistory) -> None:
        """Stop what an earlier session started and never stopped (it was killed), before anything runs; and what
        a killed `hoh replay` of this user's left (`stop_abandoned`)."""
        if self.given is None and not self.local and "qa" in self.adapters:
            stop_abandoned(Path(tempfile.gettempdir()), self.adapters["qa"])
        leftovers = list(history.live_environments.values())
        if not leftovers or self.given is not None:
            return
        envs = []
        for left in leftovers:
            if left.role not in self.adapters:
                continue
            env = RoleEnvironment(self.spec(left.role, left.session_id), self.loop, self.adapters[left.role], (),
                                  self._started)
            try:
                env.env = env.spec.make()
            except Exception as err:  # noqa: BLE001 - one that cannot even be made again must not block the resume
                self.journal.append(ev.EnvironmentStopped(session_id=left.session_id, orphan=True, error=one_line(err)))
                continue
            envs.append(env)
        if envs:
            self._stop(envs, orphan=True)

    def close(self) -> None:
        """Stop every environment this session started (at once: a Docker stop takes ~10 s)."""
        if self.ahead is not None:
            self.ahead.close()
        started = [env for env in self._roles.values() if env.env is not None and env.owned]
        self._roles.clear()
        self.views.close()
        if started:
            self._stop(started, orphan=False)
        if self._loop is not None:
            self._loop.close()
            self._loop = None

    def _stop(self, envs: list[RoleEnvironment], orphan: bool) -> None:
        async def stop_all() -> list[str | None]:
            return list(await asyncio.gather(*(env.stopped() for env in envs)))

        try:
            errors = self.loop.run(stop_all())
        except Exception as err:  # noqa: BLE001 - journaled; never hides the run's own outcome
            errors = [one_line(err)] * len(envs)
        for env, error in zip(envs, errors):
            self.journal.append(ev.EnvironmentStopped(session_id=env.spec.session_id, orphan=orphan, error=error))


def role_spec(config: HohConfig, root: Path, role: str, where: Path, network: bool,
              closed: bool = False) -> EnvironmentSpec:
    """One role's environment as the settings make it (its image or the workspace `root`'s Dockerfile, its
    limits), its files in `where`, whose name is its session's."""
    settings, sandbox = config.environment, config.sandbox
    dockerfile = Path(settings.dockerfile) if settings.dockerfile else None
    if dockerfile is not None and not dockerfile.is_absolute():
        dockerfile = root / dockerfile
    return EnvironmentSpec(name=settings.name, role=role, session_id=where.name, dir=where, image=settings.image,
                           dockerfile=dockerfile, network=network, closed=closed,
                           memory_mb=sandbox.limits.memory_mb, processes=sandbox.limits.processes,
                           kwargs=tuple(sorted(settings.kwargs.items())))


REPLAY_SCRATCH = "hoh-past-replay-"
"""`hoh replay`'s temporary directories (`runtime/replaying.py`), each with its QA environment's files."""
OWNER = "owner.json"
REPLAY_SESSION = re.compile(r"hoh-replay-[0-9a-f]{10}")


def detached(config: HohConfig, root: Path, scratch: Path, adapter: HarnessAdapter,
             warn: Callable[[str], None] = lambda message: None) -> RoleEnvironment:
    """QA's environment for checks run outside any run (`hoh replay`): the workspace (`root`) is only read, so
    nothing is journaled there; its files, the views it may hold and the record of who started it (`OWNER`,
    written before the start, so that the next replay or run stops it after a kill -9: `stop_abandoned`) are
    under `scratch`. It has no network (no egress proxy runs outside a run). The caller stops it
    (`stop_detached`)."""
    preflight(config.environment)
    stop_abandoned(scratch.parent, adapter)
    spec = role_spec(config, root, "qa", scratch / f"hoh-replay-{uuid.uuid4().hex[:10]}", network=False)
    return RoleEnvironment(spec, EventLoop(), adapter, (scratch,), lambda started: _own(scratch, started), warn=warn)


def stop_detached(env: RoleEnvironment) -> str | None:
    """Stop what `detached` made, and its event loop; the error as one line when the stop failed."""
    try:
        return env.loop.run(env.stopped())
    finally:
        env.loop.close()


def _own(scratch: Path, spec: EnvironmentSpec) -> None:
    me = os.getpid()
    atomic_write_json(scratch / OWNER, {"pid": me, "ticks": start_ticks(me), "environment": spec.name,
                                        "session_id": spec.session_id, "image": spec.image,
                                        "kwargs": dict(spec.kwargs)})


def stop_abandoned(tmp: Path, adapter: HarnessAdapter) -> None:
    """Stop the environments of the `hoh replay`s under `tmp` that were killed (their process is gone), and remove
    their directories. Only this user's own private directories count, with a session name of hoh's inside
    them: anyone can write to /tmp, and a planted record must not make hoh stop another project."""
    for scratch in sorted(tmp.glob(f"{REPLAY_SCRATCH}*")):
        try:
            st = scratch.lstat()
            if not scratch.is_dir() or scratch.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o077:
                continue
            record = json.loads((scratch / OWNER).read_text())
            pid, ticks, session = int(record["pid"]), record["ticks"], str(record["session_id"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not REPLAY_SESSION.fullmatch(session) or ticks is None or start_ticks(pid) == ticks:
            continue  # not hoh's, or its replay still runs (or no one can tell)
        spec = EnvironmentSpec(name=str(record["environment"]), role="qa", session_id=session, dir=scratch / session,
                               image=record.get("image"), dockerfile=None, network=False,
                               kwargs=tuple(sorted(dict(record.get("kwargs") or {}).items())))
        left = RoleEnvironment(spec, EventLoop(), adapter, (scratch,), lambda started: None)
        try:
            left.env = spec.make()
            if stop_detached(left) is not None:
                continue  # kept for the next one to try again
        except Exception:  # noqa: BLE001 - a leftover that cannot be stopped must not block this one
            continue
        shutil.rmtree(scratch, ignore_errors=True)
