"""The OS jail around every role attempt: bubblewrap (`bwrap`, the Debian package `bubblewrap`).

A jailed role sees the machine read-only, except exactly what it may write — the Developer the
project, QA its evidence dir, every role its own harness home — plus a private /tmp. It runs in
new PID, IPC and UTS namespaces with no capabilities: it cannot see or signal hoh (so it cannot
read hoh's environment through /proc either), and everything it starts, `setsid` and double
forks included, dies when the attempt ends (`--die-with-parent`; the namespace's init goes).
Its environment is only what the adapter gives it; the network is shared (the model endpoint)
unless `sandbox.network: none`. Other roles' homes are hidden behind empty directories.

hoh's guard still checks every protected area after the attempt: the jail blocks, the guard
proves. With `sandbox.mode: off` the guard is all that is left.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from ..errors import UsageError
from .process import call

PRIVATE_TMP = Path("/tmp")


@dataclass(frozen=True)
class JailSpec:
    """What one role attempt may touch; everything else is read-only or hidden."""

    writable: tuple[Path, ...] = ()
    """Bound read-write (the project for the Developer, the evidence dir for QA, the role's home)."""
    read_only: tuple[Path, ...] = ()
    """Read-only again inside a writable one (a workspace inside the project)."""
    hidden: tuple[Path, ...] = ()
    """Replaced by an empty directory (other roles' harness homes)."""
    visible: tuple[Path, ...] = field(default_factory=tuple)
    """Paths under /tmp the role must still see read-only (the private /tmp covers the host's)."""
    network: bool = True


def bwrap_argv(spec: JailSpec, argv: list[str], cwd: Path) -> list[str]:
    """The bwrap command line that runs `argv` in `cwd` under `spec`. Pure."""
    args = [bwrap_path(), "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", str(PRIVATE_TMP)]
    if not spec.network:
        args.append("--unshare-net")
    needed = {*spec.visible, *spec.writable, *spec.read_only, cwd, Path(sys.prefix), Path(sys.base_prefix),
              *_program_dirs(argv[0])}
    shown: list[Path] = []
    for path in sorted(p for p in needed if p.is_relative_to(PRIVATE_TMP) and p != PRIVATE_TMP):
        if path.exists() and not any(path.is_relative_to(s) for s in shown):
            shown.append(path)
            args += ["--ro-bind", str(path), str(path)]
    # Outer paths first: a read-only workspace inside a writable project, and QA's writable evidence dir
    # inside that workspace, each win over the mount around them.
    binds = [(path, "--bind") for path in spec.writable] + [(path, "--ro-bind") for path in spec.read_only]
    for path, how in sorted(binds, key=lambda b: len(b[0].parts)):
        if path.exists():
            args += [how, str(path), str(path)]
    for path in spec.hidden:
        if path.exists():
            args += ["--tmpfs", str(path)]
    return [*args, "--chdir", str(cwd), "--", *argv]


def _program_dirs(program: str) -> list[Path]:
    """Where the program lives, as found on PATH and with its links resolved, and the node_modules it
    runs from: a CLI installed under /tmp (a checkout's .hoh-tools) must stay visible in the jail."""
    found = program if "/" in program else shutil.which(program)
    if not found:
        return []
    dirs = [Path(found).absolute().parent, Path(found).resolve().parent]
    for d in list(dirs):
        dirs += [a for a in (d, *d.parents) if a.name == "node_modules"][:1]
    return dirs


def bwrap_path() -> str:
    return shutil.which("bwrap") or "bwrap"


@cache
def probe() -> str | None:
    """None when bwrap can build a jail here; else what stops it, in one line."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed"
    try:
        result = call([bwrap_path(), "--die-with-parent", "--unshare-pid", "--ro-bind", "/", "/", "--dev", "/dev",
                       "--proc", "/proc", "--tmpfs", "/tmp", "--", "true"], timeout=30)
    except OSError as err:
        return f"bwrap does not run ({err})"
    if result.ok:
        return None
    detail = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else f"exit code {result.exit_code}"
    return f"bwrap cannot create namespaces here ({detail}); inside a container, namespaces are usually not allowed"


def require_jail() -> None:
    """Raise the one-line error that says how to get the jail, or how to opt out of it."""
    problem = probe()
    if problem is not None:
        raise UsageError(f"sandbox: {problem}; install it with `apt-get install bubblewrap` (or your system's "
                         "package), or run without the OS jail: --set sandbox.mode=off")
