"""Serving the view: a loopback socket, uvicorn on it, until Ctrl-C.

The socket is bound here, before uvicorn starts, so the URL (with the port the kernel picked when none
was asked for) is known and printed before the first request, and a port in use is one clear error
instead of a log line from a server that never started.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError

DEFAULT_HOST = "127.0.0.1"


def loopback_host(host: str) -> str:
    """`host` as an IPv4 loopback address (localhost → 127.0.0.1); any other host is refused, since
    the view shows everything in a workspace, secrets a role saw included, to whoever can reach it."""
    if host == "localhost":
        return DEFAULT_HOST
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is None or address.version != 4 or not address.is_loopback:
        raise UsageError(f"--host {host}: hoh view serves on the IPv4 loopback only (127.0.0.1); "
                         "reach it from elsewhere through an SSH tunnel")
    return host


@dataclass
class Bound:
    sock: socket.socket
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"


def bind(host: str, port: int | None) -> Bound:
    """A listening socket on `host`:`port` (a free port when None). Raises UsageError when it is taken."""
    host = loopback_host(host)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, port or 0))
        sock.listen(128)
    except OSError as err:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {err.strerror or err}"
                         + ("; choose another --port, or leave it out for a free one" if port else "")) from None
    return Bound(sock, host, sock.getsockname()[1])


def serve(roots: list[Path], bound: Bound) -> None:
    """Serve the view of `roots` on `bound` until interrupted; returns after a clean shutdown.
    A KeyboardInterrupt may come out of it (uvicorn re-raises the signal it handled): the caller's to end on."""
    import uvicorn

    from .app import create_app

    app = create_app(roots, hosts=[bound.host])
    # A browser tab left open holds a keep-alive connection: Ctrl-C does not wait on it for more than a moment.
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", server_header=False,
                            timeout_graceful_shutdown=3)
    try:
        uvicorn.Server(config).run(sockets=[bound.sock])
    finally:
        bound.sock.close()
