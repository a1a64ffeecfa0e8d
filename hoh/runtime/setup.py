"""Before a run starts: each role's harness adapter, checked once per harness, the settings a resume
changes (`hoh resume --set`), validated and checked before hoh.yaml is rewritten, and the workspace's
housekeeping (what a kill left behind; history.git's loose objects packed)."""

from __future__ import annotations

import dataclasses
import logging

from ..config import HohConfig, apply_overrides, dump_config, role_harness
from ..envs.local.jail import require_jail
from ..errors import HarnessUnavailable, StateError, UsageError
from ..fsutil import atomic_write_text, remove_temp_files
from ..harness import registry
from ..harness.base import HarnessAdapter
from ..harness.sandbox import Limits
from ..paths import ROLES
from ..store.gitrun import GitError
from ..store.journal import RunHistory
from ..store.seal import SealedState
from ..store.workspace import Workspace


def _key(config: HohConfig, role: str) -> str:
    """The setting that chose this role's harness, for error messages."""
    override = getattr(config.roles, role)
    return f"roles.{role}.harness" if override is not None and override.harness is not None else "harness.name"


def role_adapters(config: HohConfig) -> dict[str, HarnessAdapter]:
    """One adapter per role (`harness.*` with `roles.<role>.*` over it), nothing checked."""
    adapters = {}
    for role in ROLES:
        harness = role_harness(config, role)
        try:
            registry.check_name(harness.name)
        except UsageError as err:
            raise UsageError(f"{_key(config, role)}: {err}") from None
        adapters[role] = registry.create(harness)
    return adapters


def check_adapters(config: HohConfig, adapters: dict[str, HarnessAdapter]) -> None:
    """Every role's CLI is installed and usable (each distinct one checked once), and a cost budget can be
    kept: every role's cost is known (its CLI's own figure, a configured price, or the price table)."""
    checked: set[tuple[str, str | None]] = set()
    for role, adapter in adapters.items():
        # In an environment (`--env`) the CLI runs there, installed by hoh at its pinned version
        # (envs/install.py): this machine need not have it.
        if not config.environment.local and not adapter.config.command:
            continue
        if (adapter.name, adapter.config.command) in checked:
            continue
        checked.add((adapter.name, adapter.config.command))
        key = _key(config, role)
        try:
            adapter.check_available()
        except HarnessUnavailable as err:
            raise HarnessUnavailable(str(err) if key == "harness.name" else f"{key}: {err}") from None
    for role, adapter in adapters.items():
        jailed_egress = config.sandbox.mode == "bwrap" and config.sandbox.network == "egress"
        if not jailed_egress or not adapter.capabilities.needs_model or adapter.upstream() is not None:
            continue
        if adapter.config.api_key_env:
            raise UsageError(f"{_key(config, role)}: {adapter.name} with an API key needs a base URL here: the key "
                             "stays outside the jail only behind hoh's egress proxy, which must know where to send it; "
                             "set --base-url (the provider's API, e.g. https://…/v1), or --set sandbox.network=shared")
        if not adapter.capabilities.login_hosts and not getattr(config.sandbox.allow_hosts, role):
            raise UsageError(f"{_key(config, role)}: {adapter.name} with its own login reaches its provider directly, "
                             "which a role's own network namespace does not allow; give --base-url with --api-key-env "
                             f"(hoh's proxy adds the key), or list the provider's hosts in sandbox.allow_hosts.{role}, "
                             "or --set sandbox.network=shared")
    if config.budget.cost_usd is None:
        return
    for role, adapter in adapters.items():
        if not adapter.can_price():
            where = f"roles.{role}" if getattr(config.roles, role) is not None else "harness"
            model = f"model '{adapter.config.model}'" if adapter.config.model else f"{adapter.name}'s default model"
            raise UsageError(f"budget.cost_usd: the {role} runs {model}, which has no known price; set "
                             f"{where}.price (USD per million tokens) or a model the price table knows")


def prepare_adapters(config: HohConfig) -> dict[str, HarnessAdapter]:
    adapters = role_adapters(config)
    check_adapters(config, adapters)
    return adapters


def reconfigure(workspace: Workspace, overrides: list[str]) -> tuple[Workspace, dict[str, HarnessAdapter]]:
    """Apply `--set` overrides to the workspace's hoh.yaml: validated and checked first (nothing is written
    on a bad value or a missing harness), then written atomically."""
    config = apply_overrides(workspace.config, overrides)
    adapters = prepare_adapters(config)
    if config.sandbox.mode == "bwrap" and config.environment.local:
        require_jail()
    atomic_write_text(workspace.paths.config, dump_config(config))
    return dataclasses.replace(workspace, config=config), adapters


def check_sealed_state(ws: Workspace, history: RunHistory) -> None:
    """On every start: finished loops are sealed (a crash may have come between), and every sealed
    file still has the content it was sealed with (re-hashed, no stat cache trusted)."""
    sealed = SealedState(ws.history, ws.paths.state)
    done = set(sealed.sealed_loops())
    for t in sorted(t for t, stats in history.loops.items() if stats.status.finished and t not in done):
        sealed.seal(t)
    if tampered := sealed.verify(sealed.open_loops()):
        shown = ", ".join(f"{kind} {ws.paths.state / rel}" for kind, _, rel in (c.partition(" ") for c in tampered[:3]))
        raise StateError(f"state of a finished loop was changed after it was sealed ({shown}"
                         f"{' …' if len(tampered) > 3 else ''}); put it back with: "
                         f"hoh status -w {ws.paths.root} --verify --repair")


def clear_temp_files(ws: Workspace) -> None:
    """What a kill -9 mid-write leaves: hoh's temp files in the workspace and its commit-message files in
    history.git (the locks of both repositories are cleared by `clear_stale_locks`)."""
    remove_temp_files(ws.paths.state)
    for stray in [*ws.paths.root.glob(".*.tmp"), *ws.paths.history.glob("tmp*.msg"),
                  ws.paths.project / ".git" / "index.hoh-copy"]:
        stray.unlink(missing_ok=True)


log = logging.getLogger("hoh.setup")
PACK_LOOSE_AFTER = 4000
"""Loose objects in history.git past which a session starts by packing them (about 200 loops' worth). hoh writes
history.git with plumbing only, which never packs: a run of days would keep tens of thousands of small files."""


def pack_history(ws: Workspace) -> bool:
    """Pack history.git's loose objects once there are PACK_LOOSE_AFTER of them: at a session's start, before
    any role runs. `repack -d` packs what its refs reach and removes only loose copies of what is now packed
    (anything else stays as it is); `-n` leaves info/ alone. A big file (a model, a dataset) is stored whole, never
    compared with others for deltas, so the pack's memory stays bounded. Whether it packed: housekeeping that
    fails (a full disk) is logged, and the run goes on with its objects loose."""
    try:
        counts = dict(line.split(": ", 1) for line in ws.history.git("count-objects", "-v").splitlines()
                      if ": " in line)
        if int(counts.get("count", 0)) < PACK_LOOSE_AFTER:
            return False
        ws.history.git("-c", "core.bigFileThreshold=32m", "-c", "pack.windowMemory=128m", "repack", "-d", "-q", "-n")
        return True
    except (GitError, ValueError) as err:
        log.warning("history.git left unpacked: %s", err)
        return False


def role_limits(config) -> Limits:
    limits = config.sandbox.limits
    return Limits(limits.processes, limits.memory_mb * 2**20 if limits.memory_mb else None)
