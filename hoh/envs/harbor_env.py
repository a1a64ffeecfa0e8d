"""A role's environment as Harbor makes it, and the one event loop its coroutines run on.

`environment.name` is one of Harbor's environment types (`docker`, `podman`, `modal`, …) or a third party's
`package.module:Class` subclass of Harbor's `BaseEnvironment`; its definition is an image
(`environment.image`) or a Dockerfile frozen into the workspace (`environment.dockerfile`). Everything
needed to make the same environment again, to stop it after a crash, is an `EnvironmentSpec`.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import logging
import re
import shutil
import threading
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Coroutine, TypeVar

import yaml

from ..config import EnvironmentConfig
from ..errors import EnvironmentUnavailable
from .egress.policy import INSIDE_SOCKET

if TYPE_CHECKING:
    from harbor.environments.base import BaseEnvironment

T = TypeVar("T")
COMPOSE_ENGINES = ("docker", "podman")
"""Harbor's environments built on Docker Compose files, which take an overlay of hoh's."""
HARBOR_HINT = "pip install 'hoh[harbor]' (Harbor needs Python >= 3.12)"
UNTRACEABLE_INIT = """import ctypes, os, signal
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
def reap(*_):
    while True:
        try:
            if not os.waitpid(-1, os.WNOHANG)[0]:
                return
        except ChildProcessError:
            return
signal.signal(signal.SIGCHLD, reap)
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
while True:
    signal.pause()
"""
"""The init of a container hoh makes, in place of Harbor's `sleep infinity`: it makes itself undumpable
(PR_SET_DUMPABLE 0), reaps what is left to it, and ends on SIGTERM. An environment's own processes are never
killed between attempts, and a root role with Docker's default capabilities may ptrace any dumpable process of
its container's root, `sleep` included: code it put into its init would outlive every attempt, and change the
next one's view after hoh placed it. An undumpable process is out of its reach (ptrace and /proc/1/mem need
CAP_SYS_PTRACE then). An image without python3 keeps `sleep`, as it keeps no view between attempts (`sync.py`)."""
INIT_COMMAND = ["sh", "-c", f"command -v python3 >/dev/null 2>&1 && exec python3 -I -c '{UNTRACEABLE_INIT}'; "
                "exec sleep infinity"]


def require_harbor(name: str) -> None:
    try:
        import harbor.environments.base  # noqa: F401
    except ImportError:
        raise EnvironmentUnavailable(f"--env {name} runs the roles through Harbor's environments, which are not "
                                     f"installed here; {HARBOR_HINT}") from None


def environment_class(name: str) -> type["BaseEnvironment"]:
    """The Harbor environment class `name` stands for; a one-line error for a name Harbor does not know."""
    require_harbor(name)
    from harbor.environments.base import BaseEnvironment
    from harbor.environments.factory import _load_environment_class
    from harbor.models.environment_type import EnvironmentType
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), attr)
        except Exception as err:  # noqa: BLE001 - a third party's module may fail in any way; say which and why
            raise EnvironmentUnavailable(f"--env {name}: cannot import it ({type(err).__name__}: {err}); install "
                                         "its package or put it on PYTHONPATH") from None
        if not (isinstance(cls, type) and issubclass(cls, BaseEnvironment)):
            raise EnvironmentUnavailable(f"--env {name}: not a subclass of Harbor's BaseEnvironment")
        return cls
    try:
        kind = EnvironmentType(name)
    except ValueError:
        known = ", ".join(sorted(t.value for t in EnvironmentType))
        raise EnvironmentUnavailable(f"--env {name}: no such environment; use local or one of Harbor's: {known} "
                                     "(or package.module:Class)") from None
    try:
        return _load_environment_class(kind)
    except ImportError as err:
        raise EnvironmentUnavailable(f"--env {name}: Harbor's {name} environment needs a package that is not "
                                     f"installed ({err.name or err}); install Harbor's extra for it") from None


def compose_based(name: str) -> bool:
    """Whether it is one of Harbor's environments on Docker Compose files (Docker, Podman, or a third party's
    subclass of them), which take hoh's overlay and whose engine hoh can ask (`verify.py`)."""
    if name in COMPOSE_ENGINES:
        return True
    if ":" not in name:
        return False
    try:
        from harbor.environments.docker.docker import DockerEnvironment
        return issubclass(environment_class(name), DockerEnvironment)
    except (EnvironmentUnavailable, ImportError):
        return False


