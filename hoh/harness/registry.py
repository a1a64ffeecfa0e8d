"""Short harness names → adapter classes, imported only when chosen."""

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


def names() -> list[str]:
    return sorted(ADAPTERS)


def check_name(name: str) -> None:
    if name not in ADAPTERS:
        raise UsageError(f"unknown harness '{name}'; choose one of: {', '.join(names())}")


def adapter_class(name: str) -> type[HarnessAdapter]:
    check_name(name)
    module, _, attr = ADAPTERS[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def create(config: HarnessConfig) -> HarnessAdapter:
    return adapter_class(config.name)(config)
