"""A third party's harness adapter, outside hoh: chosen as `--harness acme_harness:AcmeAdapter` with this
directory on PYTHONPATH. Its "CLI" is hoh's shipped scripted agent (so a loop runs without a model); what
is its own is its name, its declared capabilities and a variable it gives the CLI, which the attempt's
command.json records."""

from __future__ import annotations

from hoh.harness.base import Capabilities, RoleRequest
from hoh.harness.scripted import ScriptedAdapter


class AcmeAdapter(ScriptedAdapter):
    name = "acme"
    capabilities = Capabilities(needs_model=False)

    def env(self, request: RoleRequest) -> dict[str, str]:
        env = super().env(request)
        env["ACME_ADAPTER"] = "1"
        return env


class NotAnAdapter:
    """Importable, but no HarnessAdapter: the registry must refuse it."""
