"""One artifact per finished loop, and putting a frozen candidate back into the task's workdir.

An artifact is the candidate's whole tree as a tar (`git archive` of its commit: file modes and
symlinks kept, nothing of the history) beside a small JSON identity, so a later grader can
replay exactly what loop t froze into a fresh environment.
"""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_bytes, atomic_write_json, load_state
from ..paths import WorkspacePaths
from ..runtime.git import ProjectRepo

CANDIDATE_ARTIFACT_SCHEMA_VERSION = 1
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def frozen_candidate(ws: WorkspacePaths, t: int) -> dict[str, Any]:
    return load_state(ws.loop(t).candidate, ("schema_version", "loop", "candidate_id", "commit", "tree"))


def export_candidate(ws: WorkspacePaths, t: int, loop_status: str, workdir: Path, dest: Path) -> dict[str, Any]:
    """Write loop t's candidate.tar and candidate.json into `dest`; the JSON goes last, so a
    candidate.json on disk always has its tar beside it. `workdir` is where the tree belongs."""
    candidate = frozen_candidate(ws, t)
    repo = ProjectRepo(ws.project)
    if candidate["tree"] == EMPTY_TREE:  # git archive of an empty tree is no tar at all
        buffer = io.BytesIO()
        tarfile.open(fileobj=buffer, mode="w").close()
        data = buffer.getvalue()
    else:
        data = repo.git("archive", "--format=tar", candidate["commit"], binary=True)
    atomic_write_bytes(dest / "candidate.tar", data)
    record = {"schema_version": CANDIDATE_ARTIFACT_SCHEMA_VERSION, "loop": t, "status": loop_status,
              **{k: candidate[k] for k in ("candidate_id", "commit", "tree", "parent")}, "workdir": str(workdir)}
    atomic_write_json(dest / "candidate.json", record)
    return record


def restore_workdir(ws: WorkspacePaths, commit: str, workdir: Path) -> None:
    """Make the workdir exactly `commit`'s tree: whatever a cut-off role left there goes. The
    workdir's own `.git` (a task's repository) is never hoh's to remove."""
    workdir.mkdir(parents=True, exist_ok=True)
    for child in workdir.iterdir():
        if child.name == ".git":
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    ProjectRepo(ws.project).export(commit, workdir)
