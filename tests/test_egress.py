"""hoh's egress on real sockets: the proxy in TCP mode and on a unix socket behind the shim, and a jailed
CLI whose only way out is the egress. The upstream is a tiny model-like HTTP server in the test."""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import hoh
from hoh.envs.egress.proxy import (INSIDE_PORT, INSIDE_SOCKET, Decision, EgressPolicy, EgressProxy, Kind,
                                   inside_base_url, read_log)
from hoh.envs.egress.route import shim_argv
from hoh.envs.local.jail import bwrap_argv
from hoh.harness.sandbox import JailSpec

REPO = Path(__file__).resolve().parents[1]
KEY = "sk-real-secret-0123456789"
TOKEN = "hoh-test-token-0123456789abcdef"
"""The attempt's token the CLI holds in place of the key."""
PROXY_AUTH = "Proxy-Authorization: Basic " + base64.b64encode(f"hoh:{TOKEN}".encode()).decode()
"""What a client given `http://hoh:TOKEN@host:port` as its proxy sends with every proxied request."""
MASKED = "*" * len(KEY)
"""What the client sees of the key where an upstream echoes it back."""
SHIM = [sys.executable, "-m", "hoh.envs.egress.shim"]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


class _UpstreamHandler(BaseHTTPRequestHandler):
    """A model endpoint: /v1/stream answers with three SSE chunks 0.2 s apart, anything else with a JSON
    echo; both echo the credential headers they got, and the server keeps every request it saw."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        pass

    def body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while size := int(self.rfile.readline().split(b";")[0], 16):
                data += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
            return data
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def do_POST(self):
        seen = {"method": self.command, "path": self.path, "body": self.body().decode(),
                "headers": {k.lower(): v for k, v in self.headers.items()}}
        self.server.seen.append(seen)
        auth = {k: seen["headers"].get(k) for k in ("authorization", "x-api-key")}
        if self.path.startswith("/v1/stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for n in range(3):
                event = f"data: {json.dumps({'n': n, **auth})}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                if n < 2:
                    time.sleep(0.2)
            self.server.finished.set()  # before the end: the client cannot have read it all yet
            self.wfile.write(b"0\r\n\r\n")
            return
        reply = json.dumps({"path": self.path, "body": seen["body"], **auth}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_GET = do_POST


@pytest.fixture
def upstream():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _UpstreamHandler)
    server.daemon_threads = True
    server.seen, server.finished = [], threading.Event()
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def echo_port():
    """A TCP echo server, the 'registry' a CONNECT tunnel reaches."""
    listener = socket.create_server(("127.0.0.1", 0))

    def echo(conn):
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def serve():
        with contextlib.suppress(OSError):
            while True:
                threading.Thread(target=echo, args=(listener.accept()[0],), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


def socket_dir() -> Path:
    """Short (AF_UNIX paths are < 108 bytes) and outside /tmp where it can be (the jail's /tmp is its own)."""
    return Path(tempfile.mkdtemp(prefix="hoh-egress-", dir="/run" if os.access("/run", os.W_OK) else None))


def wait_listening(port: int, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        assert proc is None or proc.poll() is None, proc.stderr.read() if proc.stderr else proc.returncode
        time.sleep(0.02)
    raise AssertionError(f"nothing listens on {port}")


class Route:
    """Where a client in the test reaches the egress: the proxy's TCP port, or the shim's listen port."""

    def __init__(self, port: int, log: Path, proxy: EgressProxy):
        self.port, self.log, self.proxy = port, log, proxy

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        headers = headers or {}
        conn.request(method, path, body=body, headers=headers, encode_chunked="Transfer-Encoding" in headers)
        return conn.getresponse()

    def raw(self, data: bytes) -> bytes:
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            return b"".join(iter(lambda: s.recv(65536), b""))

    def records(self, count: int):
        """The log once it has `count` lines (a handler writes its line as it ends), checked free of the key."""
        deadline = time.monotonic() + 15  # a loaded machine (the suite runs 4 workers on 2 cores)
        while time.monotonic() < deadline:
            if self.log.exists() and len(self.log.read_text().splitlines()) >= count:
                break
            time.sleep(0.02)
        assert KEY not in self.log.read_text()
        return read_log(self.log)


@pytest.fixture(params=["tcp", "shim"])
def open_route(request, tmp_path):
    """Opens the egress for a policy, reached directly over TCP or through the shim and a unix socket."""
    with contextlib.ExitStack() as stack:
        def open_(policy: EgressPolicy) -> Route:
            log = tmp_path / "egress.jsonl"
            if request.param == "tcp":
                proxy = stack.enter_context(EgressProxy(policy, log_path=log))
                return Route(proxy.tcp_port, log, proxy)
            sock_dir = socket_dir()
            stack.callback(shutil.rmtree, sock_dir, ignore_errors=True)
            proxy = stack.enter_context(EgressProxy(policy, unix_path=sock_dir / "egress.sock", log_path=log))
            port = free_port()
            shim = subprocess.Popen([*SHIM, "--listen", f"127.0.0.1:{port}", "--socket", str(proxy.unix_path), "--",
                                     sys.executable, "-c", "import sys; sys.stdin.read()"],
                                    stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
            stack.callback(shim.wait, 10)
            stack.callback(shim.stdin.close)
            wait_listening(port, shim)
            return Route(port, log, proxy)
        yield open_


def test_the_upstream_gets_the_real_key_where_the_cli_sent_its_token(open_route, upstream):
    route = open_route(EgressPolicy(token=TOKEN, upstream=f"http://127.0.0.1:{upstream.server_port}", credential=KEY))
    response = route.request("POST", "/v1/messages?beta=true", body=b'{"model": "m"}',
                             headers={"Authorization": f"Bearer {TOKEN}", "x-api-key": TOKEN,
                                      "Proxy-Authorization": "Basic eA==", "X-Other": TOKEN})
    assert response.status == 200
    assert json.loads(response.read())["body"] == '{"model": "m"}'
    seen = upstream.seen[-1]
    assert seen["path"] == "/v1/messages?beta=true"
    assert seen["headers"]["authorization"] == f"Bearer {KEY}" and seen["headers"]["x-api-key"] == KEY
    assert seen["headers"]["host"] == f"127.0.0.1:{upstream.server_port}"
    assert "proxy-authorization" not in seen["headers"]
    assert seen["headers"]["x-other"] == TOKEN  # only the credential headers get the key
    [record] = route.records(1)
    assert (record.kind, record.decision, record.status) == (Kind.MODEL, Decision.ALLOWED, 200)
    assert record.target == f"127.0.0.1:{upstream.server_port}/v1/messages" and record.method == "POST"
    assert record.bytes_up == len(b'{"model": "m"}') and record.bytes_down > 0


def test_a_stream_reaches_the_client_before_the_upstream_has_finished(open_route, upstream):
    route = open_route(EgressPolicy(token=TOKEN, upstream=f"http://127.0.0.1:{upstream.server_port}/v1", credential=KEY))
    response = route.request("POST", "/v1/stream", body=b"{}", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
    first = response.read1(65536)
    assert first.startswith(b"data: ") and not upstream.finished.is_set()
    rest = response.read()
    assert upstream.finished.is_set()
    events = [json.loads(line[6:]) for line in (first + rest).decode().split("\n\n") if line]
    assert [e["n"] for e in events] == [0, 1, 2] and events[0]["authorization"] == f"Bearer {MASKED}"
    assert upstream.seen[-1]["headers"]["authorization"] == f"Bearer {KEY}"
    [record] = route.records(1)
    assert record.status == 200 and record.seconds >= 0.3


def test_a_chunked_request_body_goes_up_whole(open_route, upstream):
    route = open_route(EgressPolicy(token=TOKEN, upstream=f"http://127.0.0.1:{upstream.server_port}"))
    response = route.request("POST", "/v1/chat/completions", body=iter([b'{"a":', b"", b' 1}']),
                             headers={"Transfer-Encoding": "chunked", "Authorization": f"Bearer {TOKEN}"})
    assert response.status == 200 and json.loads(response.read())["body"] == '{"a": 1}'
    assert "authorization" not in upstream.seen[-1]["headers"]  # no credential: no made-up key goes on


def test_a_key_less_endpoint_gets_no_token_and_the_role_its_own_headers(open_route, upstream):
    route = open_route(EgressPolicy(token=TOKEN, upstream=f"http://127.0.0.1:{upstream.server_port}/v1"))
    response = route.request("POST", "/v1/chat/completions", body=b"{}",
                             headers={"Authorization": f"Bearer {TOKEN}", "x-api-key": TOKEN,
                                      "api-key": "the-role-s-own", "X-Other": TOKEN})
    assert response.status == 200
    seen = upstream.seen[-1]["headers"]
    assert "authorization" not in seen and "x-api-key" not in seen
    assert seen["api-key"] == "the-role-s-own" and seen["x-other"] == TOKEN  # nothing else is touched
    [record] = route.records(1)
    assert (record.kind, record.decision, record.status) == (Kind.MODEL, Decision.ALLOWED, 200)


def test_connect_reaches_only_the_allowed_hosts(open_route, echo_port):
    route = open_route(EgressPolicy(token=TOKEN, allow_hosts=(f"127.0.0.1:{echo_port}", "*.example.org")))
    with socket.create_connection(("127.0.0.1", route.port), timeout=10) as s:
        # The first tunnelled bytes sent with the request must not be lost in the proxy's buffer.
        s.sendall(f"CONNECT 127.0.0.1:{echo_port} HTTP/1.1\r\nHost: x\r\n{PROXY_AUTH}\r\n\r\nping".encode())
        reply = b""
        while b"ping" not in reply and (data := s.recv(65536)):
            reply += data
        assert reply.startswith(b"HTTP/1.1 200 ")
        s.sendall(b"pong")
        assert s.recv(65536) == b"pong"
        s.shutdown(socket.SHUT_WR)
        assert s.recv(65536) == b""
    denied = route.raw(f"CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n{PROXY_AUTH}\r\n\r\n".encode())
    assert denied.startswith(b"HTTP/1.1 403 ") and b"example.org:443" in denied
    # The tunnel's line is written when it closes, which may be after the refusal's: match them by decision.
    allowed, refused = sorted(route.records(2), key=lambda record: record.decision is not Decision.ALLOWED)
    assert (allowed.kind, allowed.decision, allowed.status) == (Kind.CONNECT, Decision.ALLOWED, 200)
    assert (allowed.bytes_up, allowed.bytes_down) == (8, 8) and allowed.target == f"127.0.0.1:{echo_port}"
    assert (refused.kind, refused.decision, refused.status, refused.target) == \
        (Kind.CONNECT, Decision.DENIED, 403, "example.org:443")


def test_plain_http_proxying_follows_the_allowlist_and_never_gets_the_key(upstream):
    policy = EgressPolicy(token=TOKEN, upstream=f"http://127.0.0.1:{upstream.server_port}", credential=KEY,
                          allow_hosts=(f"127.0.0.1:{upstream.server_port}",))
    with EgressProxy(policy) as proxy:
        route = Route(proxy.tcp_port, Path("/nonexistent"), proxy)
        proxy_auth = dict([PROXY_AUTH.split(": ")])
        response = route.request("GET", f"http://127.0.0.1:{upstream.server_port}/simple/pkg/?q=1",
                                 headers={"Authorization": f"Bearer {TOKEN}", **proxy_auth})
        assert response.status == 200 and json.loads(response.read())["path"] == "/simple/pkg/?q=1"
        assert upstream.seen[-1]["headers"]["authorization"] == f"Bearer {TOKEN}"
        assert route.request("GET", "http://example.org/", headers=proxy_auth).status == 403
        # Sent to the proxy as a proxy (HTTP_PROXY pointing at it): still the model route.
        response = route.request("POST", f"http://127.0.0.1:{proxy.tcp_port}/v1/x", body=b"{}",
                                 headers={"x-api-key": TOKEN})
        assert response.status == 200 and json.loads(response.read())["x-api-key"] == MASKED
        assert upstream.seen[-1]["headers"]["x-api-key"] == KEY


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a test certificate")
def test_an_https_upstream_is_verified_and_gets_the_key(tmp_path, monkeypatch):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost", "-days", "1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _UpstreamHandler)
    server.daemon_threads, server.seen, server.finished = True, [], threading.Event()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    policy = EgressPolicy(token=TOKEN, upstream=f"https://localhost:{server.server_port}/v1", credential=KEY)
    try:
        with EgressProxy(policy) as proxy:  # the system's CAs: this certificate is nobody's
            with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
                Route(proxy.tcp_port, tmp_path, proxy).request("POST", "/v1/x", body=b"{}", headers={"x-api-key": TOKEN})
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        with EgressProxy(policy) as proxy:
            response = Route(proxy.tcp_port, tmp_path, proxy).request(
                "POST", "/v1/stream", body=b"{}", headers={"Authorization": f"Bearer {TOKEN}"})
            assert response.status == 200 and b"data: " in response.read1(65536) and not server.finished.is_set()
            assert json.loads(response.read().decode().split("\n\n")[-2][6:])["authorization"] == f"Bearer {MASKED}"
            assert server.seen[-1]["headers"]["authorization"] == f"Bearer {KEY}"
        assert server.seen[-1]["headers"]["host"] == f"localhost:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_key_an_upstream_echoes_is_masked_also_when_split_across_chunks():
    from hoh.envs.egress.mask import Masker
    mask = Masker((KEY.encode(),))
    chunks = [b"before " + KEY[:5].encode(), KEY[5:].encode() + b" and " + KEY.encode()[:-1], KEY.encode()[-1:] + b" end"]
    out = b"".join(mask.feed(c) for c in chunks) + mask.flush()
    assert out == b"before " + MASKED.encode() + b" and " + MASKED.encode() + b" end"


def test_every_spelling_of_the_key_is_masked_wherever_two_reads_cut_it():
    from hoh.envs.egress.mask import Masker, spellings
    key = KEY.encode()
    spelled = [base64.b64encode(b"x" * pad + key) for pad in range(3)] + [
        base64.urlsafe_b64encode(b"x" * pad + key + b"?>") for pad in range(3)] + [key.hex().encode(), key]
    text = b"<" + b"|".join(spelled) + b">\n\n"
    for cut in range(len(text)):
        mask = Masker(spellings(KEY))
        out = mask.feed(text[:cut]) + mask.feed(text[cut:]) + mask.flush()
        assert len(out) == len(text) and out.endswith(b">\n\n") and out.startswith(b"<")
        for part in out[1:-3].split(b"|"):  # each spelling, left only where its neighbours' bits are
            assert key not in part and key.hex().encode() not in part and part.count(b"*") >= len(key), (cut, part)
    assert Masker(spellings(KEY)).feed(b"data: {}\n\n") == b"data: {}\n\n"  # nothing held that cannot begin one


def test_a_compressed_body_is_decoded_as_it_streams_and_a_coding_hoh_cannot_read_is_refused():
    import gzip
    import zlib

    from hoh.envs.egress.mask import CorruptBody, Decoder, UnreadableCoding, content_codings
    body = json.dumps({"echo": KEY}).encode() * 50
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    for codings, data in ((["gzip"], gzip.compress(body)), (["x-gzip"], gzip.compress(body)),
                          (["deflate"], zlib.compress(body)), (["deflate"], raw.compress(body) + raw.flush()),
                          (["gzip", "deflate"], zlib.compress(gzip.compress(body))),
                          (["gzip"], gzip.compress(body[:99]) + gzip.compress(body[99:]))):
        decoder = Decoder(codings)
        out = b"".join(piece for n in range(0, len(data), 7) for piece in decoder.feed(data[n:n + 7]))
        assert out + b"".join(decoder.flush()) == body, codings
    assert content_codings(["gzip, identity", "Deflate"]) == ["gzip", "deflate"]
    for coding in ("compress", "zstd", "x-anything"):
        with pytest.raises(UnreadableCoding):
            Decoder([coding])
    cut = Decoder(["gzip"])
    with pytest.raises(CorruptBody):
        list(cut.feed(gzip.compress(body)[:40]))
        list(cut.flush())


def test_an_unreachable_upstream_is_a_closed_connection_logged_with_the_host(open_route):
    # What the model client would see without hoh in between: a network error it retries, not an HTTP error.
    dead = free_port()
    route = open_route(EgressPolicy(token=TOKEN, upstream=f"http://127.0.0.1:{dead}/v1", credential=KEY))
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        route.request("POST", "/v1/responses", body=b"{}", headers={"Authorization": f"Bearer {TOKEN}"})
    [record] = route.records(1)
    assert (record.kind, record.status, record.decision) == (Kind.MODEL, 0, Decision.ALLOWED)
    assert f"127.0.0.1:{dead}" in record.reason and KEY not in record.reason


def test_garbage_and_oversized_headers_are_refused_and_the_proxy_serves_on(open_route, upstream):
    route = open_route(EgressPolicy(token=TOKEN, upstream=f"http://127.0.0.1:{upstream.server_port}", credential=KEY))
    assert route.raw(b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03garbage\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert route.raw(b"hello\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    big = b"POST /v1/x HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n"
    assert route.raw(big).startswith(b"HTTP/1.1 431 ")
    many = b"POST /v1/x HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % n for n in range(150)) + b"\r\n"
    assert route.raw(many).startswith(b"HTTP/1.1 431 ")
    bad_length = f"POST /v1/x HTTP/1.1\r\nHost: x\r\nx-api-key: {TOKEN}\r\nContent-Length: 1e3\r\n\r\n".encode()
    assert route.raw(bad_length).startswith(b"HTTP/1.1 400 ")
    assert route.raw(b"GET /v1/x\r\n\r\n").startswith(b"HTTP/1.1 400 ")  # HTTP/0.9
    assert route.raw(b"GET ftp://x/ HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    response = route.request("POST", "/v1/ok", body=b"{}", headers={"x-api-key": TOKEN})
    assert response.status == 200 and json.loads(response.read())["x-api-key"] == MASKED
    assert upstream.seen[-1]["headers"]["x-api-key"] == KEY
    # A refusal's line is written once the client has closed (the proxy reads what it still sends): in any order.
    records = sorted(route.records(8), key=lambda r: r.status)
    assert [r.status for r in records] == [200, 400, 400, 400, 400, 400, 431, 431]
    assert all(r.decision == Decision.DENIED for r in records[1:])


def test_a_role_without_a_model_route_is_refused(open_route):
    route = open_route(EgressPolicy(token=TOKEN))
    assert route.request("POST", "/v1/responses", body=b"{}", headers={"x-api-key": TOKEN}).status == 403
    [record] = route.records(1)
    assert (record.kind, record.decision) == (Kind.MODEL, Decision.DENIED)


def test_closing_the_proxy_cuts_a_live_stream_and_removes_its_socket(upstream, tmp_path):
    sock_dir = socket_dir()
    try:
        path = sock_dir / "run" / "egress.sock"
        policy = EgressPolicy(token=TOKEN, upstream=f"http://127.0.0.1:{upstream.server_port}")
        with EgressProxy(policy, unix_path=path, log_path=tmp_path / "log.jsonl"):
            assert path.is_socket() and path.parent.stat().st_mode & 0o777 == 0o700
            with pytest.raises(RuntimeError, match="another egress proxy"):
                EgressProxy(EgressPolicy(token=TOKEN), unix_path=path).start()
            client = socket.socket(socket.AF_UNIX)
            client.connect(str(path))
            client.sendall(f"POST /v1/stream HTTP/1.1\r\nHost: x\r\nx-api-key: {TOKEN}\r\nContent-Length: 0\r\n\r\n".encode())
            assert client.recv(65536).startswith(b"HTTP/1.1 200 ")
        assert not path.exists()
        client.settimeout(5)
        with contextlib.suppress(ConnectionResetError):
            while client.recv(65536):
                pass
        client.close()
        [record] = [r for r in read_log(tmp_path / "log.jsonl") if r.kind == Kind.MODEL]
        assert record.status == 200 and record.reason.startswith("the stream ended early")
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(str(path))  # left by a killed run: nobody listens on it
        stale.close()
        with EgressProxy(policy, unix_path=path):
            assert path.is_socket()
    finally:
        shutil.rmtree(sock_dir, ignore_errors=True)


def test_the_policy_matches_hosts_and_keeps_its_key_out_of_sight():
    policy = EgressPolicy(token=TOKEN, upstream="https://api.example.com/v1", credential=KEY,
                          allow_hosts=("pypi.org", "files.pythonhosted.org:443", "*.npmjs.org", "[::1]:8080"))
    assert policy.target() == ("https", "api.example.com", 443)
    assert policy.allows("PyPI.org.", 443) and policy.allows("pypi.org", 80)
    assert policy.allows("files.pythonhosted.org", 443) and not policy.allows("files.pythonhosted.org", 80)
    assert policy.allows("registry.npmjs.org", 443) and not policy.allows("npmjs.org", 443)
    assert not policy.allows("evilnpmjs.org", 443) and policy.allows("::1", 8080)
    assert KEY not in repr(policy) and policy.redact(f"x {KEY} y") == "x [redacted] y"
    for bad in ({"upstream": "ftp://x"}, {"allow_hosts": ("a b",)}, {"allow_hosts": ("x:99999",)}):
        with pytest.raises(ValueError):
            EgressPolicy(**bad)
    assert inside_base_url("https://api.x.com/v1", 5) == "http://127.0.0.1:5/v1"
    assert inside_base_url("http://127.0.0.1:5555", INSIDE_PORT) == f"http://127.0.0.1:{INSIDE_PORT}"
    assert INSIDE_SOCKET == Path("/run/hoh/egress.sock")


def test_the_shim_imports_only_the_standard_library():
    code = "import sys, hoh.envs.egress.shim; print(sorted(m for m in sys.modules if m.startswith('hoh')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, check=True).stdout
    assert out.strip() == "['hoh', 'hoh.envs', 'hoh.envs.egress', 'hoh.envs.egress.shim']"


@pytest.mark.parametrize("args", [
    ["--listen", "127.0.0.1:1", "--socket", "SOCK"],  # no --
    ["--listen", "127.0.0.1:1", "--socket", "SOCK", "--"],  # no command
    ["--socket", "SOCK", "--", "true"],
    ["--listen", "127.0.0.1:http", "--socket", "SOCK", "--", "true"],
    ["--listen", "127.0.0.1:1", "--socket", "/nonexistent.sock", "--", "true"],
    ["--bogus", "--listen", "127.0.0.1:1", "--socket", "SOCK", "--", "true"],
])
def test_the_shim_refuses_bad_arguments_in_one_line(args, tmp_path):
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "s"))
    script = REPO / "hoh" / "envs" / "egress" / "shim.py"  # runnable as a plain script, too
    proc = subprocess.run([sys.executable, str(script), *[str(tmp_path / "s") if a == "SOCK" else a for a in args]],
                          capture_output=True, text=True, timeout=10)
    sock.close()
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("egress_shim: "), proc.stderr


def test_the_shim_gives_the_cli_its_pid_stdio_and_exit_code(upstream, tmp_path):
    sock_dir = socket_dir()
    try:
        policy = EgressPolicy(token=TOKEN, upstream=f"http://127.0.0.1:{upstream.server_port}", credential=KEY)
        with EgressProxy(policy, unix_path=sock_dir / "e.sock") as proxy:
            port = free_port()
            cli = ("import os, sys, time, urllib.request\n"
                   f"req = urllib.request.Request('http://127.0.0.1:{port}/v1/x', data=sys.stdin.read().encode(),"
                   f" headers={{'x-api-key': '{TOKEN}'}})\n"
                   "print(os.getpid(), urllib.request.urlopen(req).read().decode(), flush=True)\n"
                   "os.close(1); os.close(2); time.sleep(2); sys.exit(7)\n")
            shim = subprocess.Popen([*SHIM, "--listen", f"127.0.0.1:{port}", "--socket", str(proxy.unix_path),
                                     "--", sys.executable, "-c", cli], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=ENV)
            shim.stdin.write(b"hello")
            shim.stdin.close()
            pid, reply = shim.stdout.readline().decode().split(" ", 1)
            started = time.monotonic()
            assert shim.stdout.read() == b"" and shim.stderr.read() == b""
            # EOF as soon as the CLI closed its pipes: the forwarder holds no copy of them.
            assert time.monotonic() - started < 1.5
            assert shim.wait(10) == 7 and int(pid) == shim.pid
            assert json.loads(reply) == {"path": "/v1/x", "body": "hello", "authorization": None, "x-api-key": MASKED}
            assert upstream.seen[-1]["headers"]["x-api-key"] == KEY
    finally:
        shutil.rmtree(sock_dir, ignore_errors=True)


JAILED_CLIENT = """
import json, socket, sys, urllib.request
base, upstream_port = sys.argv[1], int(sys.argv[2])
try:
    socket.create_connection(("127.0.0.1", upstream_port), timeout=2).close()
    print("direct: reached")
except OSError:
    print("direct: refused")
req = urllib.request.Request(base + "/stream", data=b"{}", headers={"Authorization": "Bearer " + sys.argv[3]})
with urllib.request.urlopen(req) as response:
    print(response.read().decode().strip())
sys.exit(3)
"""


def _jail_problem() -> str | None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap (bubblewrap) is not installed"
    probe = subprocess.run([bwrap, "--unshare-net", "--unshare-pid", "--ro-bind", "/", "/", "--dev", "/dev", "--",
                            "true"], capture_output=True, text=True)
    return None if probe.returncode == 0 else f"bwrap cannot make namespaces here: {probe.stderr.strip()}"


@pytest.mark.skipif(_jail_problem() is not None, reason=str(_jail_problem()))
def test_a_jailed_cli_reaches_the_model_only_through_the_egress(upstream, tmp_path):
    sock_dir = socket_dir()
    try:
        policy = EgressPolicy(token=TOKEN, upstream=f"http://127.0.0.1:{upstream.server_port}/v1", credential=KEY)
        with EgressProxy(policy, unix_path=sock_dir / "egress.sock", log_path=tmp_path / "egress.jsonl") as proxy:
            # hoh's own jail around hoh's own forwarder, as every jailed role attempt gets them.
            spec = JailSpec(read_only=(Path(hoh.__file__).parent,), egress_socket=proxy.unix_path)
            client = [sys.executable, "-c", JAILED_CLIENT, inside_base_url(policy.upstream, INSIDE_PORT),
                      str(upstream.server_port), TOKEN]
            argv = bwrap_argv(spec, shim_argv(client), tmp_path)
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert proc.returncode == 3, proc.stderr
        lines = proc.stdout.splitlines()
        assert lines[0] == "direct: refused"  # its own network namespace: the upstream is not on its loopback
        events = [json.loads(line[6:]) for line in lines[1:] if line.startswith("data: ")]
        assert [e["n"] for e in events] == [0, 1, 2] and events[0]["authorization"] == f"Bearer {MASKED}"
        assert upstream.seen[-1]["headers"]["authorization"] == f"Bearer {KEY}"
        assert upstream.seen[-1]["path"] == "/v1/stream"
        [record] = read_log(tmp_path / "egress.jsonl")
        assert (record.kind, record.status) == (Kind.MODEL, 200)
        assert record.target == f"127.0.0.1:{upstream.server_port}/v1/stream"
        assert KEY not in (tmp_path / "egress.jsonl").read_text()
    finally:
        shutil.rmtree(sock_dir, ignore_errors=True)


def test_the_socket_dirs_of_killed_runs_are_swept_and_live_ones_kept(monkeypatch):
    from hoh.envs.egress import route as network
    tmp_path = Path(tempfile.mkdtemp(prefix="hoh-t-", dir="/tmp"))  # short: socket dirs live under 60 bytes
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = tmp_path / f"hoh-egress-{gone.pid}-abc"
    dead.mkdir()
    (dead / "egress.sock").touch()
    live = tmp_path / f"hoh-egress-{os.getppid()}-xyz"
    live.mkdir()
    mine = network.socket_dir()
    assert not dead.exists() and live.is_dir() and mine.is_dir() and mine.parent == tmp_path
    shutil.rmtree(tmp_path)
