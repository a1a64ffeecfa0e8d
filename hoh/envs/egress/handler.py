"""One connection through hoh's egress: a model request, a tunnel or a plain-HTTP request, served only with
the attempt's token, checked against the policy and logged. The listeners that hand connections to
`_Handler` are in `egress`."""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, Iterator
from urllib.parse import urlsplit

from .mask import CorruptBody, Decoder, Masker, UnreadableCoding, content_codings, mask_text
from .policy import CREDENTIAL_HEADERS, HOP_BY_HOP, Decision, EgressPolicy, EgressRecord, Kind, split_hostport
from .shim import BUFSIZE, relay

if TYPE_CHECKING:
    from .proxy import _Serving

_REMADE = frozenset({"host", "content-length", "expect"})  # set by the proxy for the next hop
_REALM = 'realm="hoh egress"'
HEAD_TIMEOUT = 60.0
"""A client gets this long to send its request line and headers."""
CONNECT_TIMEOUT = 30.0
STREAM_TIMEOUT = 3600.0
"""A model's response may be silent for minutes (a long think): only an hour's silence ends it."""
LINGER_SECONDS = 2.0
LINGER_BYTES = 1 << 20
_MAX_LINE = 8192
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass
class _Exchange:
    """What one connection did so far, for its log line."""

    kind: Kind = Kind.HTTP
    target: str = ""
    decision: Decision = Decision.DENIED
    status: int = 0
    up: int = 0
    down: int = 0
    method: str = ""
    reason: str = ""
    silent: bool = False
    started: float = field(default_factory=time.monotonic)

    def record(self, policy: EgressPolicy) -> EgressRecord:
        return EgressRecord(time=round(time.time(), 3), kind=self.kind, target=policy.redact(self.target),
                            decision=self.decision, status=self.status, bytes_up=self.up, bytes_down=self.down,
                            seconds=round(time.monotonic() - self.started, 3), method=self.method[:32],
                            reason=policy.redact(self.reason)[:300])


class _ClientError(Exception):
    """The client's request body is malformed or cut short."""


def _hop_by_hop(headers: http.client.HTTPMessage) -> set[str]:
    named = {token.strip().lower() for value in headers.get_all("Connection", []) for token in value.split(",")}
    return HOP_BY_HOP | named


