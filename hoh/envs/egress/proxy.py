"""hoh's egress: the only network way out of a jailed role, and where the API key is added.

A jailed role has its own network namespace (`bwrap --unshare-net`): loopback only. Its way out is
`EgressProxy`, in hoh's process outside the jail, on a unix socket the jail binds at `INSIDE_SOCKET`;
`shim.py` forwards the jail's 127.0.0.1:`INSIDE_PORT` to it. Without a jail the proxy listens on an
ephemeral 127.0.0.1 port instead, and the CLI still talks only to it.

One request per connection (HTTP/1.1, closed after the response), served only when it carries the
attempt's token (`EgressPolicy.token`, fresh for every attempt; the proxy lives as long as the attempt):
- origin-form (`POST /v1/responses`): the model route, to `EgressPolicy.upstream` with the same path and
  query. The CLI holds the token where it would hold its key; the proxy puts the real key in its place in
  the credential headers, so no secret enters the jail (for a key-less endpoint it drops those headers).
  Without the token: 401. The response is streamed back as it arrives, the key masked in it in every
  spelling, decoded first if it came compressed (`mask.py`).
- `CONNECT host:port` tunnels and absolute-form `GET http://host/path`: the token in Proxy-Authorization
  (the proxy URL's userinfo) else 407, and only to `allow_hosts`, else 403.
Each request or tunnel is one JSON line of the log (`EgressRecord`), the credential and the token never in it.
The policy and the log's records are in `policy.py` (this module re-exports them), one connection's
handling in `handler.py`.
Requests come from untrusted code: bounded header sizes and counts (http.server's), bounded live
connections, and no error of theirs reaches hoh beyond an error response and a log line.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import socketserver
import ssl
import threading
from pathlib import Path
from typing import Any

from ...harness.sandbox import PLACEHOLDER_KEY
from .handler import CONNECT_TIMEOUT, HEAD_TIMEOUT, STREAM_TIMEOUT, _Exchange, _Handler
from .policy import (CREDENTIAL_HEADERS, HOP_BY_HOP, INSIDE_PORT, INSIDE_SOCKET, Decision, EgressPolicy, EgressRecord,
                     Kind, inside_base_url, new_token, proxy_url, read_log, split_hostport)

__all__ = ["CONNECT_TIMEOUT", "CREDENTIAL_HEADERS", "HEAD_TIMEOUT", "HOP_BY_HOP", "INSIDE_PORT", "INSIDE_SOCKET",
           "MAX_CONNECTIONS", "PLACEHOLDER_KEY", "STREAM_TIMEOUT", "Decision", "EgressPolicy", "EgressProxy",
           "EgressRecord", "Kind", "inside_base_url", "new_token", "proxy_url", "read_log", "split_hostport"]

MAX_CONNECTIONS = 128


class _Serving:
    """What both listeners share: the policy, the log, a bound on live connections, and a handle on
    each (with the sockets it opened upstream) so closing the proxy cuts them."""

    daemon_threads = True
    policy: EgressPolicy
    log_path: Path | None
    tls: ssl.SSLContext | None
    own_ports: frozenset[int]

    def setup_egress(self, policy: EgressPolicy, log_path: Path | None, own_ports: frozenset[int]) -> None:
        self.policy, self.log_path, self.own_ports = policy, log_path, own_ports
        self.tls = ssl.create_default_context() if policy.upstream and policy.target()[0] == "https" else None
        self._live: dict[Any, list[socket.socket]] = {}
        self._changed = threading.Condition()
        self._writing = threading.Lock()
        self._stopping, self._stopped = False, threading.Event()
        self._wake_r, self._wake_w = os.pipe()

    def serve(self) -> None:
        """socketserver's `serve_forever`, but `stop` wakes it through a pipe at once: a poll interval would be
        waited out at the end of every attempt."""
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self, selectors.EVENT_READ)  # type: ignore[arg-type]
                selector.register(self._wake_r, selectors.EVENT_READ)
                while not self._stopping:
                    for key, _ in selector.select():
                        if key.fileobj is self and not self._stopping:
                            self._handle_request_noblock()  # type: ignore[attr-defined]
        finally:
            self._stopped.set()

    def stop(self) -> None:
        """Stops `serve` and waits until it has."""
        self._stopping = True
        os.write(self._wake_w, b"\0")
        self._stopped.wait()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def write(self, exchange: _Exchange) -> None:
        """Appends the exchange's line to the log, the credential and the token redacted."""
        if self.log_path is not None:
            line = self.policy.redact(json.dumps(exchange.record(self.policy).to_json()))
            # Opened per line: a handler that ends after the proxy closed still gets its line in.
            with self._writing, open(self.log_path, "a", encoding="utf-8") as out:
                out.write(line + "\n")

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._changed:
            full = len(self._live) >= MAX_CONNECTIONS
            if not full:
                self._live[request] = []
        if full:
            self.write(_Exchange(reason=f"more than {MAX_CONNECTIONS} connections at once"))
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)  # type: ignore[misc]

    def shutdown_request(self, request: Any) -> None:
        super().shutdown_request(request)  # type: ignore[misc]
        with self._changed:
            self._live.pop(request, None)
            self._changed.notify_all()

    def attach(self, request: Any, upstream: socket.socket) -> None:
        with self._changed:
            if request in self._live:
                self._live[request].append(upstream)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the handler has recorded what went wrong: never a traceback on hoh's stderr

    def cut(self, grace: float) -> None:
        """Ends every live connection and waits up to `grace` seconds for their log lines."""
        with self._changed:
            for sock in [s for request, upstreams in self._live.items() for s in (request, *upstreams)]:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._changed.wait_for(lambda: not self._live, timeout=grace)


