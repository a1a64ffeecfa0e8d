"""A suite's tasks and the checks made before anything starts, all through Harbor's own code.

A suite is a Harbor task dir, a dir of Harbor tasks, a Harbor dataset (`NAME[@VERSION]`, from
its registry), or `programbench[:REGEX]`. Harbor decides what a valid task is (`Task.is_valid_dir`,
the same rule `harbor run -p DIR` applies); a task dir it would skip is reported with Harbor's
lint findings. The environment and the agent go through Harbor's preflight (an unknown
environment, no reachable Docker engine, missing cloud credentials, a bad agent option), so a
run that cannot start says so in one line before any trial starts.
"""

from __future__ import annotations

import asyncio
import os
import re
from fnmatch import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .jobs import THIRD_PARTY_ENV
from .settings import BenchSettings

VALIDITY_RULES = ("invalid-task-config", "unknown-config-field", "invalid-task-files")
"""The lint rules that decide whether Harbor can run a task at all (the rest are style)."""


def harbor() -> None:
    """Fail in one line when Harbor is not importable here. Called before hoh first uses Harbor."""
    for name, value in THIRD_PARTY_ENV.items():
        os.environ.setdefault(name, value)  # before LiteLLM is imported, which reads it then (see THIRD_PARTY_ENV)
    try:
        import harbor as _  # noqa: F401
    except ImportError:
        raise UsageError("hoh bench runs and lists suites through Harbor: pip install 'hoh[harbor]' "
                         "(Python >= 3.12) and run hoh from that environment") from None


@dataclass(frozen=True)
class BenchTask:
    """One task of a suite, as Harbor will run it."""

    key: str
    """Unique in the run and filesystem-safe: names the task's Harbor jobs (OUT/jobs/KEY.agent, KEY.grade)."""
    config: dict[str, Any]
    """Harbor's TaskConfig of the task (JSON), as every job of it gets it."""
    path: Path | None = None
    """The local task dir when there is one."""
    error: str | None = None
    """Why this task cannot run here at all (e.g. a ProgramBench image missing): reported, never started."""
    solution: bool | None = None
    """Whether the task ships a reference solution (None: not known before Harbor fetches the task)."""
    reward_max: dict[str, float] = field(default_factory=dict)
    """The task's own maximum per reward key, from its task.toml's [metadata] ({}: 1.0 each)."""

    def entry(self) -> dict[str, Any]:
        """The task as tasks.json keeps it."""
        return {"key": self.key, "config": self.config, **({"error": self.error} if self.error else {}),
                "solution": self.solution, "reward_max": self.reward_max}


@dataclass(frozen=True)
class Suite:
    spec: str
    tasks: tuple[BenchTask, ...]
    invalid: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    """(task dir name, Harbor's reason) of dirs with a task.toml that Harbor would skip."""


def safe_key(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "__", name).strip("._") or "task"


def lint_reason(task_dir: Path) -> str:
    """Harbor's lint findings on the validity rules, as one line."""
    from harbor.lint import lint_task
    from harbor.lint.models import LintRule
    try:
        findings = lint_task(task_dir, selected_rules={LintRule(r) for r in VALIDITY_RULES})
    except Exception as err:  # noqa: BLE001 - lint itself failing is still the reason to report
        return f"harbor lint failed ({type(err).__name__})"
    if not findings:
        return "Harbor does not consider it a task directory (no environment/ and no [environment] docker_image)"
    return "; ".join(f"[{f.rule}] {f.message}" for f in findings[:3])


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    keys = []
    for name in names:
        key = safe_key(name)
        seen[key] = seen.get(key, 0) + 1
        keys.append(key if seen[key] == 1 else f"{key}-{seen[key]}")
    return keys


def resolve(settings: BenchSettings) -> Suite:
    """The run's suite: its runnable tasks (and the dirs Harbor would skip, with its reason)."""
    return tasks_of(settings.suite, settings.include)


