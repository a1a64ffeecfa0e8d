"""Why a loop fell short of `pass`, in one line for `hoh status`: the regressions it caused (the issue and the
behaviour it broke), the criteria QA found failed or could not prove, and the other issues it opened or reopened.

Read from the ledger after the loop was folded in, so the ids are the ledger's and the line is the same when
the loop's evidence step runs again after a crash.
"""

from __future__ import annotations

from ..records import QaReport
from .ledger import Ledger

MAX_BEHAVIOUR_CHARS = 60
"""A behaviour's text is cut to this in the reason (its full text is one `hoh show V-…` away)."""


def _short(text: str) -> str:
    return text if len(text) <= MAX_BEHAVIOUR_CHARS else text[:MAX_BEHAVIOUR_CHARS - 1] + "…"


def shortfall(ledger: Ledger, loop: int, qa: QaReport | None) -> str | None:
    """`regression I-0002 (V-0002 "…" broke); T2.A1 failed; I-0003 opened: …`, or None when nothing fell short."""
    parts: list[str] = []
    named: set[str] = set()
    issues, behaviours = ledger.touched_in(loop)  # only what this loop touched can have fallen short in it
    for behaviour in behaviours:
        history = behaviour.get("history") or []
        if history and history[-1]["loop"] == loop and history[-1]["status"] == "broken":
            # The issues it stands for (those it was verified for, and its own regression issue) that this loop
            # opened or reopened.
            linked = {*behaviour.get("issues", ()), *ledger.regression_issues(behaviour["id"])}
            found = [i["id"] for i in issues if i["id"] in linked and i["last_loop"] == loop
                     and i["status"] in ("open", "reopened")]
            named.update(found)
            label = f"regression {', '.join(found)} " if found else "regression "
            parts.append(f'{label}({behaviour["id"]} "{_short(behaviour["behaviour"])}" broke)')
    for result in qa.criteria if qa else ():
        if result.status == "failed":
            parts.append(f"{result.id} failed")
        elif result.status == "insufficient_evidence":
            parts.append(f"{result.id} lacked evidence")
    for issue in issues:
        last = issue["history"][-1] if issue.get("history") else None
        if issue["id"] in named or last is None or last["loop"] != loop:
            continue
        if last["status"] in ("open", "reopened"):
            verb = "opened" if last["status"] == "open" else "reopened"
            parts.append(f"{issue['id']} {verb}: {_short(issue['title'])}")
    return "; ".join(parts) or None
