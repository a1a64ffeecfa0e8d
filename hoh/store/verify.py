"""`hoh status --verify`: re-hash everything a finished loop left and report any tampering.

Checks, trusting no stat cache: every sealed loop file against its seal, every loop's tag and
candidate record against history.git, history.git's objects (`git fsck`), the journal, the ledger.
With `repair`, sealed files are put back from the seal (the rest is reported, never guessed).
"""

from __future__ import annotations

from ..errors import StateError
from ..evidence.ledger import Ledger
from ..records import read_candidate
from .gitrun import GitError
from .journal import Journal, RunHistory
from .seal import SealedState
from .workspace import Workspace


def verify_workspace(ws: Workspace, repair: bool = False) -> dict[str, list[str]]:
    """{"problems": [...], "repaired": [...]}; each entry names the file or ref."""
    paths, history = ws.paths, ws.history
    problems: list[str] = []
    sealed = SealedState(history, paths.state)
    open_loops = sealed.open_loops()
    changed = sealed.repair(open_loops) if repair else sealed.verify(open_loops)
    repaired = [f"{kind} {paths.state / rel} (put back from its seal)" for kind, _, rel in
                (c.partition(" ") for c in changed)] if repair else []
    if not repair:
        problems += [f"{kind} {paths.state / rel} after its loop was sealed" for kind, _, rel in
                     (c.partition(" ") for c in changed)]
    try:
        history.git("fsck", "--no-dangling", "--no-progress")
    except GitError as err:
        problems.append(f"{paths.history}: {err}")
    tags = history.tags()
    for t in sealed.sealed_loops():
        path = paths.loop(t).candidate
        if not path.exists():
            continue
        try:
            candidate = read_candidate(path)
        except StateError as err:
            problems.append(str(err))
            continue
        if tags.get(candidate.tag) != candidate.commit:
            problems.append(f"{paths.history}: tag {candidate.tag} is not the commit {candidate.commit[:12]} "
                            f"that {path} records")
    for check in (lambda: RunHistory.read(Journal(paths.journal)), lambda: Ledger.load(paths.ledger)):
        try:
            check()
        except StateError as err:
            problems.append(str(err))
    return {"problems": problems, "repaired": repaired}
