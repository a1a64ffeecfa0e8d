"""The model endpoint as the task environment sees it: the Docker host's alias, and a reachability probe."""

from __future__ import annotations

import socket
import struct
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ..errors import TaskEnvironmentError

HOST_ALIAS = "host.docker.internal"
"""Docker Desktop's name for the machine running the engine; hoh gives it the same meaning on Linux."""


def default_gateway(route_table: Path = Path("/proc/net/route")) -> str | None:
    """The IPv4 default gateway: in a container on a bridge network, the Docker host."""
    try:
        rows = route_table.read_text().splitlines()[1:]
    except OSError:
        return None
    for row in rows:
        fields = row.split()
        if len(fields) > 3 and fields[1] == "00000000" and int(fields[3], 16) & 0x2:  # RTF_GATEWAY
            return socket.inet_ntoa(struct.pack("<L", int(fields[2], 16)))
    return None


def resolve_base_url(url: str, route_table: Path = Path("/proc/net/route")) -> str:
    """`host.docker.internal` stays as it is where it resolves (Docker Desktop, compose extra_hosts);
    elsewhere it becomes the default gateway, so one URL reaches a server on the host everywhere."""
    parts = urlsplit(url)
    if parts.hostname != HOST_ALIAS:
        return url
    try:
        socket.getaddrinfo(HOST_ALIAS, None)
        return url
    except socket.gaierror:
        pass
    gateway = default_gateway(route_table)
    if gateway is None:
        raise TaskEnvironmentError(f"the model endpoint {url} names {HOST_ALIAS}, but the task environment "
                                   "has no default gateway to reach the host through; give a base_url it can reach")
    netloc = f"{gateway}:{parts.port}" if parts.port else gateway
    return urlunsplit(parts._replace(netloc=netloc))


def check_reachable(url: str, timeout: float = 5.0, given: str | None = None) -> None:
    """Open a TCP connection to the endpoint, or say in one line why the environment cannot
    (`given`: the URL as the user wrote it, when `url` is its resolved form)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TaskEnvironmentError(f"the model endpoint {url!r} is not an http(s) URL; pass e.g. base_url=http://HOST:PORT/v1")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return
    except OSError as err:
        reason = err.strerror or type(err).__name__
    shown = f"{given} ({url} from inside)" if given and given != url else url
    raise TaskEnvironmentError(
        f"the model endpoint {shown} is not reachable from the task environment ({reason}); give a base_url "
        f"the environment can reach (a server on the Docker host: http://{HOST_ALIAS}:PORT/v1, listening on "
        "the host's bridge address) and a task network_mode that allows it")
