"""Grade a frozen candidate with the task's own verifier, in an isolated view, never on the real tree.

A Harbor verifier is `bash /tests/test.sh`, run from the task's work directory, writing
`/logs/verifier/reward.txt` (one number) or `reward.json` (named numbers). hoh runs it under
bubblewrap: the host's top-level directories read-only, a fresh /tmp, and three writable binds
made for this grade alone (a copy of the candidate at the task's WORKDIR, a copy of tests/ at
/tests, an empty /logs). Agent-written code runs inside it during the tests, so it can write
nothing of the host's but those copies.

A grader that needs what this machine lacks (a Docker engine, Godot, a judge model's key,
bubblewrap itself) is `grader_unavailable` with the reason: never a zero, never a crash.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

from ..harness.process import run_process
from .tasks import Task

GradeStatus = Literal["graded", "verifier_error", "verifier_timeout", "grader_unavailable"]
_TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_HOST_SKIP = {"proc", "dev", "tmp"}


@dataclass
class Grade:
    """The verifier's verdict on one candidate."""

    status: GradeStatus
    score: float | None
    """None only when grading could not happen (grader_unavailable)."""
    rewards: dict[str, float] = field(default_factory=dict)
    detail: str | None = None
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ---- what this machine has ---------------------------------------------------------------------
@cache
def docker_engine_problem() -> str | None:
    """None when a Docker engine answers; else why not (the client alone is not enough)."""
    if not shutil.which("docker"):
        return "docker is not installed"
    try:
        proc = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                              text=True, timeout=15, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"no Docker engine answers ({err.__class__.__name__})"
    return None if proc.returncode == 0 else "no Docker engine is reachable (`docker info` failed)"


@cache
def bwrap_problem() -> str | None:
    """None when bubblewrap can build a sandbox here; else why not."""
    if not shutil.which("bwrap"):
        return "needs bubblewrap for an isolated verifier view: install it (apt-get install bubblewrap)"
    try:
        proc = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"],
                              capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"bubblewrap cannot start here ({err.__class__.__name__})"
    if proc.returncode != 0:
        return f"bubblewrap cannot build a sandbox here: {proc.stderr.strip()[:200]}"
    return None