def preflight(config: EnvironmentConfig) -> None:
    """The engine or the provider answers (Harbor's own check: docker's daemon, a cloud's credentials)."""
    cls = environment_class(config.name)
    try:
        cls.preflight()
    except SystemExit as err:  # some of Harbor's preflights exit with a message
        raise EnvironmentUnavailable(f"--env {config.name}: {err}") from None
    except Exception as err:  # noqa: BLE001 - any provider's failure becomes the one line the user reads
        raise EnvironmentUnavailable(f"--env {config.name}: the environment cannot be used here: "
                                     f"{one_line(err)}") from None


def one_line(err: BaseException) -> str:
    """An exception as one line with its cause (Docker's output carries it after the command line, which Harbor's
    compose errors spell out in full before it: dropped, as the cause is what the user needs)."""
    text = " ".join(str(err).split()) or type(err).__name__
    text = re.sub(r" Command: .*? (Return code: )", r" \1", text, count=1)
    for marker in ("Error response from daemon:", "error:", "Error:", "ERROR:"):
        if marker in text:
            text = text[text.rindex(marker):]
            break
    return text[:400]


@dataclass(frozen=True)
class EnvironmentSpec:
    """One role's environment: enough to make it again (and to stop it after hoh was killed)."""

    name: str
    role: str
    session_id: str
    dir: Path
    """hoh's own files for it (Harbor's environment dir and trial dirs), outside every role's reach."""
    image: str | None
    dockerfile: Path | None
    network: bool
    """Whether the environment has a network at all (`sandbox.network: none` gives it none)."""
    memory_mb: int | None = None
    """`sandbox.limits.memory_mb`: the environment's memory, where its provider enforces one."""
    processes: int | None = None
    """`sandbox.limits.processes`: how many processes it may hold at once (a Compose engine's `pids_limit`)."""
    closed: bool = False
    """Networked, but closed to everything but hoh's egress proxy (`sandbox.network: egress` on a Compose engine):
    the container has no network at all, and the proxy's unix socket is bound in at `INSIDE_SOCKET`'s dir."""
    kwargs: tuple[tuple[str, Any], ...] = ()

    def overlay(self, socket_dir: Path | None) -> dict[str, Any]:
        """hoh's Compose overlay for a Compose engine's `main` service: its network, its limits."""
        main: dict[str, Any] = {"command": INIT_COMMAND}
        if not self.network or self.closed:
            # Harbor's Docker and Podman environments take a network-less container only through their egress
            # sidecar, whose image must be pulled; `network_mode: none` gives the same container loopback alone.
            main["network_mode"] = "none"
        if self.closed and socket_dir is not None:
            main["volumes"] = [f"{socket_dir}:{INSIDE_SOCKET.parent}:ro"]
        if self.processes:
            main["pids_limit"] = self.processes
        return {"services": {"main": main}}

    def make(self, socket_dir: Path | None = None) -> "BaseEnvironment":
        """Harbor's environment object (nothing started); `socket_dir`: where hoh's proxy listens for a closed one."""
        from harbor.models.task.config import EnvironmentConfig as TaskEnvironment
        from harbor.models.task.config import NetworkMode, NetworkPolicy
        from harbor.models.trial.paths import TrialPaths
        env_dir, trial_dir = self.dir / "environment", self.dir / "trial"
        env_dir.mkdir(parents=True, exist_ok=True)
        if self.dockerfile is not None:
            shutil.copyfile(self.dockerfile, env_dir / "Dockerfile")
        trial = TrialPaths(trial_dir)
        trial.mkdir()
        extra: dict[str, Any] = {}
        mode = NetworkMode.PUBLIC
        overlay = self.overlay(socket_dir) if compose_based(self.name) else {}
        if overlay:
            path = self.dir / "hoh-overlay.yaml"
            path.write_text(yaml.safe_dump(overlay, sort_keys=False))
            extra["extra_docker_compose"] = [path]
        elif not self.network:
            mode = NetworkMode.NO_NETWORK
        image = self.image
        if self.name == "podman" and image and image.startswith("localhost/"):
            # Harbor stops with `down --rmi local`, and podman-compose counts every image named localhost/* as the
            # project's own: it ran `podman rmi --force` on the image, and so on every container of it, another
            # role's or another run's too. Podman finds the same local image by its short name.
            image = image.removeprefix("localhost/")
        try:
            return environment_class(self.name)(
                environment_dir=env_dir, environment_name="hoh", session_id=self.session_id, trial_paths=trial,
                task_env_config=TaskEnvironment(docker_image=image, memory_mb=self.memory_mb),
                logger=logging.getLogger("hoh.envs"),
                network_policy=NetworkPolicy(network_mode=mode), **extra, **dict(self.kwargs))
        except (ValueError, TypeError) as err:
            raise EnvironmentUnavailable(f"--env {self.name}: {one_line(err)}") from None


