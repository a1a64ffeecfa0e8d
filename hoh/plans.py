"""Plans the Runtime writes itself, when no Planner runs (Developer-only loops)."""

from __future__ import annotations

from typing import Any

PLAN_SCHEMA_VERSION = 1


def single_task_plan(loop: int, *, goal: str, title: str, details: str, condition: str,
                     method: str = "black-box") -> dict[str, Any]:
    """A valid plan (schemas/plan.schema.json) of one task T1 with one acceptance condition T1.A1."""
    return {"schema_version": PLAN_SCHEMA_VERSION, "loop": loop, "goal": goal,
            "tasks": [{"id": "T1", "title": title, "details": details,
                       "acceptance": [{"id": "T1.A1", "condition": condition, "method": method}],
                       "issues": []}],
            "preserve": [], "out_of_scope": []}
