"""The agent's time budget, computed the way Harbor computes the timeout it wraps `run()` in.

Harbor hands the timeout to its own oracle only, so the agent reads the same inputs Harbor
reads: the trial's config (written before the agent is set up) and the task's `[agent]`.
"""

from __future__ import annotations

from pathlib import Path

from harbor.environments.base import BaseEnvironment
from harbor.models.task.task import Task
from harbor.models.trial.config import TrialConfig

RESERVE_FRACTION, RESERVE_MIN, RESERVE_MAX = 0.05, 10.0, 60.0
"""Of the budget, kept back to stop hoh, restore the workdir and write the summary before Harbor's timeout."""


def task_of(environment: BaseEnvironment) -> Task:
    return Task(Path(environment.environment_dir).parent)


def agent_timeout(environment: BaseEnvironment, task: Task) -> float | None:
    """Seconds Harbor gives `run()` in this trial, or None when it sets no limit."""
    config = TrialConfig.model_validate_json(environment.trial_paths.config_path.read_text(encoding="utf-8"))
    base = config.agent.override_timeout_sec or task.config.agent.timeout_sec
    if base is None:
        return None
    multiplier = config.agent_timeout_multiplier if config.agent_timeout_multiplier is not None \
        else config.timeout_multiplier
    return min(base, config.agent.max_timeout_sec or float("inf")) * multiplier


def reserve(timeout: float) -> float:
    return min(RESERVE_MAX, max(RESERVE_MIN, RESERVE_FRACTION * timeout))
