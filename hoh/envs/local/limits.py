"""What one role attempt may use of the machine: its processes and its memory (`sandbox.limits`; the
private /tmp's size is the jail's tmpfs).

Enforced by a cgroup of the attempt's own where the machine lets hoh make one (cgroup v2 with the pids
and memory controllers, or the v1 pids and memory hierarchies, writable by hoh), since a cgroup counts
the attempt alone, children and threads included. Elsewhere by rlimits set in the attempt's first
process: RLIMIT_NPROC (which counts every process of the role's user, and which the kernel does not
apply to root) and RLIMIT_AS (each process's address space). `mechanism()` says which, for `hoh doctor`.
"""

from __future__ import annotations

import itertools
import os
import resource
import signal
import time
from pathlib import Path
from typing import Callable

from ...harness.sandbox import Limits

CGROUP_V2 = Path("/sys/fs/cgroup")
CGROUP_V1 = {"processes": (Path("/sys/fs/cgroup/pids"), "pids.max"),
             "memory": (Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes")}
V2_FILES = {"processes": "pids.max", "memory": "memory.max"}
_counter = itertools.count(1)


def _v2_controllers() -> set[str]:
    try:
        return set((CGROUP_V2 / "cgroup.subtree_control").read_text().split())
    except OSError:
        return set()


def _cgroup_dirs(kind: str) -> tuple[Path, str] | None:
    """Where a cgroup limiting `kind` can be made here, and the file that sets the limit."""
    controller = {"processes": "pids", "memory": "memory"}[kind]
    if controller in _v2_controllers() and os.access(CGROUP_V2, os.W_OK):
        return CGROUP_V2, V2_FILES[kind]
    root, limit_file = CGROUP_V1[kind]
    if (root / "cgroup.procs").exists() and os.access(root, os.W_OK):
        return root, limit_file
    return None


def mechanism() -> dict[str, str]:
    """How each limit is enforced on this machine, in words."""
    found = {}
    for kind in ("processes", "memory"):
        where = _cgroup_dirs(kind)
        if where is not None:
            found[kind] = f"a cgroup per attempt (under {where[0]}, {where[1]})"
        elif kind == "processes":
            found[kind] = ("rlimit NPROC (counts all of the role user's processes; the kernel does not apply it "
                           "to root)" if os.geteuid() == 0 else "rlimit NPROC (counts all of this user's processes)")
        else:
            found[kind] = "rlimit AS (each process's address space)"
    return found


class AttemptLimits:
    """The limits of one attempt: its cgroups, made before it starts and removed after it ended."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.groups: list[Path] = []
        self.rlimits: list[tuple[int, int]] = []
        name = f"hoh-{os.getpid()}-{next(_counter)}"
        for kind, value in limits.wanted().items():
            where = _cgroup_dirs(kind)
            if where is not None:
                group = where[0] / name
                try:
                    group.mkdir(exist_ok=True)
                    (group / where[1]).write_text(str(value))
                    if group not in self.groups:
                        self.groups.append(group)
                    continue
                except OSError:
                    pass  # not delegated after all: fall back to the rlimit
            self.rlimits.append((resource.RLIMIT_NPROC if kind == "processes" else resource.RLIMIT_AS, value))

    def preexec(self) -> Callable[[], None] | None:
        """Run in the attempt's first process before it execs: join the cgroups, set the rlimits."""
        if not self.groups and not self.rlimits:
            return None
        # The child of a threaded process runs this between fork and exec: plain system calls on values made
        # here, nothing that could wait on a lock another thread held at the fork (text I/O, an import).
        procs = [os.fsencode(group / "cgroup.procs") for group in self.groups]
        rlimits = list(self.rlimits)

        def enter() -> None:
            for path in procs:
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, b"%d" % os.getpid())
                finally:
                    os.close(fd)
            for which, value in rlimits:
                soft, hard = resource.getrlimit(which)
                resource.setrlimit(which, (value if hard == resource.RLIM_INFINITY else min(value, hard),) * 2)
        return enter

    def close(self) -> None:
        """End whatever of the attempt is still running (a process it detached without a jail to take it down),
        then remove its cgroups."""
        for group in self.groups:
            kill_all(group)
            try:
                group.rmdir()
            except OSError:
                pass  # a process still leaving; `sweep` removes it later
        self.groups = []


def kill_all(group: Path, tries: int = 27) -> None:
    """SIGKILL every process of a cgroup until none is left (a fork between reading and killing is caught by
    the next round). The rounds start a quarter of a millisecond apart (a killed process leaves its cgroup within
    a few) and back off to 50 ms, about a second in all."""
    for n in range(tries):
        try:
            pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(min(0.05, 0.00025 * 2 ** n))


def sweep() -> None:
    """Remove the empty cgroups an earlier hoh left (a kill -9 between start and end of an attempt)."""
    roots = {CGROUP_V2} | {root for root, _ in CGROUP_V1.values()}
    for root in roots:
        try:
            candidates = list(root.glob("hoh-*-*"))
        except OSError:
            continue
        for group in candidates:
            pid = group.name.split("-")[1]
            if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
                try:
                    group.rmdir()
                except OSError:
                    pass