class _TCPServer(_Serving, socketserver.ThreadingTCPServer):
    allow_reuse_address = True


class _UnixServer(_Serving, socketserver.ThreadingUnixStreamServer):
    pass


class EgressProxy:
    """The egress of a role attempt or a run: a context manager serving in daemon threads.

    With `unix_path` it listens on that unix socket (for the jail to bind at `INSIDE_SOCKET`), else on
    `tcp_host` (127.0.0.1; a role environment's gateway address) with an ephemeral port (`tcp_port`). Leaving it stops listening, cuts the connections
    still open and removes the socket."""

    def __init__(self, policy: EgressPolicy, *, unix_path: Path | None = None, log_path: Path | None = None,
                 tcp_host: str = "127.0.0.1"):
        self.policy = policy
        self._tcp_host = tcp_host
        self._unix_path = unix_path
        self._log_path = log_path
        self._server: _Serving | None = None

    @property
    def unix_path(self) -> Path | None:
        return self._unix_path

    @property
    def tcp_port(self) -> int:
        if self._unix_path is not None or self._server is None:
            raise RuntimeError("the egress proxy has a TCP port only while it serves without a unix path")
        return self._server.server_address[1]  # type: ignore[attr-defined]

    def __enter__(self) -> EgressProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        if self._server is not None:
            return
        if self._log_path is not None:
            self._log_path.parent.mkdir(parents=True, exist_ok=True)
        server: _TCPServer | _UnixServer
        if self._unix_path is None:
            server = _TCPServer((self._tcp_host, 0), _Handler)
            own_ports = frozenset({INSIDE_PORT, server.server_address[1]})
        else:
            self._clear_socket_path(self._unix_path)
            server = _UnixServer(str(self._unix_path), _Handler)
            # Reachable from a role that runs as another uid; the private parent keeps the host's users out.
            private = not self._unix_path.parent.stat().st_mode & 0o077
            os.chmod(self._unix_path, 0o666 if private else 0o600)
            own_ports = frozenset({INSIDE_PORT})
        server.setup_egress(self.policy, self._log_path, own_ports)
        threading.Thread(target=server.serve, name="hoh-egress", daemon=True).start()
        self._server = server

    def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.stop()
        server.server_close()  # type: ignore[attr-defined]
        server.cut(grace=2.0)
        if self._unix_path is not None:
            self._unix_path.unlink(missing_ok=True)

    @staticmethod
    def _clear_socket_path(path: Path) -> None:
        """Makes the parent (0700) and removes a socket a killed run left; one that still answers is in use."""
        if len(os.fsencode(path)) >= 108:
            raise ValueError(f"a unix socket path must be shorter than 108 bytes: {path}")
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not path.is_socket():
            return
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(path))
            except ConnectionRefusedError:
                path.unlink()
                return
        raise RuntimeError(f"another egress proxy serves {path}")
