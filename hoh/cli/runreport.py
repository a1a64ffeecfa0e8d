"""The run report `hoh build --json` and `hoh resume --json` print at the end: one JSON document on stdout.

Its shape (`schema_version` 1; fields are only ever added): status, stop_reason, exit_code, loops_finished,
target_loops, workspace, tokens, cost_usd (null: unknown), usage, and per loop its status, verdict,
candidate, tokens, cost and seconds, as `hoh status --json` has them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1

LOOP_FIELDS = ("loop", "status", "verdict", "candidate_id", "criteria_verified", "criteria_total", "tokens",
               "cost_usd", "seconds")


def run_report(report: Any, workspace: Path) -> dict[str, Any]:
    """`report` is the Runtime's `RunReport`; the spend and the loops are read back from the workspace."""
    from .. import api
    status = report.status
    data: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "status": str(status), "stop_reason": report.error,
        "exit_code": status.exit_code, "loops_finished": report.loops_finished, "target_loops": report.target_loops,
        "workspace": str(Path(workspace).expanduser().resolve()),
    }
    try:
        state = api.status(workspace)
    except Exception as err:  # noqa: BLE001 - the run's own outcome is reported even if its state reads badly
        return {**data, "tokens": None, "cost_usd": None, "usage": None, "loops": [], "status_error": str(err)}
    return {**data, "tokens": state.get("tokens"), "cost_usd": state.get("cost_usd"), "usage": state.get("usage"),
            "loops": [{key: loop.get(key) for key in LOOP_FIELDS} for loop in state.get("loops", [])]}
