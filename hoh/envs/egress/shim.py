"""The inside end of hoh's egress: a forwarder on the jail's own loopback, then the harness CLI.

    python -m hoh.envs.egress.shim --listen 127.0.0.1:PORT --socket /run/hoh/egress.sock -- ARGV...
    python /path/to/shim.py ...   (the same, as a plain script)

A jailed role has its own network namespace: loopback only. The shim listens on 127.0.0.1:PORT
*before* anything else, so the CLI can connect from its first moment; a detached grandchild relays
every TCP connection accepted there to a new connection on the unix socket that hoh's proxy
(`egress.EgressProxy`) serves and the jail binds in (what socat does for Claude Code's sandbox). The
shim itself then `execvp`s ARGV: the CLI keeps the shim's pid, its stdin/stdout/stderr and gives the
exit code. The forwarder closes its copies of those (hoh's runner waits for EOF on the pipes) and ends
within a second of the CLI; the jail's PID namespace takes it down in any case.

Standard library only, and no import of hoh: it runs in the jail before the CLI, on every attempt.
"""

from __future__ import annotations

import argparse
import os
import socket
import stat
import sys
import threading
import time
from typing import Callable, NoReturn

BUFSIZE = 64 * 1024
WATCH_SECONDS = 1.0
"""How often the forwarder checks that the CLI is still there."""


def relay(a: socket.socket, b: socket.socket, read_a: Callable[[int], bytes] | None = None) -> tuple[int, int]:
    """Copies bytes both ways between `a` and `b` until both directions have ended; returns the byte
    counts (a → b, b → a). `read_a` reads from `a` in its place (a buffered reader that may already hold
    bytes the peer sent early). An end of stream is passed on as a half-close, so the other direction
    may still finish; a reset or a timeout ends both at once."""
    counts = [0, 0]

    def pump(index: int, read: Callable[[int], bytes], dst: socket.socket) -> None:
        try:
            while data := read(BUFSIZE):
                dst.sendall(data)
                counts[index] += len(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            for sock in (a, b):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    other = threading.Thread(target=pump, args=(0, read_a or a.recv, b), daemon=True)
    other.start()
    pump(1, b.recv, a)
    other.join()
    return counts[0], counts[1]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        _fail(message)


def _fail(message: str) -> NoReturn:
    sys.stderr.write(f"egress_shim: {message}\n")
    sys.exit(2)


def parse_args(argv: list[str]) -> tuple[tuple[str, int], str, list[str]]:
    """(listen address, unix socket path, the CLI's argv) from the shim's arguments; exits 2 when bad."""
    if "--" not in argv:
        _fail("expected -- and the command to run after the options")
    split = argv.index("--")
    parser = _Parser(prog="egress_shim", add_help=False)
    parser.add_argument("--listen", required=True, help="HOST:PORT on the jail's loopback")
    parser.add_argument("--socket", required=True, help="the unix socket of hoh's egress proxy")
    options = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    if not command:
        _fail("no command after --")
    host, _, port = options.listen.rpartition(":")
    if not host or not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        _fail(f"--listen wants HOST:PORT, not {options.listen!r}")
    try:
        is_socket = stat.S_ISSOCK(os.stat(options.socket).st_mode)
    except OSError:
        is_socket = False
    if not is_socket:
        _fail(f"no egress socket at {options.socket}")
    return (host.strip("[]"), int(port)), options.socket, command


def _forward(client: socket.socket, unix_path: str) -> None:
    with client:
        try:
            # Model responses are streams of small events: send each at once.
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(unix_path)
        except OSError:
            return
        with upstream:
            relay(client, upstream)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def serve(listener: socket.socket, unix_path: str, watch_pid: int) -> None:
    """Relays every connection accepted on `listener` to `unix_path`, until `watch_pid` is gone."""
    listener.settimeout(WATCH_SECONDS)
    while _alive(watch_pid):
        try:
            client, _ = listener.accept()
        except TimeoutError:
            continue
        except OSError:  # out of descriptors, for one: wait instead of spinning
            time.sleep(0.1)
            continue
        threading.Thread(target=_forward, args=(client, unix_path), daemon=True).start()


def _detach_from_stdio(keep: int) -> None:
    """Let go of every descriptor the CLI owns: the runner's pipes reach EOF when the CLI ends."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.closerange(3, keep)
    os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))


def main(argv: list[str] | None = None) -> NoReturn:
    address, unix_path, command = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        listener = socket.create_server(address, family=socket.AF_INET6 if ":" in address[0] else socket.AF_INET,
                                        backlog=128)
    except OSError as exc:
        _fail(f"cannot listen on {address[0]}:{address[1]}: {exc.strerror or exc}")
    cli_pid = os.getpid()
    child = os.fork()
    if child == 0:
        try:
            # A grandchild, reparented to the namespace's init: the CLI never finds a child it did not start.
            if os.fork() == 0:
                _detach_from_stdio(keep=listener.fileno())
                serve(listener, unix_path, cli_pid)
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    listener.close()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"egress_shim: cannot run {command[0]}: {exc.strerror or exc}\n")
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


if __name__ == "__main__":
    main()
