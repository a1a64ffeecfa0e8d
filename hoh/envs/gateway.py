"""hoh's egress proxy for a role in an open container (a bridge network): listening on the environment's gateway.

The CLI gets the proxy's address on the gateway and this attempt's token, which opens the proxy (reachable from
more than this container) only until the attempt ends. A closed container reaches the proxy through a socket
instead (`egress/route.attempt_egress`).
"""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from ..errors import EnvironmentUnavailable
from ..harness.attempt import RoleRequest
from .egress.policy import inside_base_url, proxy_url
from .egress.proxy import EgressPolicy, EgressProxy

if TYPE_CHECKING:
    from ..harness.base import HarnessAdapter


@contextmanager
def through_gateway(adapter: "HarnessAdapter", request: RoleRequest, attempt_dir: Path, gateway: str,
                    upstream: str, name: str) -> Iterator[RoleRequest]:
    hosts = request.jail.allow_hosts if request.jail else ()
    policy = EgressPolicy(upstream=upstream, credential=adapter.api_key(), allow_hosts=tuple(hosts))
    try:
        proxy = EgressProxy(policy, log_path=attempt_dir / "egress.jsonl", tcp_host=gateway)
        proxy.start()
    except OSError as err:
        raise EnvironmentUnavailable(f"--env {name}: hoh's egress proxy cannot listen on the environment's gateway "
                                     f"{gateway} ({err.strerror}); a remote environment cannot reach hoh's proxy") \
            from None
    try:
        yield dataclasses.replace(request, endpoint=inside_base_url(upstream, proxy.tcp_port, gateway),
                                  proxy_url=proxy_url(policy.token, gateway, proxy.tcp_port),
                                  egress_token=policy.token)
    finally:
        proxy.close()
