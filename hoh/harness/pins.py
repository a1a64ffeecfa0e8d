"""The CLI versions hoh is tested with, read from the adapters' capabilities (their one source).

    python -m hoh.harness.pins          # the npm specs, one line: what .ci/run installs
"""

from __future__ import annotations

from . import registry


def pinned_versions() -> dict[str, str]:
    """Harness name → the version of its CLI hoh is tested with, for every built-in adapter with a CLI."""
    found = {}
    for name in registry.names():
        caps = registry.adapter_class(name).capabilities
        if caps.tested_version and not caps.ships_with_hoh:
            found[name] = caps.tested_version
    return found


def npm_specs() -> list[str]:
    """`package@version` of every built-in adapter's CLI, in the registry's order."""
    return [spec for name in registry.names() if (spec := registry.adapter_class(name).capabilities.npm_spec)]


if __name__ == "__main__":
    print(" ".join(npm_specs()))
