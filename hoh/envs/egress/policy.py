"""What a role may reach through hoh's egress, and the log of what it did.

`EgressPolicy` is one role attempt's allowance (the model upstream and its key, the allowed hosts, the
attempt's token); each request or tunnel the proxy in `egress` serves is one `EgressRecord`, a JSON line of
the log `read_log` reads.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import re
import secrets
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .mask import spellings

TOKEN_PREFIX = "hoh-"
INSIDE_PORT = 47613
"""Where the shim listens in the jail; the jail's own network namespace means it cannot clash."""
INSIDE_SOCKET = Path("/run/hoh/egress.sock")
"""Where the proxy's unix socket is bound inside the jail."""

CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "api-key"})
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                        "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"})
_HOST = re.compile(r"[a-z0-9_.-]+|[0-9a-f:.]+")
_REDACTED = "[redacted]"


class Kind(StrEnum):
    """What a log line is about: the model route, a CONNECT tunnel, or plain HTTP (and anything malformed)."""

    MODEL = "model"
    CONNECT = "connect"
    HTTP = "http"


class Decision(StrEnum):
    """Whether the policy let the request through (a 502 was allowed and failed upstream)."""

    ALLOWED = "allowed"
    DENIED = "denied"


def split_hostport(text: str, default_port: int | None = None) -> tuple[str, int | None]:
    """"host", "host:port" or "[v6]:port" as (lower-case host, port or `default_port`); ValueError when malformed."""
    parts = urlsplit("//" + text)
    host = (parts.hostname or "").rstrip(".")
    if not _HOST.fullmatch(host) or "@" in parts.netloc or parts.netloc != text or parts.port == 0:
        raise ValueError(f"not host[:port]: {text!r}")
    return host, parts.port or default_port


def new_token() -> str:
    """A fresh token for one attempt: what its CLI holds in place of the key, and what the proxy asks of every
    request (a token of another attempt, or none, is refused)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def proxy_url(token: str, host: str, port: int) -> str:
    """The HTTPS_PROXY a CLI is given: the token as the password of the URL's userinfo, which curl, pip, npm,
    undici and the CLIs send as `Proxy-Authorization: Basic` on every CONNECT and proxied request."""
    return f"http://hoh:{token}@{host}:{port}"


def inside_base_url(upstream: str, port: int, host: str = "127.0.0.1") -> str:
    """The base URL a CLI is given: the proxy's address as the CLI reaches it plus the upstream's path prefix
    ("https://api.x.com/v1" → "http://127.0.0.1:PORT/v1"), since requests keep their path."""
    return f"http://{host}:{port}{urlsplit(upstream).path.rstrip('/')}"


@dataclass(frozen=True)
class EgressPolicy:
    """Where one role attempt's network may go, the key the proxy adds on the model route, and the token
    every request must carry."""

    upstream: str | None = None
    """The real model base URL ("https://api.openai.com/v1"); None: no model route."""
    credential: str | None = field(default=None, repr=False)
    """The real API key, put where the CLI sent `token`; None: a key-less endpoint."""
    allow_hosts: tuple[str, ...] = ()
    """Reachable by CONNECT and plain-HTTP proxying: "host" (any port), "host:port", "*.host" (its subdomains)."""
    token: str = field(default_factory=new_token, repr=False)
    """The attempt's token: on the model route in a credential header (where the CLI puts its key), on every
    other request in Proxy-Authorization. The proxy serves nothing without it."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "allow_hosts", tuple(self.allow_hosts))
        if self.upstream is not None:
            self.target()
        for entry in self.allow_hosts:
            split_hostport(entry.removeprefix("*."))
        if len(self.token) < 16 or not re.fullmatch(r"[A-Za-z0-9._~-]+", self.token):
            raise ValueError("the egress token must be 16 or more URL-safe characters")

    @cached_property
    def spellings(self) -> tuple[bytes, ...]:
        """The key's spellings an upstream may echo (`mask.spellings`); none without a key."""
        return spellings(self.credential)

    def admits(self, value: str) -> bool:
        """Whether a header value carries the token: alone, after a scheme (`Bearer TOKEN`), or as Basic's
        user or password (a proxy URL's userinfo)."""
        words = value.split()
        if len(words) == 2 and words[0].lower() == "basic":
            try:
                words += base64.b64decode(words[1], validate=True).decode("utf-8").split(":", 1)
            except (binascii.Error, UnicodeDecodeError):
                pass
        token = self.token.encode()
        return any(hmac.compare_digest(word.encode("utf-8", "replace"), token) for word in words)

    def target(self) -> tuple[str, str, int]:
        """The upstream's (scheme, host, port)."""
        parts = urlsplit(self.upstream or "")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the egress upstream must be an http(s) URL, not {self.upstream!r}")
        return parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)

    def allows(self, host: str, port: int) -> bool:
        host = host.lower().rstrip(".")
        for entry in self.allow_hosts:
            wildcard = entry.startswith("*.")
            pattern, want = split_hostport(entry.removeprefix("*."))
            if (host.endswith("." + pattern) if wildcard else host == pattern) and want in (None, port):
                return True
        return False

    def with_credential(self, value: str) -> str | None:
        """A credential header's value as sent on: the token replaced by the key. Without a key (a key-less
        endpoint) a header carrying the token is dropped (None): the endpoint gets what a client without a
        key sends, not a made-up key it might try to check."""
        if self.credential:
            return value.replace(self.token, self.credential)
        return None if self.token in value else value

    def redact(self, text: str) -> str:
        """`text` without the credential (in each of its spellings) and without the token."""
        for spelling in (*self.spellings, self.token.encode()):
            text = text.replace(spelling.decode("utf-8", "replace"), _REDACTED)
        return text


@dataclass(frozen=True)
class EgressRecord:
    """One line of the egress log: one request or one tunnel."""

    time: float
    kind: Kind
    target: str
    """host:port, plus the path without its query on the model route."""
    decision: Decision
    status: int
    """The HTTP status the client got; 0 when it got none (a timeout, a client gone, too many connections)."""
    bytes_up: int
    bytes_down: int
    seconds: float
    method: str = ""
    reason: str = ""
    """Why it was refused or ended early; empty when it went through."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EgressRecord:
        return cls(**{**data, "kind": Kind(data["kind"]), "decision": Decision(data["decision"])})


def read_log(path: Path) -> list[EgressRecord]:
    """The records of an egress log (a connection that sent nothing has none)."""
    return [EgressRecord.from_json(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
