"""`hoh doctor`: the OS jail here and, per role, what it can do inside (capabilities, filesystem view,
network, credentials, limits); which harness CLIs are installed, at which version, with which sandbox
and credential path; per harness and role, which layer enforces what."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..config import HarnessConfig, HohConfig
from ..envs.local import jail_etc
from ..envs.local.jail import SYSTEM_DIRS, identity, probe
from ..envs.local.limits import mechanism
from ..errors import HarnessUnavailable
from ..harness import registry
from ..harness.attempt import RoleRequest
from ..harness.capabilities import NO_SANDBOX
from ..harness.registries import registry_hosts
from ..paths import ROLES


def jail_report() -> dict[str, Any]:
    problem = probe()
    return {"mode_default": "bwrap", "works": problem is None,
            "status": "works: every role attempt runs in a bubblewrap jail" if problem is None else problem,
            "fix": None if problem is None else "install bubblewrap, or run with --set sandbox.mode=off "
                                                 "(then only the harness's own layer and hoh's guard protect)",
            "etc": etc_report()}


def etc_report() -> dict[str, Any]:
    """What every jailed role sees of this machine's /etc, and what a rule kept out of it."""
    view = jail_etc.view(SYSTEM_DIRS)
    return {"shown": list(view.shown),
            "kept_out": [{"path": path, "why": why} for path, why in view.left_out],
            "never": f"everything not listed ({jail_etc.NEVER})",
            "rules": "inside what is shown: what others cannot read (a jailed role is root), private keys and "
                     "credentials by name",
            "masked": "any password hash in passwd and group"}


def _network(config: HohConfig, role: str) -> str:
    sandbox, endpoint = config.sandbox, config.harness.base_url
    if sandbox.mode == "off":
        return "the machine's network (no jail)"
    if sandbox.network == "shared":
        return "the machine's network (sandbox.network: shared): loopback and abstract sockets reachable"
    if sandbox.network == "none":
        return "none: its own network namespace, no way out"
    hosts = getattr(sandbox.allow_hosts, role)
    hosts = list(registry_hosts()) if hosts is None else hosts
    # With no harness chosen yet, describe a CLI that talks to a model: every one but hoh's fake does.
    modelless = bool(config.harness.name) and not registry.adapter_class(config.harness.name).capabilities.needs_model
    model = (f"the model endpoint {endpoint}" if endpoint else
             "no model endpoint (the harness runs in-process)" if modelless else "the harness's own login hosts")
    others = ", ".join(hosts) if hosts else "nothing else"
    return f"its own network namespace; out only through hoh's egress proxy: {model}; {others}; every connection logged"


def roles_report(config: HohConfig) -> dict[str, Any]:
    """Per role: what its jail is made of, from this machine and these settings."""
    from ..runtime.jobs import ROLE_VIEWS
    inside = identity() if config.sandbox.mode == "bwrap" else None
    caps = ("none" if inside and int(inside["CapEff"], 16) == 0 else f"CapEff {inside['CapEff']}") if inside else None
    capabilities = (f"{caps} (uid {inside['Uid'].split()[0]}, no_new_privs {inside['NoNewPrivs']})" if inside
                    else "the user's own (no jail)")
    limits = config.sandbox.limits
    how = mechanism()
    system = [str(p) for p in SYSTEM_DIRS if p.exists()] + ["/etc (its allowlist)", "PATH directories", "hoh's Python"]
    return {role: {
        "capabilities": capabilities,
        "filesystem": {**ROLE_VIEWS[role], "system_read_only": system + config.sandbox.read_only_paths,
                       "private": f"/tmp ({limits.tmp_mb} MB tmpfs), /dev/shm; the jail's root, /dev, /sys, "
                                  "/proc/sys read-only"},
        "network": _network(config, role),
        "limits": {"tmp_mb": limits.tmp_mb,
                   "processes": f"{limits.processes} by {how['processes']}" if limits.processes else "none",
                   "memory": f"{limits.memory_mb} MB by {how['memory']}" if limits.memory_mb else "none"},
    } for role in ROLES}


def credential(adapter) -> str:
    """How the CLI is given its model credential, and who can read it."""
    if adapter.config.api_key_env:
        return (f"API key from ${adapter.config.api_key_env}: added by hoh's egress proxy outside the role; "
                "the CLI holds its attempt's token, which opens the proxy only while the attempt runs")
    if adapter.config.base_url:
        return ("none: a key-less endpoint (no --api-key-env); the CLI holds its attempt's token for hoh's proxy, "
                "which drops it before the endpoint")
    request = RoleRequest(role="developer", loop=1, attempt=1, prompt="", workdir=Path("."), access="write",
                          home=Path("HOME"))
    logins = [(source, copy) for source, copy in adapter.logins(request) if source.exists()]
    if not logins:
        return "none found (the CLI's own defaults)" if adapter.capabilities.needs_model else "none needed"
    files = ", ".join(f"{source} → {copy}" for source, copy in logins)
    return (f"login file copied into the role's home ({files}): the CLI can read it; every file of its home is "
            "scrubbed of the login's tokens after each attempt")


