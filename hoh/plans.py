"""Plans the Runtime writes itself, when no Planner runs (Developer-only loops). The plan reader (versions 1
and 2) is `records.read_plan`."""

from __future__ import annotations

from .records import PLAN_SCHEMA_VERSION, Acceptance, Plan, Task


def single_task_plan(loop: int, *, goal: str, title: str, details: str, condition: str,
                     method: str = "black-box") -> Plan:
    """A valid plan (schemas/plan.schema.json) of one task T1 with one acceptance condition T1.A1."""
    return Plan(PLAN_SCHEMA_VERSION, loop, goal, (Task("T1", title, details, (Acceptance("T1.A1", condition, method),)),))
