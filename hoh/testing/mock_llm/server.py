"""The HTTP side of the mock: routing, streaming, failure injection, and the `MockLLM` handle.

Endpoints (a `/v1` prefix is optional, so a base URL with or without it works):

* `POST /v1/responses`        Responses API, SSE when `stream: true` (Codex)
* `POST /v1/chat/completions` Chat Completions, SSE when `stream: true` (OpenCode, Pi)
* `POST /v1/messages`         Anthropic Messages, SSE when `stream: true` (Claude Code); its errors
                              are Anthropic-shaped and carry `retry-after` (seconds) as well
* `GET  /v1/models`           a model list
* `POST /__control`           change `Settings` (and `script`) at runtime; answers the state
* `GET  /__state`             the current settings and request count

With `require_key` a model request without a credential header gets a 401; by default the mock is a
key-less endpoint.

Streams use chunked transfer encoding, so a cut (`midstream`) is a transport error for the
client rather than a short but well-formed body. Every model request is logged *before* it
is answered, so a test that has read the response can rely on the log entry being there.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import sys
import threading
import zlib
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from . import chat_api, messages_api, responses_api
from .reqlog import RequestLog, redact_headers
from .script import Script, decide
from .settings import Settings

MODEL_IDS = ("mock-model", "gpt-5.5")
API_MODULES = {"/responses": responses_api, "/chat/completions": chat_api, "/messages": messages_api}
CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "api-key"})
"""Where the OpenAI and Anthropic clients send their key (what `require_key` looks for)."""
ERRORS = {  # fail_mode -> (HTTP status, OpenAI error type)
    "400": (400, "invalid_request_error"),
    "429": (429, "rate_limit_exceeded"),
    "500": (500, "server_error"),
}


class MockLLM:
    """A scripted OpenAI-compatible model server on 127.0.0.1, for tests and for real harness CLIs.

    >>> with MockLLM(script={"developer": {"1": [{"final": "ok"}]}}) as m:  # doctest: +SKIP
    ...     run_cli(base_url=m.base_url)
    ...     m.control(fail_mode="500", fail_count=1, retry_after_ms=50)
    ...     assert m.requests()[-1]["match"]["role"] == "developer"
    """

    def __init__(self, script: Any = None, log_path: str | Path | None = None,
                 host: str = "127.0.0.1", port: int = 0, **settings: Any):
        self.script = Script.load(script)
        self.settings = Settings()
        self.settings.update(**settings)
        self.log = RequestLog(log_path)
        self.host = host
        self._port = port
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, port_file: str | Path | None = None) -> "MockLLM":
        """Bind and serve in a background thread; writes the bound port to `port_file` if given."""
        self._stopping.clear()
        self._server = _Server((self.host, self._port), _Handler)
        self._server.mock = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="mock-llm", daemon=True)
        self._thread.start()
        if port_file:
            _write_atomic(Path(port_file), f"{self.port}\n")
        return self

    def stop(self) -> None:
        """Stop serving and cut open connections (stalled and keep-alive ones too)."""
        self._stopping.set()
        if self._server is None:
            return
        self._server.shutdown()
        self._server.close_all_connections()
        self._server.server_close()
        if self._thread:
            self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> "MockLLM":
        return self.start() if self._server is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("MockLLM is not running")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL to give a client, ending in /v1."""
        return f"{self.url}/v1"

    # -- control -------------------------------------------------------------------------------
    def control(self, **changes: Any) -> dict[str, Any]:
        """Change settings (see `Settings`); `script=` replaces the script. Returns the new state."""
        script = Script.load(changes.pop("script")) if "script" in changes else None
        with self._lock:
            self.settings.update(**changes)  # raises before anything changed on a bad key or value
            if script is not None:
                self.script = script
        return self.state()

    def state(self) -> dict[str, Any]:
        with self._lock:
            return {**self.settings.as_dict(), "requests": len(self.log.entries()),
                    "script_entries": len(self.script.entries)}

    def requests(self, path: str | None = None) -> list[dict[str, Any]]:
        """Logged requests (model requests only), optionally those whose path ends with `path`."""
        entries = self.log.entries()
        return [e for e in entries if path is None or e["path"].endswith(path)]

    def _plan(self, view: Any) -> tuple[str | None, Settings, Any]:
        """Under the lock: consume a failure, snapshot the settings, decide the answer."""
        with self._lock:
            failure = self.settings.take_failure()
            snap = Settings(**self.settings.as_dict())
            script = self.script
        return failure, snap, decide(view, script, final_text=snap.final_text, tool_pref=snap.tool_pref)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    mock: MockLLM

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()

    def track(self, conn: socket.socket, alive: bool) -> None:
        with self._conns_lock:
            (self._conns.add if alive else self._conns.discard)(conn)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return  # clients hang up mid-request on purpose (retries, failure tests): not a server bug
        super().handle_error(request, client_address)

    def close_all_connections(self) -> None:
        with self._conns_lock:
            for conn in self._conns:
                _hard_close(conn)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # needed for chunked streams and keep-alive
    server_version = "hoh-mock-llm/1"
    timeout = 300  # an idle keep-alive connection must not pin a thread forever
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection, True)

    def finish(self) -> None:
        self.server.track(self.connection, False)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # the JSONL log is the record; stderr chatter would drown test output

    # -- routing -------------------------------------------------------------------------------
    def _route(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        return path[3:] if path.startswith("/v1/") else path

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        route = self._route()
        if route == "/__state":
            self._json(200, self.server.mock.state())
        elif route == "/models":
            self._json(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "hoh-mock"} for m in MODEL_IDS]})
        else:
            self._json(404, _error(f"no route GET {route}", "not_found_error"))

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        route = self._route()
        try:
            raw = self._read_body()
        except ValueError as exc:
            self._json(400, _error(str(exc), "invalid_request_error"))
            return
        if route == "/__control":
            try:
                changes = json.loads(raw or b"{}")
                self._json(200, self.server.mock.control(**changes))
            except (ValueError, TypeError) as exc:
                self._json(400, _error(str(exc), "invalid_request_error"))
        elif route in API_MODULES:
            self._model(route, raw)
        else:
            self._json(404, _error(f"no route POST {route}", "not_found_error"))

    # -- model endpoints -----------------------------------------------------------------------
    def _model(self, route: str, raw: bytes) -> None:
        mock = self.server.mock
        api = API_MODULES[route]
        headers, secrets = redact_headers(self.headers.items())
        entry: dict[str, Any] = {"time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                                 "method": "POST", "path": self.path, "headers": headers}
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as exc:
            entry.update(body=raw.decode("utf-8", "replace"), answer={"status": 400, "error": str(exc)})
            mock.log.append(entry, secrets)
            self._json(400, _error(f"invalid JSON body: {exc}", "invalid_request_error"))
            return
        if mock.settings.require_key and not any(name in CREDENTIAL_HEADERS for name in headers):
            entry.update(body=body, answer={"status": 401, "error": "no API key"})
            mock.log.append(entry, secrets)
            message = "mock: no API key given (require_key is on)"
            self._json(401, messages_api.error_body(401, message) if api is messages_api
                       else _error(message, "invalid_api_key"))
            return
        view = api.parse(body, len(raw))
        failure, snap, decision = mock._plan(view)
        desc = decision.describe()
        entry.update(body=body, match={k: desc.pop(k) for k in ("source", "role", "loop", "attempt", "step")})
        entry["answer"] = {"status": int(failure) if failure in ERRORS else 200, "injected": failure,
                           "stream": view.stream, **desc}
        mock.log.append(entry, secrets)

        if failure in ERRORS:
            status, kind = ERRORS[failure]
            extra = {"retry-after-ms": str(snap.retry_after_ms)} if snap.retry_after_ms is not None else {}
            message = f"mock injected HTTP {status}"
            if api is messages_api:
                if snap.retry_after_ms is not None:  # the Anthropic SDK reads whole seconds too
                    extra["retry-after"] = str(-(-snap.retry_after_ms // 1000))
                self._json(status, messages_api.error_body(status, message), extra)
            else:
                self._json(status, _error(message, kind), extra)
            return
        if failure == "close":
            self._abort()
            return
        if view.stream:
            frames = api.sse_frames(view, decision, minimal=snap.minimal_sse)
        else:
            frames = [json.dumps(api.json_body(view, decision)).encode()]
        try:
            self._send_frames(frames, view.stream, failure, snap.stall_seconds, snap.stall_after_frames)
        except OSError:
            self.close_connection = True  # the client went away; nothing left to tell it

    def _send_frames(self, frames: list[bytes], stream: bool, failure: str | None, stall: float,
                     after: int = 0) -> None:
        self.send_response(200)
        if stream:
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(sum(map(len, frames))))
        self.end_headers()
        self.wfile.flush()
        if failure == "stall":
            sent, frames = (frames[:after], frames[after:]) if stream else ([], frames)
            for frame in sent:
                self._write(frame, stream)
            if self.server.mock._stopping.wait(stall):
                self._abort()
                return
        if failure == "midstream":
            first = frames[0] if stream else frames[0][: max(1, len(frames[0]) // 2)]
            self._write(first, stream)
            self._abort()
            return
        for frame in frames:
            self._write(frame, stream)
        if stream:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    def _write(self, data: bytes, chunked: bool) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        self.wfile.flush()

    def _abort(self) -> None:
        """Drop the connection without finishing the response."""
        self.close_connection = True
        _hard_close(self.connection)

    # -- helpers -------------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = self._read_chunked()
        else:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding in ("gzip", "x-gzip"):
            return gzip.decompress(data)
        if encoding == "deflate":
            return zlib.decompress(data)
        if encoding not in ("", "identity"):
            raise ValueError(f"unsupported Content-Encoding {encoding!r}")
        return data

    def _read_chunked(self) -> bytes:
        parts = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()

    def _json(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def _hard_close(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _write_atomic(path: Path, text: str) -> None:
    """Write via rename, so a process polling for the port file never reads it half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
