"""The model endpoint as hoh's egress proxy, on this machine, reaches it: a container's name for the host made
this machine's, and the endpoint checked reachable before the first loop (one line when it is not)."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit, urlunsplit

from ..errors import TaskEnvironmentError

HOST_ALIAS = "host.docker.internal"
"""Docker Desktop's name for the machine running the engine: this machine, where hoh's Runtime runs."""


def host_base_url(url: str) -> str:
    """The endpoint as this machine reaches it: `host.docker.internal` (the host, as a container names it) is
    this machine where that name does not resolve here."""
    parts = urlsplit(url)
    if parts.hostname != HOST_ALIAS:
        return url
    try:
        socket.getaddrinfo(HOST_ALIAS, None)
        return url
    except socket.gaierror:
        netloc = f"127.0.0.1:{parts.port}" if parts.port else "127.0.0.1"
        return urlunsplit(parts._replace(netloc=netloc))


def check_reachable(url: str, given: str, timeout: float = 5.0) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TaskEnvironmentError(f"the model endpoint {given!r} is not an http(s) URL; pass e.g. "
                                   "base_url=http://HOST:PORT/v1")
    try:
        with socket.create_connection((parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)),
                                      timeout=timeout):
            return
    except OSError as err:
        reason = err.strerror or type(err).__name__
    shown = f"{given} ({url} here)" if given != url else url
    raise TaskEnvironmentError(f"the model endpoint {shown} is not reachable from this machine ({reason}), where "
                               "hoh's egress proxy forwards the harness's requests to it; give a base_url this "
                               "machine can reach")
