"""The OS jail around every role attempt: bubblewrap (`bwrap`, the Debian package `bubblewrap`).

A jailed role cannot undo its jail, as root too:
- **no capabilities** (`--cap-drop ALL`, and bwrap sets no-new-privileges), so it cannot remount,
  unmount or mount anything, load modules or change the machine;
- **a root filesystem built from an allowlist**, never the whole machine: the system's programs
  (`/usr`, the PATH directories, hoh's Python, the CLI and the node_modules it runs from), read-only;
  of `/etc` only what `jail_etc.py` lists (name resolution, users and groups without password hashes, CA
  bundles, …; never a shadow file, a package manager's credentials or what only root may read); exactly
  what the role may write, read-write; its frozen inputs of `state/`, read-only; nothing else — no host
  sockets (Docker's included), no other programs' mounts, no other role's home, no journal. The jail's
  own root, `/dev` and the kernel knobs (`/sys`, `/proc/sys`, …) are read-only; its private `/tmp` and
  `/dev/shm` are tmpfs of a bounded size;
- **its own PID, IPC, UTS and network namespaces**: it cannot see or signal hoh, everything it
  starts dies with the attempt (`--die-with-parent`), and its only way out of the network
  namespace is hoh's egress (`hoh/envs/egress/proxy.py`): a unix socket bound in at `INSIDE_SOCKET` and a
  forwarder on the jail's own loopback, started by `hoh/envs/egress/shim.py` before the CLI.

hoh's guard still checks every protected area after the attempt: the jail blocks, the guard
proves. With `sandbox.mode: off` the guard is all that is left.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import time
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from ...errors import UsageError
from ...harness.process import call
from ...harness.sandbox import JailSpec, Network
from . import jail_etc

SYSTEM_DIRS = (Path("/usr"), Path("/opt"), Path("/bin"), Path("/sbin"), Path("/lib"), Path("/lib32"), Path("/lib64"),
               Path("/libx32"))
"""The machine's programs, shown whole (on a merged-/usr system the /bin-like ones are links); of their
configuration in /etc, only `jail_etc.view`'s allowlist."""
KERNEL_KNOBS = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
"""Writable by a global uid 0 in a fresh /proc even without capabilities: bound read-only over it."""
FIRMWARE = ("/sys/firmware", "/sys/devices/virtual/dmi")
"""The machine's firmware tables and its serial numbers: root-only files, which a jailed uid 0 would read as
their owner. An empty directory over each."""
SHM_BYTES = 64 * 2**20
JAIL_SETUP_RETRIES = 2
"""A bwrap that fails before the program starts (a mount that vanished mid-setup) is run again this often."""


BWRAP_ENV: Mapping[str, str] = MappingProxyType({})
"""bwrap's own environment: nothing. What runs inside gets its environment from bwrap's options (`--clearenv`,
then `--setenv` each, read from `JailEnvironment`'s descriptor), so no variable of a role's or a check's (a
`LD_PRELOAD`) reaches bwrap, which runs outside the jail as hoh's user with no namespace around it yet."""


