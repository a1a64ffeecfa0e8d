"""One artifact per finished loop, and putting a frozen candidate back into the task's workdir.

An artifact is the candidate's whole tree as a tar (`git archive` of its commit in the
workspace's history: file modes and symlinks kept, no history) beside a small JSON identity, so a
later grader can replay exactly what loop t froze into a fresh environment.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_bytes, atomic_write_json
from ..paths import TaskRunPaths
from ..records import Candidate, read_candidate
from ..store.git import EMPTY_TREE
from ..store.workspace import Workspace

CANDIDATE_ARTIFACT_SCHEMA_VERSION = 1


def frozen_candidate(ws: Workspace, t: int) -> Candidate:
    return read_candidate(ws.paths.loop(t).candidate)


def export_candidate(ws: Workspace, t: int, loop_status: str, artifacts: TaskRunPaths) -> dict[str, Any]:
    """Write loop t's candidate.tar and candidate.json among the task run's artifacts; the JSON goes last, so a
    candidate.json on disk always has its tar beside it."""
    candidate = frozen_candidate(ws, t)
    if candidate.tree == EMPTY_TREE:  # git archive of an empty tree is no tar at all
        buffer = io.BytesIO()
        tarfile.open(fileobj=buffer, mode="w").close()
        data = buffer.getvalue()
    else:
        data = ws.history.git("archive", "--format=tar", candidate.commit, binary=True)
    atomic_write_bytes(Path(artifacts.candidate_tar(t)), data)
    record = {"schema_version": CANDIDATE_ARTIFACT_SCHEMA_VERSION, "loop": t, "status": loop_status,
              "candidate_id": candidate.candidate_id, "commit": candidate.commit, "tree": candidate.tree,
              "parent": candidate.parent,
              "workdir": str(ws.paths.project)}
    atomic_write_json(Path(artifacts.candidate_record(t)), record)
    return record


def restore_workdir(ws: Workspace, commit: str, *, publish: bool) -> None:
    """Make the workdir `commit`'s tree again, whatever a cut-off role left there (ignored files and
    the project's own .git stay, as hoh always keeps them); `publish` points the project's .git there too."""
    ws.history.reset_to(commit)
    if publish:
        ws.mirror.publish(commit)
