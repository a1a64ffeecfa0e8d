"""The egress proxy never hands a role the key back, in any encoding, and serves only the running attempt's
token. A real run (the scripted agent as the Developer, jailed and with `sandbox.mode: off`) against a
hostile model upstream on loopback that echoes every request it gets: compressed (though asked for identity),
base64- (both alphabets, each alignment), hex- and url-encoded, in its headers, cut across chunks and SSE
events. The role saves every byte it received; the test looks for the key in them by decoding, not by the
proxy's own list of spellings. The token of loop 1, kept by the role, opens nothing in loop 2, and a client
without the token (as root also another local user) gets 401, a proxy client 407.
"""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, quote_plus, unquote_to_bytes, urlsplit

import pytest
import yaml
from conftest import mini_script

from hoh.envs.egress.proxy import Decision, EgressPolicy, EgressProxy, read_log

KEY = "sk-hoh/egress+key=~0123>>>456789:abc???def"
"""Its url-encodings differ from it, and its base64 holds + and / (the url-safe alphabet differs)."""
KEY_VAR = "HOH_EGRESS_TEST_KEY"
TOKEN_RE = re.compile(r"hoh-[A-Za-z0-9_-]{40,}")
READABLE = ["plain", "gzip", "deflate", "raw-deflate", "gzip-chunked", "encoded", "split", "sse", "headers"]
"""What the upstream answers in, each a form the proxy can mask the key in."""
UNREADABLE = ["compress", "zstd"]
"""Content codings the proxy cannot decode: refused with a 502, never passed through."""


# ---- the hostile upstream ------------------------------------------------------------------------
def _chunks(data: bytes, size: int) -> list[bytes]:
    return [data[n:n + size] for n in range(0, len(data), size)]


