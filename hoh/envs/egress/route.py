"""How one role attempt reaches its model without holding its key: hoh's egress proxy, started for the
attempt, and the endpoint, token and proxy variables the CLI is given instead.

- Jailed with `sandbox.network: egress`: the proxy listens on a unix socket that the jail binds in at
  `INSIDE_SOCKET`; the CLI talks to `http://127.0.0.1:INSIDE_PORT/…` on the jail's own loopback (the
  forwarder of `shim.py`), other hosts only through the proxy's allowlist (HTTPS_PROXY).
- Unjailed (`sandbox.mode: off`), or jailed on the machine's network (`sandbox.network: shared`), with an
  endpoint: the proxy listens on hoh's own loopback, so the key still never enters the CLI's environment, its
  files or its transcripts.
- Otherwise (no endpoint, or `sandbox.network: none`, where nothing could be reached): nothing to start, and
  the CLI gets no key (`HarnessAdapter.forward_api_key`).

The proxy serves only requests that carry the attempt's token (`RoleRequest.egress_token`, in the CLI's key
variable and in the proxy URL's userinfo), and stops when the attempt ends: a token captured in one attempt
opens nothing in the next. Every connection the role makes through the proxy is logged to the attempt's
`egress.jsonl`.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from ...fsutil import remove_dead_process_dirs
from ...harness.sandbox import Network
from .proxy import INSIDE_PORT, INSIDE_SOCKET, EgressPolicy, EgressProxy, inside_base_url, proxy_url

if TYPE_CHECKING:
    from ...harness.attempt import RoleRequest
    from ...harness.base import HarnessAdapter

SHIM = Path(__file__).with_name("shim.py")
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
SOCKET_PREFIX = "hoh-egress-"


def socket_dir() -> Path:
    """A short directory of hoh's for the socket (AF_UNIX paths must stay under 108 bytes)."""
    base = tempfile.gettempdir()
    base = base if len(base) < 60 else "/tmp"
    remove_dead_process_dirs(base, SOCKET_PREFIX)
    return Path(tempfile.mkdtemp(prefix=f"{SOCKET_PREFIX}{os.getpid()}-", dir=base))


@contextmanager
def attempt_egress(adapter: "HarnessAdapter", request: "RoleRequest", attempt_dir: Path,
                   listen_in: Path | None = None) -> Iterator["RoleRequest"]:
    """The request as the CLI must see it while hoh's proxy for this attempt runs. `listen_in`: the directory
    whose `egress.sock` a jailed role reaches (a closed environment's, bound into it), else one of the attempt's."""
    jail, upstream = request.jail, adapter.upstream()
    jailed = jail is not None and jail.network is Network.egress
    # Unjailed, or jailed on the machine's own network: the model route through a proxy on hoh's loopback.
    on_loopback = bool(upstream) and (jail is None or jail.network is Network.shared)
    if not jailed and not on_loopback:
        yield request
        return
    hosts = (*jail.allow_hosts, *([] if upstream else adapter.capabilities.login_hosts)) if jailed else ()
    policy = EgressPolicy(upstream=upstream, credential=adapter.api_key(), allow_hosts=tuple(hosts))
    log = attempt_dir / "egress.jsonl"
    if not jailed:
        with EgressProxy(policy, log_path=log) as proxy:
            yield replace(request, endpoint=inside_base_url(upstream, proxy.tcp_port), egress_token=policy.token)
        return
    directory = listen_in or socket_dir()
    try:
        with EgressProxy(policy, unix_path=directory / INSIDE_SOCKET.name, log_path=log) as proxy:
            endpoint = inside_base_url(upstream, INSIDE_PORT) if upstream else None
            yield replace(request, endpoint=endpoint, proxy_url=proxy_url(policy.token, "127.0.0.1", INSIDE_PORT),
                          egress_token=policy.token, jail=replace(jail, egress_socket=proxy.unix_path))
    finally:
        if listen_in is None:
            shutil.rmtree(directory, ignore_errors=True)


def shim_argv(argv: list[str]) -> list[str]:
    """Start the jail's loopback forwarder to hoh's socket, then become the CLI (same pid, pipes, exit code).
    Run as a script in isolated mode: nothing of the role's environment reaches the interpreter."""
    return [sys.executable, "-I", str(SHIM), "--listen", f"127.0.0.1:{INSIDE_PORT}", "--socket", str(INSIDE_SOCKET),
            "--", *argv]


def proxy_env(proxy_url: str) -> dict[str, str]:
    """Where a CLI and the tools it runs send everything that is not the model endpoint."""
    env = {var: proxy_url for var in PROXY_VARS}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env
