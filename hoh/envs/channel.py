"""One step at a time in a Docker or Podman container, by the engine's own client, with bytes in and out.

Harbor's `exec` takes no stdin and returns text, so through it an attempt costs four Compose calls: a copy in,
an `exec` that places the view and starts the CLI, one that collects, a copy out (~0.2 s each). Here what goes
in is a tar of hoh's on the `exec`'s stdin and what comes out a tar on its stdout, after a mark: an attempt
whose CLI ends within the first look is one step (`inside.py attempt` places, starts, waits and collects), else
two, and one more per look while its CLI runs past the first. A step is a request to hoh's server in the
container (`session.py`) while it serves, else an `exec` of its own (~0.1 s an engine call). Only for Harbor's own
Docker and Podman environments, whose container hoh asked the engine for (`verify.py`), with python3 in the
image (`inside.py` packs and unpacks); every other provider goes through Harbor's API.

What comes back is hostile: a role is root in its container and may write into an `exec`'s stdout itself
(through /proc, into any process of its container it may trace). What `inside.py attempt` collects is believed
only when it said, before the role ran, that no role can reach into it (undumpable, no capability beyond
Docker's default); else a collecting `exec` of its own runs once every process of the role is killed. The tar is
taken apart member by member by Python's `data` filter (no absolute or escaping names or links, no devices,
no setuid, no owners), a member the filter refuses left out, as `sanitize` and `sync.apply` then filter it
again; the text before the mark is read as the role's own output.
"""

from __future__ import annotations

import asyncio
import io
import os
import secrets
import shlex
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from . import verify
from .session import Session
from .sync import SOURCE

if TYPE_CHECKING:
    from harbor.environments.base import BaseEnvironment

MAX_TEXT = 4 << 20
"""What precedes the mark is hoh's commands' few lines (and what a role may add): more is not read."""


@dataclass(frozen=True)
class Reply:
    code: int
    text: str
    """stdout before the mark (all of it when there was none)."""
    stderr: str
    tar: int | None
    """Where the tar starts in the stdout file; None without a mark."""


def usable(env: "BaseEnvironment", container: str | None, python: bool,
           session: Session | None = None) -> "Channel | None":
    """A channel into `env`, when it is one of Harbor's own Docker or Podman environments (a subclass may
    change what its calls do: it goes through them) with a known container and python3; through hoh's server
    there (`session`) while it can serve."""
    engine = verify.engine_of(env)
    if engine is None or container is None or not python or not hasattr(tarfile, "data_filter"):
        return None
    if not type(env).__module__.startswith("harbor.environments."):
        return None
    return Channel(engine, container, session)


@dataclass(frozen=True)
class Channel:
    engine: tuple[str, ...]
    container: str
    session: Session | None = None

    @staticmethod
    def mark() -> str:
        """A line no earlier output of the `exec` can foresee (fresh for each)."""
        return f"--hoh-tar-{secrets.token_hex(12)}--"

    async def run(self, command: "str | Step", stdin: Path | None, stdout: Path, mark: str, timeout: float) -> Reply:
        """`bash -c command` there (as Harbor's `exec` runs it), or hoh's script (a `Step`), stdin from a file,
        stdout into a file: by hoh's server there when it can serve, else by an `exec` of its own."""
        if self.session is not None and self.session.usable:
            request = ({"inside": list(command.args), "before": command.before} if isinstance(command, Step)
                       else {"command": command})
            code, err = await self.session.run(request, stdin, stdout, timeout)
            text, at = split(stdout, mark)
            return Reply(code, text, err[-2000:], at)
        if isinstance(command, Step):
            command = command.shell
        argv = [*self.engine, "exec", *(["-i"] if stdin else []), self.container, "bash", "-c", command]
        env = verify.engine_env()
        with open(stdin or os.devnull, "rb") as source, open(stdout, "wb") as sink:
            process = await asyncio.create_subprocess_exec(*argv, stdin=source, stdout=sink,
                                                           stderr=asyncio.subprocess.PIPE, env=env)
            try:
                _, err = await asyncio.wait_for(process.communicate(), timeout)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                process.kill()
                await process.wait()
                raise
        text, at = split(stdout, mark)
        return Reply(process.returncode or 0, text, err.decode(errors="replace")[-2000:], at)


@dataclass(frozen=True)
class Step:
    """hoh's script there (`inside.py ARGS`), after a shell step of hoh's (`before`: a sweep, printing first)."""

    args: tuple[str, ...]
    before: str = ""

    @property
    def shell(self) -> str:
        """As one shell step, for an `exec`."""
        return "; ".join([*([self.before] if self.before else []), f"exec {inside(*self.args)}"])


