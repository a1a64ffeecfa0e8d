"""What hoh's Harbor agent keeps of every finished loop, and the project put back to a frozen candidate.

A loop's candidate is exported as its whole tree (`git archive` of its commit in the workspace's history:
file modes and symlinks kept, no history) beside a small JSON identity, so a later grader can replay exactly
what loop t froze into a fresh environment (`CandidateAgent`, hoh bench's per-loop grades).
"""

from __future__ import annotations

import io
import tarfile
from typing import Any

from .. import api
from ..fsutil import atomic_write_bytes, atomic_write_json
from ..paths import AgentRunPaths
from ..records import Candidate, read_candidate
from ..store.git import EMPTY_TREE
from ..store.journal import Journal, RunHistory
from ..store.workspace import Workspace

CANDIDATE_ARTIFACT_SCHEMA_VERSION = 1


def frozen_candidate(ws: Workspace, t: int) -> Candidate:
    return read_candidate(ws.paths.loop(t).candidate)


def export_candidate(ws: Workspace, t: int, loop_status: str, paths: AgentRunPaths, workdir: str) -> dict[str, Any]:
    """Write loop t's candidate.tar and candidate.json; the JSON goes last, so a candidate.json on disk always has
    its tar beside it. `workdir`: where the task wants the project (the candidate's place when it is graded)."""
    candidate = frozen_candidate(ws, t)
    if candidate.tree == EMPTY_TREE:  # git archive of an empty tree is no tar at all
        buffer = io.BytesIO()
        tarfile.open(fileobj=buffer, mode="w").close()
        data = buffer.getvalue()
    else:
        data = ws.history.git("archive", "--format=tar", candidate.commit, binary=True)
    atomic_write_bytes(paths.candidate_tar(t), data)
    record = {"schema_version": CANDIDATE_ARTIFACT_SCHEMA_VERSION, "loop": t, "status": loop_status,
              "candidate_id": candidate.candidate_id, "commit": candidate.commit, "tree": candidate.tree,
              "parent": candidate.parent, "workdir": workdir}
    atomic_write_json(paths.candidate_record(t), record)
    return record


def finished_loops(ws: Workspace) -> int:
    return RunHistory.read(Journal(ws.paths.journal)).last_finished_loop


def restore_project(ws: Workspace) -> int | None:
    """Make the project the last finished loop's candidate again, whatever a cut-off role left there (ignored
    files and the project's own .git stay, as hoh always keeps them, and the .git points at it); A_0, the task's
    files as they were, when no loop froze one. The loop whose candidate it is, or None for A_0."""
    for t in range(finished_loops(ws), 0, -1):
        if ws.paths.loop(t).candidate.exists():
            commit = frozen_candidate(ws, t).commit
            ws.history.reset_to(commit)
            ws.mirror.publish(commit)
            return t
    ws.history.reset_to(ws.identity["root_commit"])
    return None


def ws_loop_status(ws: Any, t: int) -> str:
    entry = next((e for e in api.status(ws.paths.root)["loops"] if e["loop"] == t), {})
    return str(entry.get("status"))


def describe_loop(entry: dict[str, Any], target: int) -> str:
    """One line per finished loop, for Harbor's log and run.log."""
    usage = {k: sum((u or {}).get(k, 0) or 0 for u in (entry.get("usage") or {}).values())
             for k in ("input_tokens", "output_tokens")}
    return (f"hoh loop {entry['loop']}/{target}: {entry.get('verdict') or entry.get('status')}, "
            f"{entry.get('criteria_verified')}/{entry.get('criteria_total')} criteria verified, candidate "
            f"{entry.get('candidate_id') or 'none'}, {entry.get('seconds') or 0:.1f}s, "
            f"tokens in {usage['input_tokens']} out {usage['output_tokens']}")
