"""Harness names → adapter classes, imported only when chosen: a short name of hoh's own, or a third
party's `package.module:Class` (a `HarnessAdapter` subclass importable here), so a new CLI needs no edit
of hoh."""

from __future__ import annotations

import importlib

from ..config import HarnessConfig
from ..errors import UsageError
from .base import HarnessAdapter

ADAPTERS: dict[str, str] = {
    "scripted": "hoh.harness.scripted:ScriptedAdapter",
    "codex": "hoh.harness.codex:CodexAdapter",
    "opencode": "hoh.harness.opencode:OpenCodeAdapter",
    "pi": "hoh.harness.pi:PiAdapter",
    "claude": "hoh.harness.claude:ClaudeAdapter",
}
THIRD_PARTY = "package.module:Class"


def names() -> list[str]:
    return sorted(ADAPTERS)


def choices() -> str:
    return f"{', '.join(names())}, or a third party's {THIRD_PARTY}"


def check_name(name: str | None) -> None:
    """Raise UsageError unless `name` chooses an adapter class (importing a third party's module)."""
    adapter_class(name)


def adapter_class(name: str | None) -> type[HarnessAdapter]:
    if not name:
        raise UsageError(f"no harness chosen: pass --harness NAME or set harness.name in hoh.yaml; choose one of: "
                         f"{choices()} (`hoh doctor` shows which are installed)")
    path = ADAPTERS.get(name) or (name if ":" in name else None)
    if path is None:
        raise UsageError(f"unknown harness '{name}'; choose one of: {choices()}")
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # noqa: BLE001 - a third party's module may fail in any way; say which and why
        raise UsageError(f"harness '{name}': cannot import module '{module_name}' ({type(err).__name__}: {err}); "
                         "install its package or put it on PYTHONPATH") from None
    found = getattr(module, attr, None) if attr.isidentifier() else None
    if found is None:
        raise UsageError(f"harness '{name}': module '{module_name}' has no class '{attr}'; name the adapter class "
                         f"as {THIRD_PARTY}")
    if not (isinstance(found, type) and issubclass(found, HarnessAdapter)) or not isinstance(
            getattr(found, "name", None), str):
        raise UsageError(f"harness '{name}': {attr} is not a harness adapter; it must subclass "
                         "hoh.harness.base.HarnessAdapter and set `name`")
    return found


def create(config: HarnessConfig) -> HarnessAdapter:
    return adapter_class(config.name)(config)
