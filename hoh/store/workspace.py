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
from ..config import HohConfig, apply_overrides, dump_config, load_config
from ..errors import StateError, UsageError
from ..fsutil import atomic_write_json, atomic_write_text, load_state, sha256_bytes
from ..harness import registry
from ..harness.attempt import FrozenInput
from ..paths import WorkspacePaths
from .events import WorkspaceCreated
from .git import History
from .gitrun import GitError, run_git
from .journal import Journal
from .lock import WorkspaceLock, busy_message, lock_held
from .mirror import ProjectMirror
from .readview import WORKSPACE_SCHEMA_VERSION, check_files, identify, is_workspace



@dataclass(frozen=True)
class Workspace:
    paths: WorkspacePaths
    config: HohConfig
    identity: dict[str, Any]

    @property
    def history(self) -> History:
        return History(self.paths.history, self.paths.project)

    @property
    def mirror(self) -> ProjectMirror:
        return ProjectMirror(self.paths.project, self.history, enabled=self.identity.get("mirror", True))


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


DOCKERFILE_NAME = "environment.Dockerfile"
"""The frozen copy of `environment.dockerfile` in the workspace."""


def frozen_inputs(config: HohConfig, spec_path: Path) -> list[FrozenInput]:
    """The files frozen with the spec: what the chosen harness reads (its own hook; none for most) and the
    Dockerfile the roles' environments are built from."""
    inputs = registry.adapter_class(config.harness.name).frozen_inputs(config.harness, spec_path.parent)
    if dockerfile := config.environment.dockerfile:
        source = Path(dockerfile).expanduser()
        if not source.is_file():
            raise UsageError(f"--env-dockerfile {dockerfile}: no such file; give the path of a Dockerfile")
        inputs.append(FrozenInput("environment.dockerfile", source.resolve(), DOCKERFILE_NAME))
    return inputs


def check_project_dir(project: Path, root: Path) -> Path:
    """An existing project dir for `--project`: a writable directory that holds no hoh workspace."""
    project = project.expanduser().resolve()
    if not project.is_dir():
        raise UsageError(f"--project {project} is not a directory; pass an existing project directory "
                         "(or leave --project out to start from an empty one)")
    if not os.access(project, os.W_OK):
        raise UsageError(f"--project {project} is not writable; the Developer writes there")
    if project.is_relative_to(root):
        raise UsageError(f"--project {project} lies inside the workspace {root}; choose a workspace outside it")
    if is_workspace(project) or WorkspacePaths(project).history.exists():
        raise UsageError(f"--project {project} is a hoh workspace, not a project; pass the project directory")
    if (project / ".git").exists() and not (project / ".git" / "HEAD").is_file():
        raise UsageError(f"--project {project}: its .git is not a plain repository (a worktree or submodule "
                         "link?); pass the repository's main directory")
    return project


