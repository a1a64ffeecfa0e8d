"""hoh's side of its server in a container (`serve.py`): one Docker or Podman `exec`, kept open for the
environment's life, through which a channel's steps run (`channel.Channel.run`) without an engine call each.

The server is believed as an `exec` of hoh's is: it made itself undumpable before any role ran, and said so. It
is used by one step at a time, and never again once it ended (a role may kill it: the step it served fails, as
an `exec` that died would, and the next steps go by an `exec` each). It is spared by every sweep by its pid and
its start time together (`spared`), so a role's process that comes to hold its pid after it ended is not.
"""

from __future__ import annotations

import asyncio
import json
import struct
from pathlib import Path

from . import serve
from .verify import engine_env
from .sync import SOURCE

TAIL = 'if __name__ == "__main__":'
assert TAIL in SOURCE, "inside.py ends with its entry point, which the server's source replaces"
SERVER_SOURCE = SOURCE.partition(TAIL)[0] + Path(serve.__file__).read_text(encoding="utf-8") + "\nsys.exit(serve())\n"
OPEN_TIMEOUT = 60.0
MAX_FRAME = 1 << 20
"""The server relays at most 64 KB a frame: a longer one is not its."""
MAX_STDERR = 4000


class Session:
    def __init__(self, process: asyncio.subprocess.Process, pid: int, started: int) -> None:
        self._process, self._busy = process, False
        self.spared = f"{pid}/{started}"
        """How a sweep knows the server: its pid and its start time (`supervise.LIVE`)."""
        self.lost = False
        """It ended while it served a step, not by hoh's hand: a role killed it (or the kernel did, for the
        container's memory). The environment journals it as tampering."""

    @classmethod
    async def open(cls, engine: tuple[str, ...], container: str) -> "Session | None":
        """The server started in `container`; None where it cannot run or cannot make itself one no role reaches."""
        argv = [*engine, "exec", "-i", container, "python3", "-I", "-c", SERVER_SOURCE]
        try:
            process = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                           stdout=asyncio.subprocess.PIPE,
                                                           stderr=asyncio.subprocess.DEVNULL, env=engine_env())
        except OSError:  # the engine's client could not be started now (no process slot, no memory): plain execs
            return None
        assert process.stdout is not None
        try:
            hello = (await asyncio.wait_for(process.stdout.readline(), OPEN_TIMEOUT)).decode(errors="replace").split()
        except (asyncio.TimeoutError, OSError, ValueError):
            hello = []
        if len(hello) == 4 and hello[0] == "hoh-serve" and hello[1].isdigit() and hello[2].isdigit() \
                and hello[3] == "1":
            return cls(process, int(hello[1]), int(hello[2]))
        await _ended(process)
        return None

    @property
    def usable(self) -> bool:
        """Alive, and serving no other step."""
        return self._process.returncode is None and not self._busy

    async def run(self, request: dict, stdin: Path | None, stdout: Path, timeout: float) -> tuple[int, str]:
        """One step there (`{"command": ...}`: `bash -c command`; `{"inside": args, "before": ...}`: hoh's script
        after a shell step), stdin from a file, stdout into a file: (its exit code, its stderr's end). OSError
        when the server ended; its own TimeoutError past `timeout` (the server is then stopped)."""
        assert self.usable, "checked by the caller"
        self._busy = True
        try:
            with open(stdout, "wb") as sink:
                return await asyncio.wait_for(self._exchange(request, stdin, sink), timeout)
        except (asyncio.IncompleteReadError, ConnectionError) as err:
            self.lost = True
            await _ended(self._process)
            raise OSError(f"hoh's server in the container ended ({type(err).__name__})") from None
        except BaseException:
            await _ended(self._process)
            raise
        finally:
            self._busy = False

    async def _exchange(self, request: dict, stdin: Path | None, sink) -> tuple[int, str]:
        writer, reader = self._process.stdin, self._process.stdout
        assert writer is not None and reader is not None
        size = stdin.stat().st_size if stdin is not None else 0
        writer.write(json.dumps({**request, "size": size}).encode() + b"\n")
        sender = asyncio.ensure_future(self._send(writer, stdin, size))
        try:
            err = bytearray()
            while True:
                head = await reader.readexactly(5)
                kind, (length,) = head[:1], struct.unpack(">I", head[1:])
                if kind == b"x":
                    await sender
                    (code,) = struct.unpack(">i", head[1:])
                    return code, err.decode(errors="replace")
                if kind not in (b"o", b"e") or length > MAX_FRAME:
                    raise ConnectionError("not the server's frame")
                data = await reader.readexactly(length)
                if kind == b"o":
                    sink.write(data)
                else:
                    err += data
                    del err[:-MAX_STDERR]
        finally:
            if not sender.done():
                sender.cancel()
            elif not sender.cancelled():
                sender.exception()  # a server that ended broke its pipe too: said once, by the read

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, stdin: Path | None, size: int) -> None:
        if stdin is not None:
            with open(stdin, "rb") as source:  # exactly `size` bytes: the server reads that many
                while size > 0 and (chunk := source.read(min(size, 1 << 20))):
                    writer.write(chunk)
                    size -= len(chunk)
                    await writer.drain()
        await writer.drain()

    async def close(self) -> None:
        await _ended(self._process)


async def _ended(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        try:
            process.kill()
        except ProcessLookupError:
            pass
    await process.wait()
