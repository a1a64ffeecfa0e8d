"""Load Harbor task directories, the format GameCraft-Bench and FrontierSWE use.

    TASK/
      task.toml          [task] name, description, keywords; [metadata]; [verifier] timeout_sec, env;
                         [agent] timeout_sec; [environment] allow_internet, cpus, memory_mb, ...
      instruction.md     what the agent is asked (hoh's spec)
      tests/test.sh      the verifier: writes /logs/verifier/reward.txt (a number) or reward.json
      tests/rubric.json  GameCraft-Bench's judge rubric (its test.sh scores it with a judge model)
      environment/       optional Dockerfile of the task's image (its WORKDIR is where the work lives)
      solution/solve.sh  optional reference solution (the `oracle` harness runs it)
      scripted/          hoh's own addition: the scripted agent's script, for model-free runs
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from .tasks import Task

DEFAULT_WORKDIR = "/workspace"
DEFAULT_VERIFIER_TIMEOUT = 600.0
_WORKDIR = re.compile(r"^\s*WORKDIR\s+(\S+)\s*$", re.MULTILINE | re.IGNORECASE)


def _is_task_dir(path: Path) -> bool:
    return any((path / name).exists() for name in ("task.toml", "instruction.md", "tests"))


def load_harbor(root: Path) -> list[Task]:
    """`root` is one task (it has task.toml) or a directory whose subdirectories are tasks."""
    if (root / "task.toml").exists() or (root / "instruction.md").exists():
        return [load_task(root)]
    children = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    return [load_task(p) for p in children if _is_task_dir(p)]


def _workdir(task_dir: Path) -> str:
    dockerfile = task_dir / "environment" / "Dockerfile"
    if dockerfile.is_file():
        found = _WORKDIR.findall(dockerfile.read_text(encoding="utf-8", errors="replace"))
        if found and found[-1].startswith("/"):
            return found[-1].rstrip("/") or "/"
    return DEFAULT_WORKDIR


def _read_toml(path: Path) -> tuple[dict[str, Any], str | None]:
    if not path.is_file():
        return {}, "no task.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        return {}, f"task.toml is malformed: {err}"
    for section in ("task", "metadata", "verifier", "agent", "environment"):
        if section in data and not isinstance(data[section], dict):
            return {}, f"task.toml: [{section}] must be a table"
    return data, None


def _number(table: dict[str, Any], key: str, default: float) -> tuple[float, str | None]:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return default, f"task.toml: {key} must be a positive number, got {value!r}"
    return float(value), None


def load_task(task_dir: Path) -> Task:
    """Read one task directory; what makes it unusable goes into `problems`, never an exception."""
    data, problem = _read_toml(task_dir / "task.toml")
    problems = [problem] if problem else []
    task_t, meta = data.get("task", {}), data.get("metadata", {})
    verifier, agent, env = data.get("verifier", {}), data.get("agent", {}), data.get("environment", {})

    instruction = task_dir / "instruction.md"
    if not instruction.is_file():
        problems.append("no instruction.md")
    elif not instruction.read_text(encoding="utf-8", errors="replace").strip():
        problems.append("instruction.md is empty")
    tests = task_dir / "tests"
    if not (tests / "test.sh").is_file() and not (tests / "rubric.json").is_file():
        problems.append("no verifier: tests/test.sh is missing")

    timeout, problem = _number(verifier, "timeout_sec", DEFAULT_VERIFIER_TIMEOUT)
    problems += [problem] if problem else []
    verifier_env = verifier.get("env", {})
    if not isinstance(verifier_env, dict) or not all(isinstance(v, str) for v in verifier_env.values()):
        problems.append("task.toml: [verifier.env] must map names to strings")
        verifier_env = {}

    metadata: dict[str, Any] = {
        "keywords": list(task_t.get("keywords", []) or []),
        **{k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool))},
        "verifier": "tests/test.sh" if (tests / "test.sh").is_file() else
                    ("tests/rubric.json" if (tests / "rubric.json").is_file() else None),
        "solution": (task_dir / "solution" / "solve.sh").is_file(),
        "environment": "environment/Dockerfile" if (task_dir / "environment" / "Dockerfile").is_file() else None,
    }
    if "timeout_sec" in agent:
        metadata["agent_timeout_sec"] = agent["timeout_sec"]
    for key in ("cpus", "memory_mb", "gpus"):
        if key in env:
            metadata[key] = env[key]
    return Task(
        id=task_dir.name, kind="harbor", name=str(task_t.get("name") or task_dir.name),
        description=str(task_t.get("description", "")), path=task_dir, metadata=metadata,
        problems=tuple(problems), workdir=_workdir(task_dir), verifier_timeout=timeout,
        verifier_env=dict(verifier_env), allow_internet=bool(env.get("allow_internet", True)),
    )
