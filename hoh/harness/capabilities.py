"""What an adapter declares about its CLI, in one object: how it is installed and at which version,
what it reports, what it needs and what it enforces itself. `hoh doctor`, the checks before a run
(`runtime/setup.py`), the price check of a cost budget, the Harbor installer and the CI's npm pins
(`pins.py`) all read it from here."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping

from .process import call, inherited


class CostReport(str, Enum):
    """Whether a CLI's runs carry their own cost figure, and whether that figure is a real price."""

    when_given = "when_given"
    """A cost it reports is real, but runs need not report one (hoh prices the tokens then)."""
    always = "always"
    """Every run reports its cost, from the CLI's own price list."""
    unless_unpriced_endpoint = "unless_unpriced_endpoint"
    """Every run reports its cost, except that on a `base_url` without `price` the CLI knows no price and
    reports 0, which hoh must not take for a real figure."""


NO_OWN_LAYER = {"planner": "none", "developer": "none", "qa": "none"}
NO_SANDBOX = "none: the harness has no sandbox; hoh's fingerprint guard still reverts forbidden writes"
"""`hoh doctor`'s sandbox verdict for a CLI without `own_sandbox`."""


@dataclass(frozen=True)
class Capabilities:
    """One CLI's declared facts (Harbor's `AgentCapabilities`); a class attribute of each adapter."""

    executable: str | None = None
    """The CLI's usual command name; None for a harness that ships inside hoh (nothing to install)."""
    npm_package: str | None = None
    tested_version: str | None = None
    """The version hoh is tested with: what `check_version` asks for, what CI and doctor install."""
    resume: bool = False
    """Can continue a session (`resume_session`), so a schema re-ask keeps the role's context."""
    needs_model: bool = True
    """Talks to a model (an endpoint or the vendor's login); False for a model-free fake."""
    own_sandbox: bool = False
    """Has a sandbox of its own, which `hoh doctor` probes (the adapter's `sandbox_probe`)."""
    cost: CostReport = CostReport.when_given
    login_hosts: tuple[str, ...] = ()
    """The vendor's hosts the CLI reaches with its own login (no `base_url`), through hoh's egress."""
    default_api_url: str | None = None
    """The vendor's API the CLI uses with an API key and no `base_url`: hoh's egress proxy stands in front
    of it, so the key stays outside the role. None: such a CLI needs `base_url` for an API key."""
    own_layer: Mapping[str, str] = field(default_factory=lambda: dict(NO_OWN_LAYER))
    """What the CLI itself enforces for each role (its sandbox, permission modes, tool lists), as hoh uses
    it; `hoh doctor` shows it beside hoh's jail and guard."""

    @property
    def ships_with_hoh(self) -> bool:
        """Nothing to install or version-check: the harness is part of hoh's package."""
        return self.executable is None

    @property
    def npm_spec(self) -> str | None:
        """`package@version`, what `npm install` is given; None for a harness not on npm."""
        return f"{self.npm_package}@{self.tested_version}" if self.npm_package and self.tested_version else None

    @property
    def install_hint(self) -> str:
        return f"npm install -g {self.npm_spec}" if self.npm_spec else "reinstall hoh"


def installed_version(command: str) -> str | None:
    """The version a CLI prints for `--version`, or None when it cannot be run."""
    path = shutil.which(command)
    if path is None:
        return None
    try:
        proc = call([path, "--version"], env=inherited("PATH", "HOME", "LANG"), timeout=30)
    except OSError:
        return None
    match = re.search(r"\d+\.\d+\.\d+", proc.stdout.decode(errors="replace") + proc.stderr)
    return match.group(0) if proc.ok and match else None
