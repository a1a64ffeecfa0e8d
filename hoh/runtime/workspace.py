"""Create and open workspaces. Creation checks every input first and builds the workspace in a
temporary sibling directory that is renamed into place, so a bad input or a crash leaves nothing
half-written."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import HohConfig, dump_config, load_config
from ..errors import StateError, UsageError
from ..fsutil import atomic_write_json, atomic_write_text, load_state, sha256_bytes, sha256_file
from ..harness import registry
from ..paths import WorkspacePaths
from .git import ProjectRepo
from .events import WorkspaceCreated
from .journal import Journal
from .lock import WorkspaceLock

WORKSPACE_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Workspace:
    paths: WorkspacePaths
    config: HohConfig
    identity: dict[str, Any]

    @property
    def repo(self) -> ProjectRepo:
        return ProjectRepo(self.paths.project)


def read_spec(spec_path: Path) -> bytes:
    if not spec_path.is_file():
        raise UsageError(f"spec file {spec_path} not found; pass the path to your spec Markdown file")
    data = spec_path.read_bytes()
    if not data.strip():
        raise UsageError(f"spec file {spec_path} is empty; write what to build in it first")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"spec file {spec_path} is not UTF-8 text") from None
    return data


def find_script(config: HohConfig, spec_path: Path) -> Path | None:
    """The scripted harness needs a script: `harness.script`, else `script.yaml` beside the spec."""
    if config.harness.name != "scripted":
        return None
    script = Path(config.harness.script).expanduser() if config.harness.script else spec_path.parent / "script.yaml"
    if not script.is_file():
        raise UsageError(f"the scripted harness needs a script: {script} not found; "
                         "pass --set harness.script=PATH or put script.yaml beside the spec")
    return script.resolve()


def is_workspace(root: Path) -> bool:
    return (root / "state" / "workspace.json").is_file()


def create_workspace(root: Path, spec_path: Path, config: HohConfig, *, force: bool = False) -> Workspace:
    registry.check_name(config.harness.name)
    spec = read_spec(spec_path)
    script = find_script(config, spec_path)
    root = root.expanduser().resolve()

    if root.exists() and not root.is_dir():
        raise UsageError(f"workspace {root} exists and is not a directory; choose another -w")
    if root.exists() and any(root.iterdir()):
        if not is_workspace(root):
            raise UsageError(f"{root} is not empty and is not a hoh workspace; choose an empty or new -w directory")
        existing = load_state(root / "state" / "workspace.json", ("spec_sha256",), WORKSPACE_SCHEMA_VERSION)
        if existing.get("spec_sha256") == sha256_bytes(spec) and not force:
            raise UsageError(f"workspace {root} already holds a run of this spec; continue it with: hoh resume -w {root}")
        if not force:
            raise UsageError(f"workspace {root} belongs to a different spec; use another -w, or --force to replace it")
    parent = root.parent
    if not parent.exists():
        try:
            parent.mkdir(parents=True)
        except OSError as err:
            raise UsageError(f"cannot create workspace parent {parent}: {err.strerror}") from None
    if not os.access(parent, os.W_OK) or (root.exists() and not os.access(root, os.W_OK)):
        raise UsageError(f"workspace {root} is not writable; choose a directory you can write")

    try:
        staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{root.name}.init-"))
    except OSError as err:
        raise UsageError(f"workspace {root} is not writable ({err.strerror}); choose a directory you can write") from None
    try:
        paths = WorkspacePaths(staging)
        for d in (paths.state, paths.scratch, paths.state / "loops"):
            d.mkdir(parents=True, exist_ok=True)
        paths.spec.write_bytes(spec)
        if script:
            shutil.copyfile(script, paths.script)
            config = config.model_copy(update={"harness": config.harness.model_copy(update={"script": "script.yaml"})})
        atomic_write_text(paths.config, dump_config(config))
        root_commit = ProjectRepo(paths.project).init()
        identity = {"schema_version": WORKSPACE_SCHEMA_VERSION, "spec_sha256": sha256_bytes(spec),
                    "root_commit": root_commit, "created_by": f"hoh {__version__}"}
        atomic_write_json(paths.identity, identity)
        Journal(paths.journal).append(WorkspaceCreated(spec_sha256=identity["spec_sha256"]))
        if root.exists():
            with WorkspaceLock(root / "hoh.lock"):  # never move a workspace from under a running hoh
                _retire(root)
        os.rename(staging, root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return open_workspace(root)


def _retire(root: Path) -> None:
    """--force: keep the replaced run beside the new one rather than deleting anybody's work."""
    n = 1
    while (target := root.parent / f"{root.name}.replaced-{n}").exists():
        n += 1
    os.rename(root, target)


def open_workspace(root: Path) -> Workspace:
    root = root.expanduser().resolve()
    if not is_workspace(root):
        raise UsageError(f"{root} is not a hoh workspace (no state/workspace.json); start one with: hoh build SPEC -w {root}")
    paths = WorkspacePaths(root)
    identity = load_state(paths.identity, ("schema_version", "spec_sha256", "root_commit"), WORKSPACE_SCHEMA_VERSION)
    if not paths.spec.is_file() or sha256_file(paths.spec) != identity["spec_sha256"]:
        raise StateError(f"{paths.spec}: the frozen spec was changed or removed; restore it (sha256 {identity['spec_sha256'][:12]}…)")
    config = load_config(paths.config)
    registry.check_name(config.harness.name)
    return Workspace(paths, config, identity)
