"""A benchmark task, whatever its source, and `load_suite`, which finds the tasks of a suite.

A suite is named on the command line as:
- a Harbor task directory (it holds `task.toml`), or a directory of them (GameCraft-Bench,
  FrontierSWE, `benchmarks/examples/`);
- `programbench`, or `programbench:REGEX` for the ProgramBench instances whose id matches.

A task that cannot be used (no instruction, no verifier, a malformed `task.toml`) is still
returned, with `problems` saying why, so the runner reports it as invalid and goes on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import UsageError

Kind = Literal["harbor", "programbench"]


@dataclass(frozen=True)
class Task:
    """One task of a suite: what the agent is asked, and what grading it needs."""

    id: str
    """Unique within the suite; also the trial's directory name under OUT/trials/."""
    kind: Kind
    name: str
    description: str = ""
    path: Path | None = None
    """The task directory (Harbor); None for tasks that live inside a package."""
    instruction: str | None = None
    """The instruction text when it does not come from `path/instruction.md`."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """What `hoh bench list` shows: keywords, difficulty, language, test counts, timeouts."""
    problems: tuple[str, ...] = ()
    """Why the task is invalid; empty for a usable task."""
    workdir: str = "/workspace"
    """Where the verifier expects the candidate (Harbor: the image's WORKDIR)."""
    verifier_timeout: float = 600.0
    verifier_env: dict[str, str] = field(default_factory=dict)
    """`[verifier.env]` of task.toml, `${VAR}` templates unresolved."""
    allow_internet: bool = True

    @property
    def valid(self) -> bool:
        return not self.problems

    def instruction_text(self) -> str:
        if self.instruction is not None:
            return self.instruction
        assert self.path is not None
        return (self.path / "instruction.md").read_text(encoding="utf-8")

    def file(self, *parts: str) -> Path | None:
        """A file of the task directory, or None when it has none."""
        if self.path is None:
            return None
        candidate = self.path.joinpath(*parts)
        return candidate if candidate.exists() else None

    @property
    def solution_dir(self) -> Path | None:
        script = self.file("solution", "solve.sh")
        return script.parent if script else None

    @property
    def scripted_script(self) -> Path | None:
        """The scripted agent's script for this task (`scripted/script.yaml`), used by --harness scripted."""
        return self.file("scripted", "script.yaml")


@dataclass(frozen=True)
class Suite:
    """The tasks of one suite, valid or not, sorted by id."""

    spec: str
    """How the suite was named: a resolved directory, or `programbench[:REGEX]`."""
    kind: Kind
    tasks: tuple[Task, ...]

    @property
    def valid(self) -> list[Task]:
        return [t for t in self.tasks if t.valid]

    @property
    def invalid(self) -> list[Task]:
        return [t for t in self.tasks if not t.valid]


def load_suite(spec: str, task_filter: str | None = None) -> Suite:
    """Find the tasks named by `spec`; `task_filter` (a regex) keeps the task ids it matches."""
    if spec == "programbench" or spec.startswith("programbench:"):
        from .programbench import load_tasks
        pattern = spec.partition(":")[2] or None
        suite = Suite(spec, "programbench", tuple(load_tasks(pattern)))
    else:
        from .harbor import load_harbor
        root = Path(spec).expanduser()
        if not root.exists():
            raise UsageError(f"suite {spec} not found; give a Harbor task dir, a dir of Harbor tasks, "
                             "or programbench[:REGEX]")
        if not root.is_dir():
            raise UsageError(f"suite {spec} is not a directory; give a Harbor task dir or a dir of them")
        suite = Suite(str(root.resolve()), "harbor", tuple(load_harbor(root.resolve())))
    if task_filter:
        try:
            rx = re.compile(task_filter)
        except re.error as err:
            raise UsageError(f"--filter {task_filter!r} is not a valid regular expression: {err}") from None
        suite = Suite(suite.spec, suite.kind, tuple(t for t in suite.tasks if rx.search(t.id)))
    if not suite.tasks:
        raise UsageError(f"suite {spec} has no tasks" + (f" matching {task_filter!r}" if task_filter else "")
                         + "; a Harbor task is a directory with task.toml, instruction.md and tests/test.sh")
    return suite