def _sse_events(echo: bytes) -> list[bytes]:
    """SSE events of the echo, as JSON and as base64, each cut in two chunks in the middle of the key."""
    as_json = f"data: {json.dumps({'echo': echo.decode()})}\n\n".encode()
    at = as_json.find(KEY.encode()) % len(as_json) + len(KEY) // 2
    as_base64 = b"data: " + base64.b64encode(echo) + b"\n\n"
    middle = len(b"data: ") + (echo.find(KEY.encode()) % len(echo) + len(KEY) // 2) * 4 // 3
    return [as_json[:at], as_json[at:], as_base64[:middle], as_base64[middle:], b"data: [DONE]\n\n"]


def _encodings(echo: bytes) -> bytes:
    """The echo base64-encoded at each alignment in both alphabets, hex-encoded and url-encoded three ways."""
    lines = [encode(b"x" * pad + echo) for pad in range(3) for encode in (base64.b64encode, base64.urlsafe_b64encode)]
    lines += [echo.hex().encode(), echo.hex().upper().encode(), quote(echo).encode(), quote(echo, safe="").encode(),
              quote_plus(echo).encode()]
    return b"\n".join(lines) + b"\n"


def answer(form: str, echo: bytes, auth: str) -> tuple[list[tuple[str, str]], list[bytes] | bytes, str]:
    """(headers, the body: bytes with a Content-Length or a list of chunks, the reason phrase) for `form`."""
    raw_deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    answers = {
        "plain": ([("Content-Type", "application/json")], echo),
        "gzip": ([("Content-Encoding", "gzip")], gzip.compress(echo)),
        "deflate": ([("Content-Encoding", "deflate")], zlib.compress(echo)),
        "raw-deflate": ([("Content-Encoding", "deflate")], raw_deflate.compress(echo) + raw_deflate.flush()),
        "gzip-chunked": ([("Content-Encoding", "gzip")], _chunks(gzip.compress(echo + _encodings(echo)), 5)),
        "encoded": ([("Content-Type", "text/plain")], _encodings(echo)),
        "split": ([], _chunks(echo + _encodings(echo), 3)),
        "sse": ([("Content-Type", "text/event-stream")],
                _sse_events(echo)),
        "headers": ([("X-Echo-Auth", auth), ("X-Echo-B64", base64.b64encode(auth.encode()).decode()),
                     ("X-Echo-Hex", auth.encode().hex()), ("X-Echo-Url", quote(auth, safe="")),
                     ("Set-Cookie", f"session={quote(auth)}; Path=/")], b"ok"),
        "compress": ([("Content-Encoding", "compress")], echo),
        "zstd": ([("Content-Encoding", "zstd")], echo),
    }
    headers, body = answers[form]
    return headers, body, f"OK {auth}" if form == "headers" else "OK"


class _Echo(BaseHTTPRequestHandler):
    """A model endpoint that echoes each request (its head and body) back in the form its path names."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        echo = self.requestline.encode() + b"\r\n" + bytes(self.headers) + body
        self.server.seen.append({k.lower(): v for k, v in self.headers.items()} | {"path": self.path})
        form = self.path.rsplit("/", 1)[-1]
        headers, payload, reason = answer(form if form in READABLE + UNREADABLE else "plain", echo,
                                          self.headers.get("Authorization", ""))
        self.send_response(200, reason)
        for name, value in headers:
            self.send_header(name, value)
        if isinstance(payload, bytes):
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for chunk in payload:  # each its own chunk: the proxy reads one chunk at a time
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    do_GET = do_POST


@pytest.fixture
def upstream():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads, server.seen = True, []
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


# ---- what the role received, searched for the key by decoding it -------------------------------
_B64_RUN = re.compile(rb"[A-Za-z0-9+/_-]{8,}={0,2}")


def leaks(data: bytes) -> list[str]:
    """How `data` gives the key away: as is, url-encoded, hex, or inside base64 text (either alphabet, any
    alignment); found by decoding, not by spelling the key."""
    key = KEY.encode()
    found = [name for name, text in (("plain", data), ("url-encoded", unquote_to_bytes(data)),
                                     ("url-encoded+", unquote_to_bytes(data.replace(b"+", b" ")).replace(b" ", b"+")))
             if key in text]
    if key.hex().encode() in data.lower():
        found.append("hex")
    for run in _B64_RUN.findall(data):
        run = run.rstrip(b"=").replace(b"-", b"+").replace(b"_", b"/")
        for shift in range(4):
            piece = run[shift:][:len(run[shift:]) // 4 * 4]
            if key in base64.b64decode(piece):
                found.append("base64")
    return found


def _dechunk(body: bytes) -> bytes:
    out = b""
    while body:
        size, _, body = body.partition(b"\r\n")
        size = int(size.split(b";")[0], 16)
        if size == 0:
            break
        out, body = out + body[:size], body[size + 2:]
    return out


def received(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """A raw response as the role got it: status, headers, and the body unchunked and, should the proxy have
    passed a coding on, decoded as the role could decode it."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    if "chunked" in headers.get("transfer-encoding", ""):
        body = _dechunk(body)
    coding = headers.get("content-encoding", "")
    if coding in ("gzip", "x-gzip"):
        body = gzip.decompress(body)
    elif coding == "deflate":
        body = zlib.decompress(body, -zlib.MAX_WBITS if body[:1] != b"x" else zlib.MAX_WBITS)
    return int(lines[0].split()[1]), headers, body


# ---- the role's client: standard library only, run by the scripted Developer -------------------
CLIENT = r'''
import json, os, shutil, socket, subprocess, sys, time
from urllib.parse import urlsplit

UPSTREAM_PORT = int(sys.argv[2])
MODEL = urlsplit(os.environ["HOH_MODEL_URL"])
TOKEN = os.environ["HOH_EGRESS_TEST_KEY"]
PROXY = urlsplit(os.environ["HTTPS_PROXY"]) if os.environ.get("HTTPS_PROXY") else None


def exchange(host, port, head, body=b"", whole=True):
    """The raw answer: all of it, or (`whole` false: a tunnel stays open) its head."""
    with socket.create_connection((host, port), timeout=60) as s:
        s.sendall(head.encode() + b"\r\n" + body)
        data = b""
        while (whole or b"\r\n\r\n" not in data) and (chunk := s.recv(65536)):
            data += chunk
    return data


def model(path, headers, body=b'{"model": "m", "input": "hi"}'):
    head = f"POST {MODEL.path}/{path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
    return exchange(MODEL.hostname, MODEL.port, head + "".join(f"{k}: {v}\r\n" for k, v in headers.items()), body)


def status(raw):
    return int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.") else 0


def connect(token):
    auth = {} if token is None else {"Proxy-Authorization": "Basic " + __import__("base64").b64encode(
        f"hoh:{token}".encode()).decode()}
    head = f"CONNECT 127.0.0.1:{UPSTREAM_PORT} HTTP/1.1\r\nHost: 127.0.0.1:{UPSTREAM_PORT}\r\n"
    return status(exchange(PROXY.hostname, PROXY.port, head + "".join(f"{k}: {v}\r\n" for k, v in auth.items()),
                           whole=False))


def curl(proxy):
    if not shutil.which("curl"):
        return "no curl"
    done = subprocess.run(["curl", "-sS", "-p", "--noproxy", "", "-x", proxy, "-o", "/dev/null", "-w", "%{http_connect} %{http_code}",
                           f"http://127.0.0.1:{UPSTREAM_PORT}/v1/plain"], capture_output=True, text=True)
    return done.stdout.strip()


def meet_a_stranger():
    """Tell the test where the model route listens, and wait until it has knocked there without the token."""
    with open("stranger-url.tmp", "w") as out:
        out.write(os.environ["HOH_MODEL_URL"])
    os.rename("stranger-url.tmp", "stranger-url.txt")
    for _ in range(2400):
        if os.path.exists("stranger.done"):
            return
        time.sleep(0.05)
    raise SystemExit("the test never knocked")


if sys.argv[1] == "stranger":
    meet_a_stranger()
elif sys.argv[1] == "echo":
    os.makedirs("received", exist_ok=True)
    for form in sys.argv[3:]:
        raw = model(form, {"Authorization": f"Bearer {TOKEN}", "Accept-Encoding": "gzip, deflate, br, zstd"})
        with open(f"received/{form}.raw", "wb") as out:
            out.write(raw)
else:
    captured = open("token.txt").read().strip() if os.path.exists("token.txt") else None
    probes = {"current": status(model("plain", {"Authorization": f"Bearer {TOKEN}"})),
              "current-x-api-key": status(model("plain", {"x-api-key": TOKEN})),
              "none": status(model("plain", {})),
              "made-up": status(model("plain", {"Authorization": "Bearer hoh-" + "x" * 43}))}
    if captured:
        probes["captured"] = status(model("plain", {"Authorization": f"Bearer {captured}"}))
    if PROXY is not None:
        probes |= {"connect-current": connect(PROXY.password), "connect-none": connect(None),
                   "connect-model-token-in-userinfo": connect(TOKEN), "curl-current": curl(os.environ["HTTPS_PROXY"]),
                   "curl-none": curl(f"http://{PROXY.hostname}:{PROXY.port}")}
        if captured:
            probes["connect-captured"] = connect(captured)
            probes["curl-captured"] = curl(f"http://hoh:{captured}@{PROXY.hostname}:{PROXY.port}")
    with open(f"probes-{sys.argv[3]}.json", "w") as out:
        json.dump(probes, out)
    if not captured:
        with open("token.txt", "w") as out:
            out.write(TOKEN)
'''


def _script(port: int, stranger: bool) -> dict:
    script = mini_script(2)
    for loop in (1, 2):
        developer = script["loops"][loop]["developer"]
        steps = [{"write": {"path": "client.py", "content": CLIENT}}]
        if loop == 1:
            steps.append({"run": f"python3 client.py echo {port} {' '.join(READABLE + UNREADABLE)}"})
        steps.append({"run": f"python3 client.py probes {port} {loop} 2> probes-{loop}.err"})
        if loop == 1 and stranger:
            steps.append({"run": f"python3 client.py stranger {port} 2> stranger.err"})
        developer["actions"] = steps + developer["actions"]
    return script


def _attempt_files(ws: Path) -> list[Path]:
    """The files hoh itself keeps of the attempts (the logs, the commands, the transcripts) and the journal."""
    return [*ws.glob("state/loops/*/roles/*/attempt-*/*"), ws / "state" / "journal.jsonl"]


@pytest.mark.parametrize("mode", ["bwrap", "off"])
def test_the_role_never_gets_the_key_back_and_a_token_opens_only_its_own_attempt(mode, upstream, tmp_path,
                                                                                   monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)
    port = upstream.server_port
    (tmp_path / "spec.md").write_text("# Greeter\n\nPrint a greeting.\n")
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(_script(port, stranger=mode == "off"), sort_keys=False,
                                                          width=10**9))
    ws = tmp_path / "ws"
    sets = {"sandbox.mode": mode, "harness.base_url": f"http://127.0.0.1:{port}/v1", "harness.api_key_env": KEY_VAR,
            "sandbox.allow_hosts.developer": json.dumps([f"127.0.0.1:{port}"]), "timeouts.idle_seconds": 120}
    hoh = subprocess.Popen([sys.executable, "-m", "hoh", "build", str(tmp_path / "spec.md"), "--harness", "scripted",
                            "--loops", "2", "-w", str(ws), "-q", *[a for k, v in sets.items() for a in ("--set", f"{k}={v}")]],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stranger = _knock_without_the_token(ws / "project", hoh) if mode == "off" else None
        out, err = hoh.communicate(timeout=300)
    finally:
        hoh.kill()
    assert hoh.returncode == 0, err
    project = ws / "project"
    for loop in (1, 2):
        assert (project / f"probes-{loop}.err").read_text() == "", (project / f"probes-{loop}.err").read_text()

    # Every model request went up with the real key in the token's place, asking for no compression.
    model_calls = [seen for seen in upstream.seen if "authorization" in seen or "x-api-key" in seen]
    assert len(model_calls) == len(READABLE + UNREADABLE) + 2 * 2  # the echoes; the "current" probes of each loop
    assert all(seen.get("authorization", f"Bearer {KEY}") == f"Bearer {KEY}" and seen.get("x-api-key", KEY) == KEY
               and seen["accept-encoding"] == "identity" for seen in model_calls)
    assert not [seen for seen in upstream.seen if TOKEN_RE.search(json.dumps(seen))]  # never the token

    # Nothing the role received gives the key away, decoded any way the role could.
    for form in READABLE:
        code, headers, body = received((project / "received" / f"{form}.raw").read_bytes())
        raw = (project / "received" / f"{form}.raw").read_bytes()
        assert code == 200, (form, raw[:300])
        assert not leaks(raw) and not leaks(body) and not leaks(json.dumps(headers).encode()), (form, leaks(raw + body))
        assert "content-encoding" not in headers, form  # decoded by the proxy, not passed on
    happy = received((project / "received" / "plain.raw").read_bytes())[2]
    assert b"POST /v1/plain " in happy and b'"input": "hi"' in happy  # the request went through, echoed
    assert f"Bearer {'*' * len(KEY)}".encode() in happy  # the key masked at its own length
    headers = received((project / "received" / "headers.raw").read_bytes())[1]
    assert headers["x-echo-auth"] == f"Bearer {'*' * len(KEY)}"
    for form in UNREADABLE:
        code, _, body = received((project / "received" / f"{form}.raw").read_bytes())
        assert code == 502 and b"cannot decode" in body and b"POST" not in body, form

    # The token opens its own attempt only: not loop 2's, not without it, not for another user.
    first, second = (json.loads((project / f"probes-{loop}.json").read_text()) for loop in (1, 2))
    for probes in (first, second):
        assert probes["current"] == probes["current-x-api-key"] == 200
        assert probes["none"] == probes["made-up"] == 401
    assert second["captured"] == 401
    if mode == "off":  # the proxy listens on the machine's loopback: anyone there may knock
        assert stranger == {"none": 401, "made-up": 401}
    if mode == "bwrap":
        for probes in (first, second):
            assert probes["connect-current"] == probes["connect-model-token-in-userinfo"] == 200
            assert probes["connect-none"] == 407
            assert probes["curl-current"] in ("200 200", "no curl") and probes["curl-none"] in ("407 000", "no curl")
        assert second["connect-captured"] == 407 and second["curl-captured"] in ("407 000", "no curl")
    token_one = (project / "token.txt").read_text().strip()
    assert TOKEN_RE.fullmatch(token_one)

    # Each refusal is a line of its attempt's egress log; no file hoh keeps holds a token or the key.
    log = read_log(ws / "state/loops/0002/roles/developer/attempt-1/egress.jsonl")
    refused = [401] * 3 + ([407] * (2 + 2 * (second["curl-none"] != "no curl")) if mode == "bwrap" else [])
    assert sorted(r.status for r in log if r.status in (401, 407)) == refused
    assert all(r.decision is Decision.DENIED for r in log if r.status in (401, 407))
    for path in _attempt_files(ws):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert not TOKEN_RE.search(text) and KEY not in text, path
    for path in ws.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert KEY.encode() not in path.read_bytes(), path


KNOCK = ("import socket, sys; s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60); "
         "s.sendall(b'POST ' + sys.argv[3].encode() + b'/plain HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 0\\r\\n'"
         " + sys.argv[4].encode() + b'\\r\\n'); print(s.recv(100).split(b' ')[1].decode())")


def _knock_without_the_token(project: Path, hoh: subprocess.Popen) -> dict[str, int]:
    """While the Developer waits: the model route knocked at from outside the role without the token (as root:
    as the user nobody), once with none, once with a made-up one."""
    deadline = time.monotonic() + 240
    while not (project / "stranger-url.txt").exists():
        assert hoh.poll() is None and time.monotonic() < deadline, "the Developer never said where the proxy is"
        time.sleep(0.05)
    url = urlsplit((project / "stranger-url.txt").read_text())
    as_nobody = {"user": 65534, "group": 65534, "extra_groups": []} if os.geteuid() == 0 else {}
    python = "/usr/bin/python3" if os.geteuid() == 0 else sys.executable  # one that nobody may run
    statuses = {}
    for name, header in (("none", "X-Other: 1\r\n"), ("made-up", f"Authorization: Bearer hoh-{'x' * 43}\r\n")):
        done = subprocess.run([python, "-I", "-c", KNOCK, url.hostname, str(url.port), url.path, header],
                              capture_output=True, text=True, timeout=60, cwd="/", **as_nobody)
        statuses[name] = int(done.stdout) if done.stdout.strip().isdigit() else done.stderr
    (project / "stranger.done").touch()
    return statuses


def test_a_key_less_endpoint_is_served_only_with_the_token_and_never_gets_it(upstream):
    """No key to add (`base_url` without `api_key_env`): the token still opens the proxy, and is dropped
    before the endpoint."""
    policy = EgressPolicy(upstream=f"http://127.0.0.1:{upstream.server_port}/v1")
    with EgressProxy(policy) as proxy:
        def ask(headers):
            conn = http.client.HTTPConnection("127.0.0.1", proxy.tcp_port, timeout=30)
            conn.request("POST", "/v1/plain", body=b"{}", headers=headers)
            response = conn.getresponse()
            return response.status, response.read()

        assert ask({})[0] == 401 and ask({"Authorization": "Bearer sk-some-key"})[0] == 401
        status, body = ask({"Authorization": f"Bearer {policy.token}"})
    assert status == 200 and "authorization" not in upstream.seen[-1]
    assert policy.token.encode() not in body and len(upstream.seen) == 1


def test_a_token_opens_nothing_once_its_attempt_ended(upstream, tmp_path):
    """Attempt by attempt on one listener address (a container's gateway): the proxy of an attempt ends with
    it, and the next attempt's proxy takes only its own token."""
    one = EgressPolicy(upstream=f"http://127.0.0.1:{upstream.server_port}/v1", credential=KEY)
    with EgressProxy(one, log_path=tmp_path / "one.jsonl") as proxy:
        port = proxy.tcp_port
        assert _status(port, one.token) == 200
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    two = EgressPolicy(upstream=f"http://127.0.0.1:{upstream.server_port}/v1", credential=KEY)
    with EgressProxy(two, log_path=tmp_path / "two.jsonl") as proxy:
        assert _status(proxy.tcp_port, one.token) == 401 and _status(proxy.tcp_port, two.token) == 200
    lines = (tmp_path / "one.jsonl").read_text() + (tmp_path / "two.jsonl").read_text()
    assert one.token not in lines and two.token not in lines and KEY not in lines
    assert [r.status for r in read_log(tmp_path / "two.jsonl")] == [401, 200]


def _status(port: int, token: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/v1/plain", body=b"{}", headers={"x-api-key": token})
    response = conn.getresponse()
    response.read()
    return response.status


ASK_MODEL = '''
import json, os, urllib.request
env = {k: v for k, v in os.environ.items()}
url, token = env.get("HOH_MODEL_URL"), env.get("%s", "")
status = None
if url and "127.0.0.1" in url:
    request = urllib.request.Request(url + "/plain", data=b"{}", headers={"Authorization": "Bearer " + token})
    try:
        status = urllib.request.urlopen(request, timeout=30).status
    except Exception as err:
        status = repr(err)
json.dump({"env": env, "status": status}, open("seen.json", "w"))
''' % KEY_VAR


@pytest.mark.parametrize("network", ["shared", "none"])
def test_a_role_on_the_machine_s_network_or_on_none_holds_no_key(network, upstream, tmp_path, monkeypatch):
    """`sandbox.network: shared` (the machine's network): the model route goes through a proxy on hoh's
    loopback that takes the attempt's token and adds the key; `none` (no way out): no key enters at all."""
    monkeypatch.setenv(KEY_VAR, KEY)
    script = mini_script(1)
    developer = script["loops"][1]["developer"]
    developer["actions"] = [{"write": {"path": "ask.py", "content": ASK_MODEL}}, {"run": "python3 ask.py"},
                            *developer["actions"]]
    (tmp_path / "spec.md").write_text("# Greeter\n\nPrint a greeting.\n")
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script, sort_keys=False, width=10**9))
    ws = tmp_path / "ws"
    sets = {"sandbox.network": network, "harness.base_url": f"http://127.0.0.1:{upstream.server_port}/v1",
            "harness.api_key_env": KEY_VAR}
    built = subprocess.run([sys.executable, "-m", "hoh", "build", str(tmp_path / "spec.md"), "--harness", "scripted",
                            "--loops", "1", "-w", str(ws), "-q", *[a for k, v in sets.items() for a in ("--set", f"{k}={v}")]],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    seen = json.loads((ws / "project" / "seen.json").read_text())
    assert not leaks(json.dumps(seen).encode())
    if network == "shared":
        assert TOKEN_RE.fullmatch(seen["env"][KEY_VAR]), seen["env"][KEY_VAR]
        assert f":{upstream.server_port}/" not in seen["env"]["HOH_MODEL_URL"]  # hoh's proxy, not the endpoint
        assert seen["status"] == 200
        assert upstream.seen[-1].get("authorization") == f"Bearer {KEY}"  # the proxy added the key
    else:
        assert not TOKEN_RE.search(json.dumps(seen["env"])) and seen["env"].get(KEY_VAR, "") != KEY
        assert upstream.seen == []
