"""Render a plan D_t as the Markdown the Developer and QA read (`plan.md`)."""

from __future__ import annotations

from typing import Any, Mapping

from ..records import Plan, record_of


def plan_markdown(plan: Plan | Mapping[str, Any]) -> str:
    """`plan` is a record; a plan's JSON (test fixtures write files from it) is read as one first."""
    plan = record_of(Plan, plan)
    out = [f"# Plan for loop {plan.loop}", "", f"**Goal:** {plan.goal}", "", "## Tasks", ""]
    for task in plan.tasks:
        issues = f" (addresses {', '.join(task.issues)})" if task.issues else ""
        out += [f"### {task.id}: {task.title}{issues}", ""]
        if task.details.strip():
            out += [task.details.strip(), ""]
        out.append("Acceptance:")
        out += [f"- `{a.id}` ({a.method}): {a.condition}" for a in task.acceptance]
        out.append("")
    out += ["## Preserve (verified behaviours that must keep working)", ""]
    out += [f"- `{p.id}`: {p.behaviour}" for p in plan.preserve] or ["- (none yet)"]
    out += ["", "## Out of scope", ""]
    out += [f"- {item}" for item in plan.out_of_scope] or ["- (nothing listed)"]
    return "\n".join(out) + "\n"
