"""Whether the engine enforces the limits hoh gave an environment (`sandbox.limits.processes`, `memory_mb`).

Read once at the start of a Compose engine's environment (Docker, Podman: the engines hoh gives the limits to),
from inside, before any role ran there: the limits of the cgroup its processes are in
(cgroup v2's files, else v1's), which only the kernel writes. An engine may take a limit and not apply it: a
rootless Podman on cgroup v1 says "Resource limits are not supported and ignored" on its stderr, which Harbor
does not pass on, and starts the container with none. The run then says so, once, and goes on without it.
"""

from __future__ import annotations

PROBE = ('for f in /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max; do '
         '[ -r "$f" ] && echo "processes $(cat "$f")" && break; done; '
         'for f in /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes; do '
         '[ -r "$f" ] && echo "memory_mb $(cat "$f")" && break; done; true')
"""Each limit's file, as `processes N` / `memory_mb BYTES` lines (`max` where the cgroup has none; no line where
the container has no such cgroup of its own)."""
MARK = "hoh-limits:"
"""The line before the probe's, in the start's one exec with other output (`lifecycle.py`)."""
UNENFORCED = ("--env {name}: the engine does not apply {limits} in its environments here (their cgroup shows none, "
              "or a looser one: a rootless engine on cgroup v1, say); the roles run without {them}")


def warning(name: str, missing: list[str]) -> str:
    """The one line said for `missing` (from `unenforced`)."""
    return UNENFORCED.format(name=name, limits=" and ".join(missing), them="them" if len(missing) > 1 else "it")


def unenforced(seen: str, processes: int | None, memory_mb: int | None) -> list[str]:
    """The limits asked for (`sandbox.limits.NAME=VALUE`) that `seen`, the probe's output, shows are not applied:
    absent, unlimited, or looser than asked."""
    found: dict[str, int] = {}
    for line in seen.splitlines():
        key, _, value = line.strip().partition(" ")
        if value.isdigit():
            found[key] = int(value)
    asked = {"processes": (processes, processes), "memory_mb": (memory_mb, (memory_mb or 0) * 2**20)}
    return [f"sandbox.limits.{key}={value}" for key, (value, most) in asked.items()
            if value and not (key in found and found[key] <= most)]