def tasks_of(spec: str, globs: list[str]) -> Suite:
    """A suite's runnable tasks (and the dirs Harbor would skip, with its reason); `hoh bench list` needs no
    run settings for it."""
    from harbor.models.job.config import DatasetConfig
    from harbor.models.task.task import Task
    from harbor.models.trial.config import TaskConfig

    include = globs or None
    path = Path(spec).expanduser()
    invalid: list[tuple[str, str]] = []
    try:
        if path.is_dir() and (path / "task.toml").is_file():
            if not Task.is_valid_dir(path):
                raise UsageError(f"{spec} is not a task Harbor can run: {lint_reason(path)}")
            configs = [TaskConfig(path=path.resolve())]
        elif path.is_dir():
            children = sorted(d for d in path.iterdir() if d.is_dir() and (d / "task.toml").is_file()
                              and (include is None or any(fnmatch(d.name, g) for g in include)))
            invalid = [(d.name, lint_reason(d)) for d in children if not Task.is_valid_dir(d)]
            configs = asyncio.run(DatasetConfig(path=path.resolve(), task_names=include).get_task_configs())
            if not configs and not invalid:
                raise UsageError(f"{spec} holds no Harbor task (no sub-directory with a task.toml)")
        elif "/" in spec or spec.startswith((".", "~")) or path.exists():
            raise UsageError(f"suite {spec} not found; give a Harbor task dir, a dir of Harbor tasks, a Harbor "
                             "dataset name, or programbench[:REGEX]")
        else:
            name, _, version = spec.partition("@")
            configs = asyncio.run(DatasetConfig(name=name, version=version or None,
                                                task_names=include).get_task_configs())
    except UsageError:
        raise
    except Exception as err:  # noqa: BLE001 - Harbor's own message: a bad filter, an unreachable registry
        raise UsageError(f"suite {spec}: {str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__}"
                         ) from None
    if not configs:
        reasons = "; ".join(f"{name}: {why}" for name, why in invalid[:3])
        raise UsageError(f"suite {spec} has no valid task ({reasons})" if reasons else
                         f"suite {spec} has no task matching {', '.join(include or [])}")
    names = [c.get_task_id().get_name() for c in configs]
    tasks = []
    for key, c in zip(_unique(names), configs):
        local = c.path if c.path is not None and c.git_url is None else None
        solution, limits = reference_of(local) if local is not None else (None, {})
        tasks.append(BenchTask(key, c.model_dump(mode="json", exclude_defaults=True), local, solution=solution,
                               reward_max=limits))
    return Suite(spec, tuple(tasks), tuple(invalid))


def reference_of(task_dir: Path) -> tuple[bool, dict[str, float]]:
    """Whether a local task ships a reference solution Harbor's oracle can run, and its reward maxima."""
    from harbor.models.task.task import Task

    from .calibrate import reward_max
    task = Task(task_dir)
    solution = task.paths.discovered_solve_path_for(task.config.environment.os) is not None
    return solution, reward_max(task.config.metadata)


def preflight(settings: BenchSettings, agent: dict[str, Any]) -> None:
    """Harbor's own preflight of the environment and the agent, as `harbor run` does it first."""
    from harbor.agents.factory import AgentFactory
    from harbor.environments.factory import EnvironmentFactory
    from harbor.models.environment_type import EnvironmentType
    from harbor.models.trial.config import AgentConfig

    env = settings.env
    kind = None
    if ":" not in env:
        try:
            kind = EnvironmentType(env)
        except ValueError:
            known = ", ".join(t.value for t in EnvironmentType)
            raise UsageError(f"unknown environment '{env}'; Harbor's environments: {known}; or a custom one "
                             "as module.path:ClassName") from None
    try:
        EnvironmentFactory.run_preflight(type=kind, import_path=env if kind is None else None)
    except SystemExit as err:
        raise UsageError(f"--env {env}: {err.code}" if isinstance(err.code, str) else
                         f"--env {env}: Harbor's preflight failed") from None
    except (ImportError, AttributeError, ValueError) as err:
        raise UsageError(f"--env {env}: cannot use it ({_first_line(err)})") from None
    try:
        AgentFactory.run_preflight(AgentConfig.model_validate(agent), skip_credential_checks=True)
    except (ValueError, SystemExit) as err:
        raise UsageError(_first_line(err, heading=True)) from None


def _first_line(err: BaseException, heading: bool = False) -> str:
    """The error's first line; with `heading`, a first line ending in ':' (Harbor lists bad agent options one per
    line under one) is joined with the rest."""
    text = str(err.code if isinstance(err, SystemExit) else err).strip()
    if not text:
        return type(err).__name__
    lines = text.splitlines()
    return " ".join(" ".join(lines).split()) if heading and lines[0].rstrip().endswith(":") else lines[0]