class JailEnvironment:
    """The whole environment of what runs in a jail, as bwrap options on a file descriptor (`--args FD`): no value
    is on bwrap's command line (any user of the machine reads a command line, and `command.json` keeps it), and
    none is in bwrap's own environment. A context manager; `rewind` before each start of bwrap."""

    def __init__(self, env: Mapping[str, str]):
        for name, value in env.items():
            if not name or "=" in name or "\0" in name or "\0" in value:
                raise ValueError(f"not an environment variable: {name!r}")
        options = ["--clearenv", *(a for name, value in env.items() for a in ("--setenv", name, value))]
        self.fd = os.memfd_create("hoh-jail-env", os.MFD_CLOEXEC)
        data = b"".join(os.fsencode(option) + b"\0" for option in options)
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]
        self.rewind()

    def rewind(self) -> None:
        """bwrap reads the descriptor to its end; the next bwrap (a setup retried) reads it from the start."""
        os.lseek(self.fd, 0, os.SEEK_SET)

    def __enter__(self) -> "JailEnvironment":
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def bwrap_argv(spec: JailSpec, argv: list[str], cwd: Path, program: str | None = None,
               env_fd: int | None = None) -> list[str]:
    """The bwrap command line that runs `argv` in `cwd` under `spec`; `program` (default argv[0]) is the CLI
    whose install must be visible (argv may start with the egress forwarder). What runs inside gets the
    environment `JailEnvironment` put on `env_fd` and nothing else (without one: PATH alone); run bwrap itself
    with `BWRAP_ENV`. Pure but for reading which of the system's directories exist and where PATH's entries
    lead, and for /etc's copy (`jail_etc.view`), made again only when what it came from changed."""
    args = [bwrap_path(), "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--unshare-pid",
            "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if env_fd is None:
        args += ["--clearenv", "--setenv", "PATH", os.environ.get("PATH", os.defpath)]
    else:
        args += ["--args", str(env_fd)]
    if spec.network is not Network.shared:
        args.append("--unshare-net")
    for path in SYSTEM_DIRS:
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
    args += ["--dev", "/dev", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
             "--proc", "/proc", *[a for knob in KERNEL_KNOBS if os.path.exists(knob) for a in ("--ro-bind", knob, knob)],
             "--ro-bind", "/sys", "/sys", *[a for d in FIRMWARE if os.path.isdir(d) for a in ("--tmpfs", d)],
             "--size", str(spec.tmp_bytes), "--tmpfs", "/tmp"]
    # /etc: one read-only bind of its allowlist's copy, before the spec's binds (one inside /etc goes on top).
    args += jail_etc.view(SYSTEM_DIRS, _under_etc(spec, cwd)).argv()
    args += _mounts(spec, program or argv[0], cwd)
    if spec.egress_socket is not None:
        from ..egress.proxy import INSIDE_SOCKET
        args += ["--ro-bind", str(spec.egress_socket), str(INSIDE_SOCKET)]
    # The jail's own root last: nothing can be created at its top level once every mount point exists.
    return [*args, "--remount-ro", "/", "--chdir", str(cwd), "--", *argv]


MOVED = "moved"
"""A read-only bind of another directory at the path (`JailSpec.shown_as`)."""


def shows(path: Path) -> bool:
    """Whether every jail shows this machine's file at its own path: under the system's trees, or in /etc's
    allowlist (a CA file that pip.conf names, `registries.client_settings`)."""
    if not path.is_absolute() or not path.exists():
        return False
    if path.is_relative_to(jail_etc.ETC):
        return os.path.exists(os.path.join(jail_etc.view(SYSTEM_DIRS).staged, path.relative_to(jail_etc.ETC)))
    return any(path.is_relative_to(d) for d in SYSTEM_DIRS if d != jail_etc.ETC)


def _under_etc(spec: JailSpec, cwd: Path) -> tuple[tuple[str, bool], ...]:
    """The spec's paths inside /etc (a user's `sandbox.read_only_paths`), each with whether it is a directory:
    their mount points, which /etc's copy must hold."""
    hidden = {os.path.abspath(p) for p in spec.hidden}
    paths = {os.path.abspath(p) for p in (*spec.writable, *spec.read_only, *(where for _, where in spec.shown_as), cwd)}
    return tuple((p, p in hidden or os.path.isdir(p)) for p in sorted(paths | hidden)
                 if p.startswith(jail_etc.INSIDE + "/"))


def _mounts(spec: JailSpec, program: str, cwd: Path) -> list[str]:
    """Every bind of the allowlist, outer paths first so a deeper one wins (QA's writable evidence dir
    inside a read-only area, a hidden workspace inside the project); a read-only path already shown by
    a read-only parent is left out. In strings, each parent resolved once and each mount's shown ancestor
    found by walking its parents: the Planner hides every earlier loop's roles/, and the cost must follow the
    loops, not their square."""
    resolve = _Resolver()
    system = [p for p in SYSTEM_DIRS if p.is_dir() and not p.is_symlink()]
    tools = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), *_path_dirs(), *_program_dirs(program)]
    writable = {found for p in spec.writable if (found := resolve(p)) is not None}
    read_only = {found for p in (*system, *tools, *spec.read_only, cwd) if (found := resolve(p)) is not None} - writable
    mounts = [(p, "--ro-bind", p) for p in read_only] + [(p, "--bind", p) for p in writable]
    mounts += [(found, "--tmpfs", "") for p in spec.hidden if (found := resolve(p)) is not None]
    mounts += [(where, MOVED, what) for source, dest in spec.shown_as
               if (what := resolve(source)) is not None and (where := resolve(dest)) is not None]
    # A path stays under /tmp when it is deeper than the private /tmp mounted before it.
    mounts.sort(key=lambda m: (_depth(m[0]), m[1] != "--tmpfs", m[0]))
    args: list[str] = []
    shown: dict[str, str] = {}  # path → how it was last shown; the deepest shown ancestor (or itself) decides
    for path, how, source in mounts:
        if how == "--ro-bind" and next((shown[a] for a in _self_and_parents(path) if a in shown), None) == how:
            continue
        shown[path] = how  # under a MOVED bind a path is another file: it is bound again
        args += [how, path] if how == "--tmpfs" else ["--ro-bind" if how == MOVED else how, source, path]
    return args


