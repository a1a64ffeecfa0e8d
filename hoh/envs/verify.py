"""Whether a role's container is still what hoh made of it, asked of its engine's own record from this machine.

A role is root in its container and the container lives across its attempts (and QA's checks run there), so
between two attempts hoh asks the engine's record, never the container: the container's overlay layer, read on
this machine where hoh may (`Layers`: a rootful engine, hoh as root), else `docker diff` (or `podman diff`),
lists every path changed since the image. What the environment held when it started is expected (the provider's
own mount points), and so is what hoh itself puts there: its own directory (`/opt/hoh`), `/tmp`
(emptied before every attempt, as each local attempt gets a /tmp of its own), and the role's view (the paths
of the workspace and the project, put in afresh before every attempt, or checked entry by entry against hoh's
record of it: `sync.py`). Anything else changed (a wrapped
`python3`, an `/etc/ld.so.preload`, a planted `.bashrc`) is tampering: the environment is replaced by a fresh
one before the next attempt, and that is journaled. Nothing in the container can hide a change from its
engine: the container cannot reach the engine or this machine's copy of its layer, which the kernel writes.

Of `/opt/hoh`, what decides an attempt's outcome is put in afresh before each attempt (the supervisor that
records the exit code, the forwarder, the programs on the attempt's PATH: `stage_programs` in `install.py`). What
stays is a CLI's installed files: a role that alters them alters only its own later attempts, never a check.

The record is read as soon as an attempt alone there is collected, by a step that first killed every process
the attempt left (counted and journaled): nothing of the role runs after it, so the answer, ready before the
role's next attempt, holds for it; anything changed outside hoh's paths before that step ran (a wrapped
`bash` that faked the kill) stays in the record. A process left running is also killed, and counted,
before the next attempt starts (`supervise.run`).
Only Docker and Podman containers can be asked this way; other providers are said to be unverified, once.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from ..harness.process import inherited

if TYPE_CHECKING:
    from harbor.environments.base import BaseEnvironment

TIMEOUT = 120.0
SHOWN = 20
"""At most this many changed paths are journaled (the count says how many there were)."""


def engine_of(env: "BaseEnvironment") -> tuple[str, ...] | None:
    """The engine's client (`docker`, `podman`) of a Compose environment of Harbor's; None for any other."""
    runtime = getattr(type(env), "runtime", None)
    try:
        engine = tuple(runtime().engine) if callable(runtime) else None
    except Exception:  # noqa: BLE001 - a provider of another shape: not one hoh can ask
        return None
    return engine or None


def engine_env() -> dict[str, str]:
    """What of hoh's environment the engine's client is given: its PATH and its own settings, nothing else."""
    return inherited("PATH", "HOME", "XDG_RUNTIME_DIR", "TMPDIR", prefixes=("DOCKER_", "CONTAINER"))


async def _ask(engine: tuple[str, ...], *args: str) -> str:
    process = await asyncio.create_subprocess_exec(*engine, *args, stdin=asyncio.subprocess.DEVNULL,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                   env=engine_env())
    try:
        out, err = await asyncio.wait_for(process.communicate(), TIMEOUT)
    except asyncio.TimeoutError:
        process.kill()
        raise OSError(f"{engine[0]} {args[0]} did not answer within {TIMEOUT:g}s") from None
    if process.returncode != 0:
        raise OSError(f"{engine[0]} {args[0]} failed: {err.decode(errors='replace').strip()[:300]}")
    return out.decode(errors="replace")


def expected(line: str, allowed: Iterable[str]) -> bool:
    """Whether one line of `docker diff` ("A /path", "C /path", "D /path") is a change hoh expects."""
    kind, _, path = line.partition(" ")
    for prefix in allowed:
        if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
            return True
        if kind in ("A", "C") and prefix.startswith(path.rstrip("/") + "/"):  # a directory on the way to one
            return True
    return False


def _engine(env: "BaseEnvironment") -> tuple[str, ...]:
    engine = engine_of(env)
    if engine is None:
        raise OSError("not a Docker or Podman environment")
    return engine


def keeps_images(env: "BaseEnvironment") -> bool:
    """Whether its stop must keep its image: `podman-compose down --rmi local` (Harbor's stop with delete) removes
    every `localhost/` image with --force, and with it every container of any session that uses it."""
    engine = engine_of(env)
    return engine is not None and Path(engine[0]).name == "podman"


async def ask(env: "BaseEnvironment", *args: str) -> str:
    """One call of the environment's engine (`docker ARGS`, `podman ARGS`); OSError with its words when it failed."""
    return await _ask(_engine(env), *args)


async def container_of(env: "BaseEnvironment", project: str) -> str:
    """The id of the environment's `main` container (asked once, when it has started); OSError when the engine
    lists none or several."""
    # -a: Podman lists a paused container only with it
    found = (await ask(env, "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}",
                        "--filter", "label=com.docker.compose.service=main")).split()
    if len(found) != 1:
        raise OSError(f"the engine lists {len(found)} containers for {project}")
    return found[0]


async def changes(env: "BaseEnvironment", container: str) -> set[str]:
    """Every change the engine lists in the container since its image; OSError when the engine cannot say."""
    return {line for line in (await ask(env, "diff", container)).splitlines() if line.strip()}


MAX_CHANGES = 100_000
"""More changed paths than this in a container's own layer, outside hoh's paths, are not listed one by one."""


@dataclass(frozen=True)
class Layers:
    """A container's overlay layers on this machine: `upper` holds everything changed in it (a removed path as a
    whiteout), `lower` its image. The container writes `upper` but cannot hide anything from it."""

    upper: Path
    lower: tuple[Path, ...]

    def changes(self, allowed: tuple[str, ...]) -> set[str]:
        """What `docker diff` lists, as its lines, but what lies under an `allowed` path (never looked into: a
        CLI installed in /opt/hoh costs nothing); OSError when a directory cannot be read. Never follows a link."""
        found: set[str] = set()
        stack = [""]
        while stack:
            rel = stack.pop()
            with os.scandir(self.upper / rel[1:] if rel else self.upper) as entries:
                for entry in entries:
                    path = f"{rel}/{entry.name}"
                    if any(path == a or path.startswith(a.rstrip("/") + "/") for a in allowed):
                        continue
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:  # overlayfs's whiteout: removed
                        found.add(f"D {path}")
                        continue
                    kind = "C" if any(os.path.lexists(layer / path[1:]) for layer in self.lower) else "A"
                    found.add(f"{kind} {path}")
                    if len(found) > MAX_CHANGES:
                        return found | {f"? more than {MAX_CHANGES} changed paths"}
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(path)
                        if _opaque(entry.path):  # made anew: what the image had there is gone
                            found |= {f"D {path}/{name}" for name in self._below(path) - set(os.listdir(entry.path))}
        return found

    def _below(self, path: str) -> set[str]:
        """The names the image has in directory `path`."""
        names: set[str] = set()
        for layer in self.lower:
            try:
                if stat.S_ISDIR(os.lstat(layer / path[1:]).st_mode):
                    names.update(os.listdir(layer / path[1:]))
            except FileNotFoundError:
                continue
        return names


def _opaque(directory: str) -> bool:
    """Whether overlayfs marked `directory` opaque (it hides the image's directory there)."""
    for name in ("trusted.overlay.opaque", "user.overlay.opaque"):
        try:
            if os.getxattr(directory, name, follow_symlinks=False) == b"y":
                return True
        except OSError as err:
            if err.errno not in (errno.ENODATA, errno.ENOTSUP):
                raise
    return False


async def layers_of(env: "BaseEnvironment", container: str) -> Layers | None:
    """The container's overlay layers, when its engine keeps them on this machine where hoh may read them (a
    rootful engine and hoh as root, say); None when not."""
    try:
        driver = json.loads(await ask(env, "inspect", "--format", "{{json .GraphDriver}}", container))
        data = driver.get("Data") or {}
        upper = Path(data["UpperDir"])
        lower = tuple(Path(p) for p in (data.get("LowerDir") or "").split(":") if p)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if driver.get("Name") not in ("overlay2", "overlay") or not upper.is_absolute():
        return None
    try:  # hoh not root: the engine's data dir is closed to it (is_dir raises then, EACCES)
        readable = upper.is_dir() and os.access(upper, os.R_OK | os.X_OK)
    except OSError:
        return None
    return Layers(upper, lower) if readable else None


@dataclass
class Watch:
    """How hoh asks what changed in one container outside its own paths (`allowed`): its layers read on this
    machine where it can (a walk of what changed there: milliseconds), else the engine's `diff` (~0.4 s of
    the engine's CPU each time, on a role's critical path on a small machine). Both are the engine's own record
    of the container, which nothing in it can alter or hide from; one way is used throughout, the baseline too."""

    env: "BaseEnvironment"
    container: str
    allowed: tuple[str, ...]
    layers: Layers | None = None
    baseline: set[str] = field(default_factory=set)
    """What was changed when it had started (the provider's own mount points)."""

    async def begin(self) -> None:
        self.layers = await layers_of(self.env, self.container)
        if self.layers is not None:
            try:
                self.baseline = await asyncio.to_thread(self.layers.changes, self.allowed)
                return
            except OSError:
                self.layers = None
        self.baseline = await changes(self.env, self.container)

    async def unexpected(self) -> list[str]:
        """The changes that are neither hoh's nor the environment's own at its start."""
        if self.layers is not None:
            try:
                found = await asyncio.to_thread(self.layers.changes, self.allowed)
            except OSError as err:
                found = {f"? its layer could not be read: {str(err)[:200]}"}
        else:
            found = await changes(self.env, self.container)
        return sorted(line for line in found - self.baseline if not expected(line, self.allowed))


def summary(changes: list[str]) -> list[str]:
    return changes[:SHOWN] + ([f"… and {len(changes) - SHOWN} more"] if len(changes) > SHOWN else [])