def resolve_env(templates: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Fill `${VAR}` / `${VAR:-default}` from the environment; return the values and the unset names."""
    missing: list[str] = []

    def fill(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is None:
            missing.append(name)
            return ""
        return default

    return {k: _TEMPLATE.sub(fill, v) for k, v in templates.items()}, sorted(set(missing))


def _mentions_godot(task: Task) -> bool:
    for parts in (("tests", "rubric.json"), ("tests", "test.sh")):
        path = task.file(*parts)
        if path and "godot" in path.read_text(encoding="utf-8", errors="replace").lower():
            return True
    return False


def unavailable_reasons(task: Task, *, grade_on_host: bool = False) -> list[str]:
    """Why this task cannot be graded on this machine; empty when it can."""
    if task.kind == "programbench":
        from .programbench import unavailable_reasons as programbench_reasons
        return programbench_reasons()
    reasons = []
    test_sh, rubric = task.file("tests", "test.sh"), task.file("tests", "rubric.json")
    if task.file("environment", "Dockerfile") and not grade_on_host:
        engine = docker_engine_problem() or "hoh does not grade inside Docker images yet"
        reasons.append(f"needs Docker: the task's environment is environment/Dockerfile and {engine} "
                       "(--grade-on-host runs tests/test.sh with this machine's tools instead)")
    if test_sh is None:
        reasons.append("tests/test.sh is not in this copy of the task (only tests/rubric.json)")
    if _mentions_godot(task) and not shutil.which("godot"):
        reasons.append("needs Godot 4 to build and run the game (`godot` is not on PATH)")
    if rubric and test_sh is None:
        reasons.append("its rubric items are scored by a multimodal judge model, which hoh does not run itself")
    for name in resolve_env(task.verifier_env)[1]:
        reasons.append(f"needs ${name} ([verifier.env] in task.toml; e.g. a judge model's API key)")
    if problem := bwrap_problem():
        reasons.append(problem)
    return reasons


# ---- rewards -----------------------------------------------------------------------------------
def read_rewards(verifier_logs: Path) -> tuple[dict[str, float], str | None]:
    """Harbor's rule: reward.txt (one number) wins over reward.json (an object of numbers)."""
    text_file, json_file = verifier_logs / "reward.txt", verifier_logs / "reward.json"
    if text_file.is_file():
        raw = text_file.read_text(encoding="utf-8", errors="replace").strip()
        try:
            value = float(raw)
        except ValueError:
            return {}, f"reward.txt is not a number: {raw[:80]!r}"
        return ({"reward": value}, None) if math.isfinite(value) else ({}, f"reward.txt is not finite: {raw!r}")
    if json_file.is_file():
        try:
            data = json.loads(json_file.read_text(encoding="utf-8"))
        except ValueError as err:
            return {}, f"reward.json is not JSON: {err}"
        if not isinstance(data, dict) or not data:
            return {}, "reward.json must be a non-empty object of named numbers"
        rewards = {}
        for key, value in data.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                return {}, f"reward.json: {key!r} is not a finite number"
            rewards[key] = float(value)
        return rewards, None
    return {}, "the verifier wrote neither reward.txt nor reward.json"


def score_of(rewards: dict[str, float]) -> float:
    """The task's score: `reward` when named, else the one value, else the mean."""
    if "reward" in rewards:
        return rewards["reward"]
    return sum(rewards.values()) / len(rewards)


# ---- the isolated run --------------------------------------------------------------------------
def sandbox_argv(binds: dict[str, Path], *, network: bool) -> list[str]:
    """bubblewrap argv: the host read-only, a fresh /dev, /proc and /tmp, `binds` (dest → source) writable."""
    tops = {dest.strip("/").split("/")[0] for dest in binds}
    argv = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not network:
        argv.append("--unshare-net")
    for entry in sorted(Path("/").iterdir()):
        if entry.name in _HOST_SKIP or entry.name in tops:
            continue
        if entry.is_symlink():
            argv += ["--symlink", os.readlink(entry), str(entry)]
        elif entry.is_dir():
            argv += ["--ro-bind", str(entry), str(entry)]
    argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for dest, source in binds.items():
        argv += ["--bind", str(source), dest]
    return argv


def _tail(path: Path, limit: int = 300) -> str:
    text = path.read_text(encoding="utf-8", errors="replace").strip() if path.exists() else ""
    return text[-limit:]


def grade_harbor(task: Task, candidate: Path, grade_dir: Path) -> Grade:
    """Run the task's tests/test.sh against `candidate` (a disposable copy) and read its rewards."""
    assert task.path is not None
    tests, logs = grade_dir / "tests", grade_dir / "logs"
    for d in (tests, logs):
        shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(task.path / "tests", tests, symlinks=True)
    (logs / "verifier").mkdir(parents=True)
    (logs / "agent").mkdir()
    values, _ = resolve_env(task.verifier_env)
    env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "HOME": "/tmp", "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1", **values}
    argv = sandbox_argv({task.workdir: candidate, "/tests": tests, "/logs": logs}, network=task.allow_internet)
    argv += ["--chdir", task.workdir, "--", "bash", "/tests/test.sh"]
    stdout, stderr = grade_dir / "verifier-stdout.txt", grade_dir / "verifier-stderr.txt"
    proc = run_process(argv, cwd=grade_dir, env=env, stdin=None, stdout_path=stdout, stderr_path=stderr,
                       wall_timeout=task.verifier_timeout, idle_timeout=task.verifier_timeout)
    if proc.spawn_error:
        return Grade("grader_unavailable", None, detail=f"could not start bubblewrap: {proc.spawn_error}",
                     seconds=proc.duration_s)
    if proc.timed_out:
        return Grade("verifier_timeout", 0.0, detail=f"tests/test.sh ran past {task.verifier_timeout:.0f}s",
                     seconds=proc.duration_s)
    rewards, problem = read_rewards(logs / "verifier")
    if problem:
        return Grade("verifier_error", 0.0, detail=f"{problem} (test.sh exit code {proc.exit_code}; "
                     f"stderr: {_tail(stderr) or 'empty'})", seconds=proc.duration_s)
    detail = f"test.sh exit code {proc.exit_code}" if proc.exit_code else None
    return Grade("graded", score_of(rewards), rewards, detail, proc.duration_s)
