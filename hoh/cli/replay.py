"""`hoh replay`: the register's checks on a past loop's candidate, or the first loop that breaks one check.

The work is `runtime/replaying.py`'s; this prints it (a line per check and a summary, or JSON) and picks the
exit code: 0 when every check passed (a flaky one included: it is no regression), 1 when one failed, timed
out or could not run. A bisection exits 0 once it has its answer, whichever it is.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..evidence.checks import RunStatus
from ..runtime.replay import Replay
from ..runtime.replaying import Bisection, PastReplay
from ..store.workspace import open_workspace
from ..terminal import terminal_text

PASSING = (RunStatus.passed, RunStatus.flaky)


def run(workspace: Path, loop: int | None, bisect: str | None, as_json: bool, env: str | None = None) -> int:
    """Open the workspace read-only (no lock), run, print; the exit code."""
    if loop is not None and bisect is not None:
        raise UsageError("--loop and --bisect do not go together: --bisect searches every loop from the check's own")
    if env is not None and not env.strip():
        raise UsageError("--env needs a name: local, docker, podman, or a Harbor environment's")
    ws = open_workspace(Path(workspace))
    with PastReplay(ws, env.strip() if env else None, warn=lambda message: print(message, file=sys.stderr)) as past:
        if bisect is not None:
            found = past.bisect(bisect.strip().upper())
            shown = json.dumps(found.to_json(), indent=2) if as_json else terminal_text(bisection_line(found))
            print(shown, flush=True)
            return 0
        done = past.replay(loop if loop is not None else past.last_finished())
        added = {c["id"]: c.get("added", {}).get("loop") for c in past.register.checks}
        jailed = past.runner.jail is not None
        where = past.place.name
    if as_json:
        print(json.dumps({**replay_json(done), "jailed": jailed, "environment": where}, indent=2), flush=True)
    else:
        for line in replay_lines(done, added, jailed):  # a reason may quote QA's check (its cwd, its stdin_file)
            print(terminal_text(line), flush=True)
    return 0 if all(r.status in PASSING for r in done.results) else 1


def replay_json(done: Replay) -> dict[str, Any]:
    return {"loop": done.loop, "candidate_id": done.candidate_id, "seconds": done.seconds,
            "passed": all(r.status in PASSING for r in done.results),
            "results": [{"id": r.id, "behaviour_id": r.behaviour_id, "status": r.status.value, "reason": r.reason,
                         "seconds": r.seconds} for r in done.results]}


def replay_lines(done: Replay, added: dict[str, int | None], jailed: bool = True) -> list[str]:
    """One line per check (id, behaviour, status, reason), then the summary."""
    lines = []
    for r in done.results:
        reason = f"  {r.reason}" if r.reason else ""
        since = added.get(r.id)
        later = f" (added in loop {since}, after this candidate)" if since and since > done.loop and reason else ""
        lines.append(f"{r.id}  {r.behaviour_id or '-':<7} {r.status.value:<9} {r.seconds:6.2f}s{reason}{later}")
    counts: dict[str, int] = {}
    for r in done.results:
        counts[r.status.value] = counts.get(r.status.value, 0) + 1
    tally = ", ".join(f"{n} {status}" for status, n in counts.items()) or "no active check in the register"
    unjailed = " · without the jail (sandbox.mode off)" if not jailed else ""
    lines.append(f"loop {done.loop} ({done.candidate_id}): {tally} · {len(done.results)} checks in "
                 f"{done.seconds:.1f}s{unjailed}")
    return lines


def bisection_line(found: Bisection) -> str:
    if found.failing is None:
        return f"{found.check_id} passes on every loop from {found.first} to {found.last}"
    where = f"{found.failing.loop} ({found.failing.candidate_id})"
    before = f"; it passes at loop {found.passing}" if found.passing is not None else \
        "; that is the loop that added it (it passed there when admitted)"
    return f"{found.check_id} first fails at loop {where}: {found.reason}{before}"