def layers(adapter, jail_works: bool) -> dict[str, list[str]]:
    """For each role, the layers that stop it writing where it may not, outermost last."""
    jail = "hoh's jail (bwrap)" if jail_works else "no jail here (sandbox.mode=off needed)"
    return {role: [adapter.capabilities.own_layer[role], jail, "hoh's guard (checked and restored after every attempt)"]
            for role in ("planner", "developer", "qa")}


def diagnose(name: str, check_sandbox: bool = True, jail_works: bool = True,
             config: HarnessConfig | None = None) -> dict[str, Any]:
    adapter = registry.create(config.model_copy(update={"name": name}) if config else HarnessConfig(name=name))
    caps = adapter.capabilities
    version = "built in" if caps.ships_with_hoh else adapter.installed_version()
    report = {"harness": name, "installed": version is not None, "version": version,
              "tested_version": caps.tested_version, "usable": True, "problem": None,
              "install": caps.install_hint, "sandbox": None, "credential": credential(adapter),
              "roles": layers(adapter, jail_works)}
    try:
        adapter.check_available()
    except HarnessUnavailable as err:
        report.update(usable=False, problem=str(err))
    if report["installed"] and check_sandbox and not caps.ships_with_hoh:
        if not caps.own_sandbox:
            report["sandbox"] = NO_SANDBOX
        else:
            with tempfile.TemporaryDirectory(prefix="hoh-doctor-") as scratch:
                report["sandbox"] = adapter.sandbox_probe(Path(scratch))
    return report


INSTALL_WITH = "; install it with: "
"""How a harness's problem names its install command (`HarnessUnavailable`)."""


def render(console: Console, jail: dict[str, Any], reports: list[dict[str, Any]],
           roles: dict[str, Any] | None = None) -> None:
    console.print(f"OS jail: {jail['status']}" + (f" — {jail['fix']}" if jail["fix"] else ""), soft_wrap=True)
    etc = jail["etc"]
    kept = ", ".join(k["path"] for k in etc["kept_out"])
    for label, text in (("/etc shown", ", ".join(etc["shown"])),
                        ("kept out", f"{etc['never']}; {etc['rules']}" + (f" (here: {kept})" if kept else "")
                         + f"; masked: {etc['masked']}")):
        console.print(f"  {label:<12} {text}", soft_wrap=True, highlight=False, markup=False)
    if roles:
        for role, facts in roles.items():
            fs = facts["filesystem"]
            console.print(f"\n{role}:", highlight=False)
            for label, text in (("capabilities", facts["capabilities"]), ("writes", "; ".join(fs["writes"])),
                                ("reads", "; ".join(fs["reads"])),
                                ("and", "read-only " + ", ".join(fs["system_read_only"]) + "; " + fs["private"]),
                                ("network", facts["network"]),
                                ("limits", " · ".join(f"{k} {v}" for k, v in facts["limits"].items()))):
                console.print(f"  {label:<12} {text}", soft_wrap=True, highlight=False)
    table = Table(show_edge=False)
    for col in ("harness", "installed", "tested", "status", "sandbox"):
        table.add_column(col, overflow="fold")
    for r in reports:
        status = "ok" if r["usable"] else (r["problem"] or "unusable").split(": ", 1)[-1]
        # A command in a table cell wraps mid-name at 80 columns: the table says what is wrong, the commands
        # follow below it, one line each, never wrapped (copy and paste them).
        status = status.split(INSTALL_WITH, 1)[0] + (" (or --set harness.check_version=false)"
                                                      if "check_version" in status else "")
        table.add_row(r["harness"], r["version"] or "no", r["tested_version"] or "-", status, r["sandbox"] or "")
    console.print()
    console.print(table)
    missing = [r for r in reports if not r["usable"] and r.get("install") and INSTALL_WITH in (r["problem"] or "")]
    if missing:
        console.print("\nto install:")
        for r in missing:
            console.print(f"  {r['install']}", soft_wrap=True, highlight=False, markup=False)
    console.print("\ncredentials, per harness:")
    for r in reports:
        console.print(f"  {r['harness']}: {r['credential']}", soft_wrap=True, highlight=False)
    console.print("\nwho enforces what, per role (the harness's own layer; then hoh's jail and guard for all):")
    for r in reports:
        own = " · ".join(f"{role}: {chain[0]}" for role, chain in r["roles"].items())
        console.print(f"  {r['harness']}: {own}", soft_wrap=True, highlight=False)


def settings(workspace: Path | None) -> HohConfig:
    """The settings doctor reports on: a workspace's hoh.yaml, else the defaults."""
    if workspace is None:
        return HohConfig()
    from ..config import load_config
    from ..paths import WorkspacePaths
    return load_config(WorkspacePaths(Path(os.path.abspath(workspace))).config)
