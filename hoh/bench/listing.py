"""`hoh bench list`: a suite's tasks as Harbor sees them, or ProgramBench's instances as its package ships them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import programbench
from .suite import harbor, lint_reason, tasks_of


def list_suite(spec: str, include: list[str]) -> list[dict[str, Any]]:
    """One row per task: name, description, metadata (with whether it ships a reference solution, which
    `hoh bench check` grades to tell whether the task can be graded here), status (ok | invalid | unavailable)
    and why."""
    if programbench.is_programbench(spec):
        rows = []
        for inst in programbench.instances(spec.partition(":")[2] or None):
            image = programbench.image_of(inst)
            problem = programbench.image_problem(image)
            rows.append({"name": inst["instance_id"], "description": f"Rebuild {inst.get('repository')}",
                         "metadata": {"language": inst.get("language"), "difficulty": inst.get("difficulty"),
                                      "tests": programbench.n_tests(inst), "image": image},
                         "status": "unavailable" if problem else "ok", "reason": problem})
        return rows
    harbor()
    from harbor.models.task.task import Task
    path = Path(spec).expanduser()
    found = tasks_of(str(path.resolve()) if path.exists() else spec, include)
    rows = []
    for task in found.tasks:
        row = {"name": task.key, "description": "", "metadata": {}, "status": "ok", "reason": None}
        if task.path is not None:
            model = Task(task.path)
            info = model.config.task
            row.update(name=model.name, description=(info.description if info else "") or "",
                       metadata={**model.config.metadata,
                                 "image": model.config.environment.docker_image,
                                 "network": model.config.environment.network_mode.value
                                 if model.config.environment.network_mode else None,
                                 "steps": len(model.config.steps or []) or None,
                                 "reference solution": "yes" if task.solution else "no (not calibrated)",
                                 "verifier": "separate" if model.config.verifier.environment
                                 or (model.config.verifier.environment_mode or "") == "separate" else None})
        rows.append(row)
    rows += [{"name": name, "description": "", "metadata": {}, "status": "invalid", "reason": why}
             for name, why in found.invalid]
    return rows


__all__ = ["list_suite", "lint_reason"]
