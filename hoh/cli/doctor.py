"""`hoh doctor`: which harness CLIs are installed here, at which version, with which sandbox."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..config import HarnessConfig
from ..errors import HarnessUnavailable
from ..harness import registry


def diagnose(name: str, check_sandbox: bool = True) -> dict[str, Any]:
    adapter = registry.create(HarnessConfig(name=name))
    builtin = adapter.executable is None
    version = "built in" if builtin else adapter.installed_version()
    report = {"harness": name, "installed": version is not None, "version": version,
              "tested_version": adapter.tested_version, "usable": True, "problem": None,
              "install": adapter.install_hint, "sandbox": None}
    try:
        adapter.check_available()
    except HarnessUnavailable as err:
        report.update(usable=False, problem=str(err))
    if report["installed"] and check_sandbox and not builtin:
        with tempfile.TemporaryDirectory(prefix="hoh-doctor-") as scratch:
            report["sandbox"] = adapter.sandbox_probe(Path(scratch))
    return report


def render(console: Console, reports: list[dict[str, Any]]) -> None:
    table = Table(show_edge=False)
    for col in ("harness", "installed", "tested", "status", "sandbox"):
        table.add_column(col, overflow="fold")
    for r in reports:
        status = "ok" if r["usable"] else (r["problem"] or "unusable").split(": ", 1)[-1]
        table.add_row(r["harness"], r["version"] or "no", r["tested_version"] or "-", status, r["sandbox"] or "")
    console.print(table)
