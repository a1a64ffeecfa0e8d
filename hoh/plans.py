"""Plans the Runtime writes itself, when no Planner runs (Developer-only loops)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .fsutil import load_state

PLAN_SCHEMA_VERSION = 2
"""1: tasks, preserve, out_of_scope. 2: `spec_complete` (the Planner finds nothing left to build; no tasks).
Readers take both."""


def load_plan(path: Path) -> dict[str, Any]:
    """A persisted plan (schema_version 1 or 2)."""
    return load_state(path, ("schema_version", "loop", "tasks"), PLAN_SCHEMA_VERSION)


def single_task_plan(loop: int, *, goal: str, title: str, details: str, condition: str,
                     method: str = "black-box") -> dict[str, Any]:
    """A valid plan (schemas/plan.schema.json) of one task T1 with one acceptance condition T1.A1."""
    return {"schema_version": PLAN_SCHEMA_VERSION, "loop": loop, "goal": goal,
            "tasks": [{"id": "T1", "title": title, "details": details,
                       "acceptance": [{"id": "T1.A1", "condition": condition, "method": method}],
                       "issues": []}],
            "preserve": [], "out_of_scope": []}