class _Resolver:
    """`Path.resolve` of absolute paths that exist (None for one that does not), each parent resolved once: one
    lstat per path component not seen before."""

    def __init__(self) -> None:
        self._known: dict[str, str | None] = {"/": "/"}

    def __call__(self, path: Path | str) -> str | None:
        path = os.fspath(path)
        if path in self._known:
            return self._known[path]
        head, name = os.path.split(path.rstrip("/"))
        if not os.path.isabs(path) or not name or ".." in path.split("/"):
            found = os.path.realpath(path) if os.path.exists(path) else None
        elif (parent := self(head)) is None:
            found = None
        else:
            joined = os.path.join(parent, name)
            try:
                st = os.lstat(joined)
            except OSError:
                found = None
            else:
                found = joined if not stat.S_ISLNK(st.st_mode) else (
                    os.path.realpath(joined) if os.path.exists(joined) else None)
        self._known[path] = found
        return found


def _depth(path: str) -> int:
    """len(Path(path).parts) of a resolved absolute path."""
    return 1 if path == "/" else path.count("/") + 1


def _self_and_parents(path: str):
    while True:
        yield path
        if path == "/":
            return
        path = os.path.dirname(path)


def _path_dirs() -> list[Path]:
    """The PATH directories: the tools a CLI runs for its role (git, python, node, compilers). A version
    manager's `shims` dir (pyenv, rbenv, asdf) runs the manager from the dir above it, so that one is shown."""
    dirs = [Path(d) for d in os.environ.get("PATH", "").split(os.pathsep) if d and os.path.isabs(d) and os.path.isdir(d)]
    return [d.parent if d.name == "shims" else d for d in dirs]


def _program_dirs(program: str) -> list[Path]:
    """Where the program lives, as found on PATH and with its links resolved, and the node_modules it
    runs from: a CLI installed in a checkout (.hoh-tools) must be visible in the jail."""
    found = program if "/" in program else shutil.which(program)
    if not found:
        return []
    dirs = [Path(found).absolute().parent, Path(found).resolve().parent]
    for d in list(dirs):
        dirs += [a for a in (d, *d.parents) if a.name == "node_modules"][:1]
    return dirs


def bwrap_path() -> str:
    return shutil.which("bwrap") or "bwrap"


def setup_failed(exit_code: int | None, stdout_bytes: int, stderr: str) -> str | None:
    """bwrap's own message when it failed before the program started (not the program's failure)."""
    first = stderr.lstrip().splitlines()[0] if stderr.strip() else ""
    if exit_code == 1 and stdout_bytes == 0 and first.startswith("bwrap: "):
        return first
    return None


@cache
def probe() -> str | None:
    """None when bwrap can build hoh's jail here; else what stops it, in one line. A failure that goes
    away when tried again (another program's mount vanishing mid-setup) is not a verdict."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed"
    argv = bwrap_argv(JailSpec(network=Network.none), ["true"], Path("/"))
    for attempt in range(JAIL_SETUP_RETRIES + 1):
        try:
            result = call(argv, env=BWRAP_ENV, timeout=30)
        except OSError as err:
            return f"bwrap does not run ({err})"
        if result.ok:
            return None
        time.sleep(0.2 * (attempt + 1))
    detail = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else f"exit code {result.exit_code}"
    return f"bwrap cannot build the jail here ({detail}); inside a container, namespaces are usually not allowed"


def identity() -> dict[str, str] | None:
    """What a process inside hoh's jail is (uid, capabilities, no-new-privileges, seccomp), read from its own
    /proc/self/status; None when no jail can be built here."""
    if probe() is not None:
        return None
    result = call(bwrap_argv(JailSpec(network=Network.none), ["cat", "/proc/self/status"], Path("/")), env=BWRAP_ENV,
                  timeout=30)
    fields = dict(line.split(":", 1) for line in result.stdout.decode(errors="replace").splitlines() if ":" in line)
    return {key: " ".join(fields.get(key, "?").split()) for key in ("Uid", "CapEff", "CapBnd", "NoNewPrivs", "Seccomp")}


def require_jail() -> None:
    """Raise the one-line error that says how to get the jail, or how to opt out of it."""
    problem = probe()
    if problem is not None:
        raise UsageError(f"sandbox: {problem}; install it with `apt-get install bubblewrap` (or your system's "
                         "package), or run without the OS jail: --set sandbox.mode=off")