def inside(*args: str) -> str:
    """The shell step that runs hoh's script there (`inside.py`), its source sent with it."""
    return shlex.join(["python3", "-I", "-c", SOURCE, *args])


def printed(mark: str, directory: str) -> str:
    """The shell step that prints the mark and then `directory` as a tar (`inside.py pack`)."""
    return f"printf '\\n%s\\n' {shlex.quote(mark)}; {inside('pack', directory)}"


def split(stdout: Path, mark: str) -> tuple[str, int | None]:
    """The text before the first mark line, and where the tar after it starts."""
    needle = f"\n{mark}\n".encode()
    with open(stdout, "rb") as fh:
        head = fh.read(MAX_TEXT + len(needle))
    at = head.find(needle)
    if at < 0:
        return head[:MAX_TEXT].decode(errors="replace"), None
    return head[:at].decode(errors="replace"), at + len(needle)


END = b"\0" * (2 * tarfile.BLOCKSIZE)
"""How a tar `pack` writes ends: its two zero blocks, nothing after them (`add` writes over them)."""


def pack(staging: Path, into: Path) -> None:
    """hoh's staged files (regular files, directories and links) as one tar, every entry root's (as `docker cp`
    makes them in a container)."""
    with open(into, "wb") as fh:
        tar = tarfile.TarFile(fileobj=fh, mode="w", format=tarfile.PAX_FORMAT)
        # A stack of (directory, its sorted names still to write): one name per entry in memory, never a Path
        # per entry of a directory a role may have filled with 300,000 files.
        stack = [("", iter(sorted(os.listdir(staging))))]
        while stack:
            prefix, names = stack[-1]
            name = next(names, None)
            if name is None:
                stack.pop()
                continue
            relative = prefix + name
            path = os.path.join(staging, relative)
            st = os.lstat(path)
            info = tarfile.TarInfo(relative)
            info.mode, info.mtime = stat.S_IMODE(st.st_mode), int(st.st_mtime)
            info.uname = info.gname = "root"
            if stat.S_ISREG(st.st_mode):
                info.size = st.st_size
                with open(path, "rb") as member:
                    tar.addfile(info, member)
            elif stat.S_ISDIR(st.st_mode):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
                stack.append((relative + "/", iter(sorted(os.listdir(path)))))
            elif stat.S_ISLNK(st.st_mode):
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
                tar.addfile(info)
            tar.members.clear()  # tarfile keeps every member: hoh's memory stays flat however large the view
        fh.write(END)  # not tar.close(): it pads the end to a whole record, and `add` must find where it starts


def add(tar: Path, name: str, data: bytes) -> None:
    """One more file of hoh's at the end of a tar `pack` made, written over its end blocks (tarfile's own append
    reads every member's header first, and keeps them all: 300,000 of them for a view that large)."""
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o600
    info.uname = info.gname = "root"
    with open(tar, "r+b") as fh:
        fh.seek(-len(END), os.SEEK_END)
        if fh.read() != END:
            raise OSError(f"{tar} is not a tar hoh's pack wrote")
        fh.seek(-len(END), os.SEEK_END)
        with tarfile.open(fileobj=fh, mode="w", format=tarfile.PAX_FORMAT) as archive:
            archive.addfile(info, io.BytesIO(data))


def unpack(stdout: Path, at: int, into: Path, whole: bool = True) -> None:
    """The tar after the mark into `into`, member by member through the `data` filter (which also drops
    directories' modes); one it refuses is left out. Nothing of a member is kept once it is out (tarfile keeps
    every member of a stream it reads): hoh's memory stays flat however many a role leaves. `whole=False`: a
    tar cut short keeps the members that came whole (the last one may be cut: its writer names it last)."""
    into.mkdir(parents=True, exist_ok=True)
    with open(stdout, "rb") as fh:
        fh.seek(at)
        try:
            with tarfile.open(fileobj=fh, mode="r|") as tar:
                for member in tar:
                    tar.members.clear()
                    try:
                        checked = tarfile.data_filter(member, str(into))
                    except tarfile.FilterError:
                        continue
                    tar.extract(checked, into, filter="fully_trusted")
        except (tarfile.ReadError, EOFError) as err:
            if not whole:
                return
            raise OSError(f"what came out of the environment is not a whole tar ({err})") from None