def _why(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


class _Handler(BaseHTTPRequestHandler):
    """One connection: one request, routed, answered or relayed, logged."""

    protocol_version = "HTTP/1.1"
    default_request_version = "HTTP/1.0"  # http.server's "HTTP/0.9" would send its errors without a status line
    timeout = HEAD_TIMEOUT
    server: _Serving  # type: ignore[assignment]

    def setup(self) -> None:
        super().setup()
        self.ex = _Exchange()
        if self.connection.family != socket.AF_UNIX:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self) -> None:
        try:
            self.handle_one_request()
        except Exception as exc:  # untrusted bytes must never end more than their own connection
            self.ex.reason = self.ex.reason or f"{type(exc).__name__}: {exc}"
        finally:
            self.close_connection = True
            if not self.ex.silent:
                self.server.write(self.ex)

    def handle_one_request(self) -> None:
        # http.server's own, without its do_METHOD dispatch: any method goes through.
        self.raw_requestline = self.rfile.readline(65537)
        if not self.raw_requestline:
            self.ex.silent = True  # a probe of the socket, not a request: no log line
            return
        self.request_version = self.default_request_version
        if len(self.raw_requestline) > 65536:
            return self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG)
        if not self.raw_requestline.strip():
            return self.send_error(HTTPStatus.BAD_REQUEST, "an empty request line")
        if not self.parse_request():
            return
        self.connection.settimeout(STREAM_TIMEOUT)
        self.ex.method = self.command
        if len(self.requestline.split()) != 3:
            self.refuse(400, "HTTP/0.9 is not served")
        elif self.command == "CONNECT":
            self.ex.kind = Kind.CONNECT
            if self.admitted(model=False):
                self.tunnel()
        elif self.path.startswith("/"):
            self.ex.kind = Kind.MODEL
            if self.admitted(model=True):
                self.model(self.path)
        elif self.path[:7].lower() == "http://":
            self.ex.kind = Kind.HTTP
            if self.admitted(model=self.to_itself()):
                self.plain_http()
        else:
            self.refuse(400, f"not a request this proxy serves: {self.command} {self.path[:100]}")

    def admitted(self, model: bool) -> bool:
        """Whether the request carries the attempt's token, else refuses it: 401 on the model route, where the
        token is the CLI's key (a credential header), 407 to a client using the proxy as a proxy (the token in
        Proxy-Authorization, from the userinfo of the proxy URL it was given)."""
        policy = self.server.policy
        values = self.headers.get_all("Proxy-Authorization", [])
        if model:
            values += [value for name, value in self.headers.items() if name.lower() in CREDENTIAL_HEADERS]
        if any(policy.admits(value) for value in values):
            return True
        self.ex.target = policy.redact(self.path.partition("?")[0])[:200]
        if model:
            self.refuse(401, "a request without this attempt's token", ("WWW-Authenticate", f"Bearer {_REALM}"))
        else:
            self.refuse(407, "a request without this attempt's token", ("Proxy-Authenticate", f"Basic {_REALM}"))
        return False

    def to_itself(self) -> bool:
        """An absolute-form request for this proxy's own address: a CLI that sends its model calls through
        HTTP_PROXY, which is us: on loopback, or (in a role environment) at the gateway address this proxy
        listens on, which NO_PROXY does not name."""
        parts = urlsplit(self.path)
        try:
            host, port = parts.hostname, parts.port or 80
        except ValueError:
            return False
        return (host in _LOOPBACK or host == self.server.server_address[0]) and port in self.server.own_ports

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the JSON log is the record; hoh's stderr is not the proxy's

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        self.refuse(int(code), message or HTTPStatus(code).phrase)

    def refuse(self, status: int, reason: str, *headers: tuple[str, str]) -> None:
        """Answers with `status` and a short JSON error (the shape model clients parse), and closes."""
        reason = self.server.policy.redact(reason)[:300]
        self.ex.status, self.ex.reason = status, reason
        if status < 500:  # not passed on; a 502 was allowed, and failed upstream
            self.ex.decision = Decision.DENIED
        body = json.dumps({"error": {"type": "hoh_egress", "message": f"hoh egress: {reason}"}}).encode()
        try:
            self.send_response_only(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.linger()
        except OSError:
            pass  # the client is gone

    def linger(self) -> None:
        """After a refusal, what the client still sends (the body of a request refused on its head) is read
        and dropped until it closes, for a bounded time: a close with unread bytes resets the connection, and
        the client may lose the answer it was sent."""
        self.connection.shutdown(socket.SHUT_WR)
        self.connection.settimeout(LINGER_SECONDS)
        left, deadline = LINGER_BYTES, time.monotonic() + LINGER_SECONDS
        while left > 0 and time.monotonic() < deadline and (data := self.rfile.read1(min(left, BUFSIZE))):
            left -= len(data)

    def fail_upstream(self, reason: str) -> None:
        """The upstream could not be reached or dropped the request: a model client must see what it would
        have seen without hoh in between, a closed connection (a network error it retries), not an HTTP
        error from a server that never answered. Other routes get a 502, as proxies answer."""
        if self.ex.kind is not Kind.MODEL:
            return self.refuse(502, reason)
        self.ex.status, self.ex.reason = 0, self.server.policy.redact(reason)[:300]
        self.close_connection = True

    def model(self, path: str) -> None:
        self.ex.kind = Kind.MODEL
        policy = self.server.policy
        if policy.upstream is None:
            self.ex.target = path.partition("?")[0]
            return self.refuse(403, "this role has no model route")
        scheme, host, port = policy.target()
        self.ex.target = f"{host}:{port}{path.partition('?')[0]}"
        self.ex.decision = Decision.ALLOWED
        name = f"[{host}]" if ":" in host else host
        default_port = port == (443 if scheme == "https" else 80)
        self.forward(scheme, host, port, path, name if default_port else f"{name}:{port}", credential=True)

    def plain_http(self) -> None:
        self.ex.kind = Kind.HTTP
        parts = urlsplit(self.path)
        try:
            host, port = parts.hostname, parts.port or 80
        except ValueError:
            host = None
        if not host:
            return self.refuse(400, "a proxy request needs http://host[:port]/path")
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if self.to_itself():
            return self.model(path)
        self.ex.target = f"{host}:{port}"
        if not self.server.policy.allows(host, port):
            return self.refuse(403, f"{host}:{port} is not among this role's allowed hosts")
        self.ex.decision = Decision.ALLOWED
        self.forward("http", host, port, path, parts.netloc.rpartition("@")[2], credential=False)

    def tunnel(self) -> None:
        self.ex.kind = Kind.CONNECT
        try:
            host, port = split_hostport(self.path)
            if port is None:
                raise ValueError(self.path)
        except ValueError:
            return self.refuse(400, "CONNECT needs host:port")
        self.ex.target = f"{host}:{port}"
        if not self.server.policy.allows(host, port):
            return self.refuse(403, f"{host}:{port} is not among this role's allowed hosts")
        self.ex.decision = Decision.ALLOWED
        try:
            upstream = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
        except OSError as exc:
            return self.refuse(502, f"cannot reach {host}:{port}: {_why(exc)}")
        with upstream:
            self.server.attach(self.request, upstream)
            upstream.settimeout(STREAM_TIMEOUT)
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.ex.status = 200
            # Through the buffered reader: it may already hold the first bytes of the tunnel.
            self.ex.up, self.ex.down = relay(self.connection, upstream, read_a=self.rfile.read1)

    def forward(self, scheme: str, host: str, port: int, path: str, host_header: str, *, credential: bool) -> None:
        """Sends this request on to scheme://host:port`path` and streams the answer back."""
        try:
            length, chunked, body = self.body()
        except _ClientError as exc:
            return self.refuse(400, str(exc))
        headers = self.outgoing_headers(host_header, credential)
        conn: http.client.HTTPConnection
        if scheme == "https":
            conn = http.client.HTTPSConnection(host, port, timeout=CONNECT_TIMEOUT, context=self.server.tls)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=CONNECT_TIMEOUT)
        try:
            try:
                conn.connect()
            except OSError as exc:
                return self.fail_upstream(f"cannot reach {host}:{port}: {_why(exc)}")
            assert conn.sock is not None
            self.server.attach(self.request, conn.sock)
            conn.sock.settimeout(STREAM_TIMEOUT)
            try:
                conn.putrequest(self.command, path, skip_host=True, skip_accept_encoding=True)
                for name, value in headers:
                    conn.putheader(name, value)
                if length is not None:
                    conn.putheader("Content-Length", str(length))
                if chunked:
                    conn.putheader("Transfer-Encoding", "chunked")
                conn.endheaders()
                for data in body:
                    conn.send(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                if chunked:
                    conn.send(b"0\r\n\r\n")
                response = conn.getresponse()
            except _ClientError as exc:
                return self.refuse(400, str(exc))
            except (ValueError, http.client.InvalidURL):
                # Never echo the value: it may hold the credential by now.
                return self.refuse(400, "a method, path or header that cannot be sent on")
            except (OSError, http.client.HTTPException) as exc:
                return self.fail_upstream(f"{host}:{port} failed: {_why(exc)}")
            self.stream_back(response, credential)
        finally:
            conn.close()

    def body(self) -> tuple[int | None, bool, Iterator[bytes]]:
        """The request body's (Content-Length, chunked, its bytes as they come)."""
        codings = [c.strip().lower() for v in self.headers.get_all("Transfer-Encoding", []) for c in v.split(",")]
        if any(codings):
            if codings != ["chunked"]:
                raise _ClientError("only the chunked transfer-coding is served")
            return None, True, self.read_chunked()
        lengths = {v.strip() for v in self.headers.get_all("Content-Length", [])}
        if not lengths:
            return None, False, iter(())
        value = lengths.pop()
        if lengths or not (value.isascii() and value.isdigit()):
            raise _ClientError("a bad Content-Length")
        return int(value), False, self.read_exact(int(value))

    def read_exact(self, length: int) -> Iterator[bytes]:
        while left := length - self.ex.up:
            data = self.rfile.read1(min(BUFSIZE, left))
            if not data:
                raise _ClientError("the request body ended early")
            self.ex.up += len(data)
            yield data

    def read_chunked(self) -> Iterator[bytes]:
        while True:
            line = self.rfile.readline(_MAX_LINE)
            size = line.split(b";")[0].strip()
            if not line.endswith(b"\n") or not _HEX.fullmatch(size):
                raise _ClientError("a bad chunk in the request body")
            left = int(size, 16)
            if left == 0:
                break
            while left:
                data = self.rfile.read1(min(BUFSIZE, left))
                if not data:
                    raise _ClientError("the request body ended early")
                left -= len(data)
                self.ex.up += len(data)
                yield data
            if self.rfile.readline(_MAX_LINE) not in (b"\r\n", b"\n"):
                raise _ClientError("a bad chunk in the request body")
        for _ in range(100):  # trailers: read and dropped
            if self.rfile.readline(_MAX_LINE) in (b"\r\n", b"\n"):
                return
        raise _ClientError("bad trailers in the request body")

    def outgoing_headers(self, host_header: str, credential: bool) -> list[tuple[str, str]]:
        policy = self.server.policy
        drop = _hop_by_hop(self.headers) | _REMADE
        headers = [("Host", host_header)]
        if credential and policy.credential:
            # An answer that carries the key back must come in a form it can be masked in.
            drop |= {"accept-encoding"}
            headers.append(("Accept-Encoding", "identity"))
        for name, value in self.headers.items():
            if name.lower() in drop:
                continue
            if credential and name.lower() in CREDENTIAL_HEADERS:
                if (sent := policy.with_credential(value)) is None:
                    continue
                value = sent
            headers.append((name, value))
        return headers

    def stream_back(self, response: http.client.HTTPResponse, credential: bool) -> None:
        """Status, headers and body to the client as they arrive; re-chunked when the length is unknown. Where
        the key went up (`credential`) it never comes back, in any spelling (a gateway that echoes its request):
        masked at the same length, in a body decoded first if the upstream compressed it all the same."""
        patterns = self.server.policy.spellings if credential else ()
        codings = content_codings(response.headers.get_all("Content-Encoding", []))
        decoder = None
        if patterns and codings and response.length != 0:  # http.client has set 0 where there is no body
            try:
                decoder = Decoder(codings)
            except UnreadableCoding as exc:
                return self.refuse(502, f"the upstream answered in the {exc} coding, which hoh cannot decode to "
                                        "keep the key out of it")
        mask = Masker(patterns)
        rechunk = response.length is None or decoder is not None
        drop = _hop_by_hop(response.headers) | ({"content-length"} if rechunk else set())
        drop |= {"content-encoding"} if decoder is not None else set()
        self.ex.status = response.status
        try:
            self.send_response_only(response.status, mask_text(response.reason, patterns))
            for name, value in response.getheaders():
                if name.lower() not in drop:
                    self.send_header(mask_text(name, patterns), mask_text(value, patterns))
            if rechunk:
                self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            while chunk := response.read1(BUFSIZE):
                self.ex.down += len(chunk)
                for piece in decoder.feed(chunk) if decoder else (chunk,):
                    self.send_body(mask.feed(piece), rechunk)
            for piece in decoder.flush() if decoder else ():
                self.send_body(mask.feed(piece), rechunk)
            self.send_body(mask.flush(), rechunk)
            if rechunk:
                self.wfile.write(b"0\r\n\r\n")
        except CorruptBody as exc:
            self.ex.reason = f"the upstream's body ended the stream: {exc}"  # sent: all left is to close
        except (OSError, http.client.HTTPException) as exc:
            self.ex.reason = f"the stream ended early: {_why(exc)}"  # the status is sent: all left is to close

    def send_body(self, data: bytes, chunked: bool) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