def create_workspace(root: Path, spec_path: Path, config: HohConfig, *, force: bool = False,
                     project: Path | None = None) -> Workspace:
    registry.check_name(config.harness.name)
    spec = read_spec(spec_path)
    inputs = frozen_inputs(config, spec_path)
    root = root.expanduser().resolve()
    project = check_project_dir(project, root) if project is not None else None

    if root.exists() and not root.is_dir():
        raise UsageError(f"workspace {root} exists and is not a directory; choose another -w")
    if root.exists() and any(root.iterdir()):
        if not is_workspace(root):
            raise UsageError(f"{root} is not empty and is not a hoh workspace; choose an empty or new -w directory")
        if lock_held(root):
            raise UsageError(busy_message(root))  # "use resume" would only be refused while the run is live
        existing = load_state(WorkspacePaths(root).identity, ("spec_sha256",), WORKSPACE_SCHEMA_VERSION)
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
        paths = WorkspacePaths(staging, project)
        for d in (paths.state, paths.scratch, paths.loops, paths.project):
            d.mkdir(parents=True, exist_ok=True)
        paths.spec.write_bytes(spec)
        for frozen in inputs:
            shutil.copyfile(frozen.source, paths.root / frozen.name)
        config = apply_overrides(config, [], {frozen.setting: frozen.name for frozen in inputs})
        atomic_write_text(paths.config, dump_config(config))
        history = History(paths.history, paths.project)
        # A workspace inside the project (`--project . -w hoh-work`) is never part of it.
        root_commit = history.create("hoh: the project as it was (A_0)" if project else "hoh: empty project (A_0)",
                                     exclude=_workspace_patterns(root, project))
        identity = {"schema_version": WORKSPACE_SCHEMA_VERSION, "spec_sha256": sha256_bytes(spec),
                    "root_commit": root_commit, "project_dir": str(project) if project else None,
                    # The project's own .git mirrors the loops when hoh made the project or it had one.
                    "mirror": project is None or (project / ".git").exists(),
                    "created_by": f"hoh {__version__}"}
        atomic_write_json(paths.identity, identity)
        Journal(paths.journal).append(WorkspaceCreated(spec_sha256=identity["spec_sha256"]))
        if root.exists():
            with WorkspaceLock(root / "hoh.lock"):  # never move a workspace from under a running hoh
                _retire(root)
        os.rename(staging, root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    ws = open_workspace(root)
    ws.mirror.publish(root_commit)
    return ws


def _workspace_patterns(root: Path, project: Path | None) -> list[str]:
    """gitignore patterns for a workspace inside the project: itself, its staging and its retired copies."""
    if project is None or not root.is_relative_to(project):
        return []
    parent = root.parent.relative_to(project).as_posix()
    prefix = "" if parent == "." else f"/{parent}"
    return [f"{prefix}/{root.name}/", f"{prefix}/.{root.name}.init-*/", f"{prefix}/{root.name}.replaced-*/"]


def _retire(root: Path) -> None:
    """--force: keep the replaced run beside the new one rather than deleting anybody's work."""
    n = 1
    while (target := root.parent / f"{root.name}.replaced-{n}").exists():
        n += 1
    os.rename(root, target)


def _upgrade_v1(paths: WorkspacePaths, identity: dict[str, Any]) -> dict[str, Any]:
    """A workspace from hoh < 0.2 kept its history in project/.git: copy it to history.git."""
    if not paths.history.exists():
        try:
            run_git(["clone", "-q", "--bare", str(paths.project / ".git"), str(paths.history)], cwd=paths.root)
            run_git(["--git-dir", str(paths.history), "fetch", "-q", str(paths.project / ".git"),
                     "+refs/tags/*:refs/tags/*", "+HEAD:refs/heads/main"], cwd=paths.root)
        except GitError as err:
            raise StateError(f"{paths.root}: cannot upgrade this workspace's history ({err}); nothing was changed")
    upgraded = {**identity, "schema_version": WORKSPACE_SCHEMA_VERSION, "project_dir": None}
    atomic_write_json(paths.identity, upgraded)
    return upgraded


def require_writable(ws: Workspace, command: str) -> None:
    """A command that writes the workspace refuses a read-only one up front, in one line, before it takes the
    lock or changes anything (a read-only copy is still fine for status, show, replay and --verify)."""
    paths = ws.paths
    blocked = [p for p in (paths.root, paths.state, paths.journal, paths.history) if p.exists()
               and not os.access(p, os.W_OK)]
    if blocked:
        what = "its directory" if blocked[0] == paths.root else paths.rel(blocked[0])
        raise UsageError(f"workspace {paths.root} is read-only ({what} is not writable) and {command} writes to it; "
                         f"make it writable (chmod -R u+w {paths.root}) or work on a copy")


def open_workspace(root: Path) -> Workspace:
    root = root.expanduser().resolve()
    paths, identity = identify(root)
    if identity["schema_version"] < 2:
        identity = _upgrade_v1(paths, identity)
    check_files(paths, identity)  # the same checks as `open_for_reading`'s, which skips the config's validation
    config = load_config(paths.config)
    registry.check_name(config.harness.name)
    return Workspace(paths, config, identity)