async def unscoped(env: "BaseEnvironment | None", coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` with none of the variables Harbor lays over every `exec` of an agent's phase (its trial's
    `scoped_exec_env`: the agent's `--ae` values, the model's key among them). hoh reads what it needs of them on
    this side (the key, for its egress proxy); in the role's environment every process of an attempt (the shell of
    each `exec`, the supervisor, the CLI) would hold them, for the role to read in /proc. The overlay lives in a
    context variable: cleared in this task's own copy of the context, it stays as it is for Harbor."""
    overlays = getattr(env, "_exec_env_overlays", None)
    if isinstance(overlays, contextvars.ContextVar):
        overlays.set(())
    return await coro


class EventLoop:
    """The asyncio loop Harbor's coroutines run on, for hoh's synchronous threads: hoh's own private loop in a
    daemon thread (several environments, roles or trials, may be driven at once from hoh's threads), or
    `EventLoop(loop)`, a loop someone else runs (Harbor's, whose environment objects belong to it), which hoh
    only submits to and never stops."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.owned = loop is None
        self._loop = loop or asyncio.new_event_loop()
        self._tasks: set[asyncio.Task] = set()
        self.interrupted = False
        self._thread: threading.Thread | None = None
        if self.owned:
            self._thread = threading.Thread(target=self._loop.run_forever, name="hoh-envs", daemon=True)
            self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` there and wait for it (never from that loop's own thread). KeyboardInterrupt once
        `interrupt()` was called, as hoh's own "stop at once"."""
        if self.interrupted:
            coro.close()
            raise KeyboardInterrupt
        future = asyncio.run_coroutine_threadsafe(self._tracked(coro), self._loop)
        try:
            return future.result(timeout)
        except FutureTimeout:
            if future.done():  # the coroutine's own timeout (FutureTimeout is TimeoutError), not this wait's
                raise
            future.cancel()
            raise TimeoutError(f"the environment did not answer within {timeout:g}s") from None
        except FutureCancelled:
            if self.interrupted:
                raise KeyboardInterrupt from None
            raise
        except BaseException:
            future.cancel()
            raise

    def submit(self, coro: Coroutine[Any, Any, T]) -> "Future[T]":
        """Start `coro` there and return at once: its future, cancelled by `interrupt()` as `run`'s are."""
        if self.interrupted:
            coro.close()
            raise KeyboardInterrupt
        return asyncio.run_coroutine_threadsafe(self._tracked(coro), self._loop)

    async def _tracked(self, coro: Coroutine[Any, Any, T]) -> T:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            if self.interrupted:  # interrupted between the check in `run` and now
                coro.close()
                raise asyncio.CancelledError
            return await coro
        finally:
            self._tasks.discard(task)

    def interrupt(self) -> None:
        """Stop what hoh runs there at once: every coroutine in flight is cancelled (a supervised attempt then
        kills its CLI before its `run` returns) and every later `run` raises KeyboardInterrupt."""
        self.interrupted = True

        def cancel() -> None:
            for task in list(self._tasks):
                task.cancel()

        self._loop.call_soon_threadsafe(cancel)

    def close(self) -> None:
        if not self.owned:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        assert self._thread is not None
        self._thread.join(timeout=5)
