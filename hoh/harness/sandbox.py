"""What a role request says about the place its attempt runs in, as the adapter and every place read it: the
jail's view and network (`JailSpec`, `Network`), its limits, and the names a CLI is given for hoh's egress proxy.

The places themselves (this machine's bubblewrap jail, Harbor's environments, the egress proxy) are in
`hoh/envs/`; an adapter only builds its CLI's command for a request and never learns where it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path


class Network(str, Enum):
    """How a jailed role reaches the network (`sandbox.network`)."""

    egress = "egress"
    """Its own network namespace; out only through hoh's egress proxy (the model endpoint, plus the hosts
    `sandbox.allow_hosts` gives that role), every connection logged."""
    none = "none"
    """Its own network namespace and no way out at all (a harness whose model runs in-process)."""
    shared = "shared"
    """The machine's network: everything on loopback and every abstract socket is reachable (opt-out)."""


@dataclass(frozen=True)
class JailSpec:
    """What one role attempt may touch; nothing else of the machine exists inside."""

    writable: tuple[Path, ...] = ()
    """Bound read-write (the project for the Developer, the evidence dir for QA, the role's home)."""
    read_only: tuple[Path, ...] = ()
    """Bound read-only: the role's frozen inputs, the project or candidate it reads, extra tool dirs."""
    hidden: tuple[Path, ...] = ()
    """Empty directories over these, inside something bound (a workspace inside the project)."""
    shown_as: tuple[tuple[Path, Path], ...] = ()
    """(what, where): the directory `what` bound read-only at the path `where` (the Planner's view of
    state/loops, `runtime/loopsview.py`, shown at state/loops)."""
    network: Network = Network.egress
    allow_hosts: tuple[str, ...] = ()
    """Hosts the egress lets this role reach besides its model endpoint."""
    tmp_bytes: int = 1024 * 2**20
    """Size of the private /tmp."""
    egress_socket: Path | None = None
    """hoh's egress proxy socket, bound in at `INSIDE_SOCKET` (set by the adapter when it starts the proxy)."""

    def writes_into(self, tree: Path) -> bool:
        """Whether a role in this jail could change anything under `tree`: a writable bind is the tree, above
        it, or inside it and not inside a hidden dir there (a workspace inside the project, hidden by a tmpfs
        and left out of every scan of the project). A tree neither bound nor under a bind is not in the jail
        at all; a read-only bind cannot be remounted without capabilities (`--cap-drop ALL`)."""
        tree = tree.resolve()
        hidden: list[Path] | None = None  # resolved only when a writable bind lies inside the tree
        for w in (p.resolve() for p in self.writable):
            if tree == w or tree.is_relative_to(w):
                return True
            if w.is_relative_to(tree):
                hidden = [h.resolve() for h in self.hidden] if hidden is None else hidden
                if not any(w.is_relative_to(h) and h.is_relative_to(tree) for h in hidden):
                    return True
        return False


@dataclass(frozen=True)
class Limits:
    processes: int | None = None
    memory_bytes: int | None = None

    def wanted(self) -> dict[str, int]:
        return {k: v for k, v in (("processes", self.processes), ("memory", self.memory_bytes)) if v is not None}


PLACEHOLDER_KEY = "hoh-egress-placeholder-key"
"""The key a CLI is given for a key-less endpoint that no proxy of hoh's stands in front of (Pi, for one,
will not start without some key). Behind the proxy a CLI holds the attempt's token instead (`new_token`)."""
TOKEN_VARIABLE = "HOH_EGRESS_TOKEN"
"""Where a CLI of a key-less endpoint (no `api_key_env`) finds the token it sends as its key to hoh's proxy."""
