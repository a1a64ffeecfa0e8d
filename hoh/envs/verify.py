"""Whether a role's container is still what hoh made of it, asked of its engine from this machine.

A role is root in its container and the container lives across its attempts (and QA's checks run there), so
between two attempts hoh asks the engine, never the container: `docker diff` (or `podman diff`) lists every
path changed since the image. What the environment held when it started is expected (the provider's own
mount points), and so is what hoh itself puts there: its own directory (`/opt/hoh`), `/tmp`
(emptied before every attempt, as each local attempt gets a /tmp of its own), and the role's view (the paths
of the workspace and the project, put in afresh before every attempt, or checked entry by entry against hoh's
record of it: `sync.py`). Anything else changed (a wrapped
`python3`, an `/etc/ld.so.preload`, a planted `.bashrc`) is tampering: the environment is replaced by a fresh
one before the next attempt, and that is journaled. Nothing in the container can hide a change from its
engine: the container cannot reach the engine, and the diff is computed by the engine from its own layers.

Of `/opt/hoh`, what decides an attempt's outcome is put in afresh before each attempt (the supervisor that
records the exit code, the forwarder, the programs on the attempt's PATH: `stage_programs` in `install.py`). What
stays is a CLI's installed files: a role that alters them alters only its own later attempts, never a check.

The engine is asked as soon as an attempt alone there is collected, by a step that first killed every process
the attempt left (counted and journaled): nothing of the role runs after it, so the answer, ready before the
role's next attempt, holds for it; anything changed outside hoh's paths before that step ran (a wrapped
`bash` that faked the kill) stays in the engine's list. A process left running is also killed, and counted,
before the next attempt starts (`supervise.run`).
Only Docker and Podman containers can be asked this way; other providers are said to be unverified, once.
"""

from __future__ import annotations

import asyncio
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


async def _ask(engine: tuple[str, ...], *args: str) -> str:
    process = await asyncio.create_subprocess_exec(*engine, *args, stdin=asyncio.subprocess.DEVNULL,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                   env=inherited("PATH", "HOME", "XDG_RUNTIME_DIR", "TMPDIR",
                                                                 prefixes=("DOCKER_", "CONTAINER")))
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


async def container_of(env: "BaseEnvironment", project: str) -> str:
    """The id of the environment's `main` container (asked once, when it has started); OSError when the engine
    lists none or several."""
    found = (await _ask(_engine(env), "ps", "-q", "--filter", f"label=com.docker.compose.project={project}",
                        "--filter", "label=com.docker.compose.service=main")).split()
    if len(found) != 1:
        raise OSError(f"the engine lists {len(found)} containers for {project}")
    return found[0]


async def changes(env: "BaseEnvironment", container: str) -> set[str]:
    """Every change the engine lists in the container since its image; OSError when the engine cannot say."""
    return {line for line in (await _ask(_engine(env), "diff", container)).splitlines() if line.strip()}


async def unexpected_changes(env: "BaseEnvironment", container: str, allowed: Iterable[str],
                             baseline: set[str]) -> list[str]:
    """The changes that are neither hoh's (`allowed`) nor the environment's own at its start (`baseline`: the
    provider's mount points, say)."""
    allowed = tuple(allowed)
    return sorted(line for line in await changes(env, container) - baseline if not expected(line, allowed))


def summary(changes: list[str]) -> list[str]:
    return changes[:SHOWN] + ([f"… and {len(changes) - SHOWN} more"] if len(changes) > SHOWN else [])
