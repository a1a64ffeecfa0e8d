"""`hoh doctor`: the OS jail here, and which harness CLIs are installed, at which version, with which
sandbox; per harness and role, which layer enforces what."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..config import HarnessConfig
from ..errors import HarnessUnavailable
from ..harness import registry
from ..harness.jail import probe


def jail_report() -> dict[str, Any]:
    problem = probe()
    return {"mode_default": "bwrap", "works": problem is None,
            "status": "works: every role attempt runs in a bubblewrap jail" if problem is None else problem,
            "fix": None if problem is None else "install bubblewrap, or run with --set sandbox.mode=off "
                                                 "(then only the harness's own layer and hoh's guard protect)"}


def layers(adapter, jail_works: bool) -> dict[str, list[str]]:
    """For each role, the layers that stop it writing where it may not, outermost last."""
    jail = "hoh's jail (bwrap)" if jail_works else "no jail here (sandbox.mode=off needed)"
    return {role: [adapter.own_layer[role], jail, "hoh's guard (checked and restored after every attempt)"]
            for role in ("planner", "developer", "qa")}


def diagnose(name: str, check_sandbox: bool = True, jail_works: bool = True) -> dict[str, Any]:
    adapter = registry.create(HarnessConfig(name=name))
    builtin = adapter.executable is None
    version = "built in" if builtin else adapter.installed_version()
    report = {"harness": name, "installed": version is not None, "version": version,
              "tested_version": adapter.tested_version, "usable": True, "problem": None,
              "install": adapter.install_hint, "sandbox": None, "roles": layers(adapter, jail_works)}
    try:
        adapter.check_available()
    except HarnessUnavailable as err:
        report.update(usable=False, problem=str(err))
    if report["installed"] and check_sandbox and not builtin:
        with tempfile.TemporaryDirectory(prefix="hoh-doctor-") as scratch:
            report["sandbox"] = adapter.sandbox_probe(Path(scratch))
    return report


def render(console: Console, jail: dict[str, Any], reports: list[dict[str, Any]]) -> None:
    console.print(f"OS jail: {jail['status']}" + (f" — {jail['fix']}" if jail["fix"] else ""), soft_wrap=True)
    table = Table(show_edge=False)
    for col in ("harness", "installed", "tested", "status", "sandbox"):
        table.add_column(col, overflow="fold")
    for r in reports:
        status = "ok" if r["usable"] else (r["problem"] or "unusable").split(": ", 1)[-1]
        table.add_row(r["harness"], r["version"] or "no", r["tested_version"] or "-", status, r["sandbox"] or "")
    console.print(table)
    console.print("\nwho enforces what, per role (the harness's own layer; then hoh's jail and guard for all):")
    for r in reports:
        own = " · ".join(f"{role}: {chain[0]}" for role, chain in r["roles"].items())
        console.print(f"  {r['harness']}: {own}", soft_wrap=True, highlight=False)
