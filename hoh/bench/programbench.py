"""ProgramBench through its own PyPI package `programbench` (imported only when this suite is used).

- Task list and metadata: `programbench.utils.load_data.load_all_instances()` (each instance's
  `task.yaml` + `tests.json`, shipped inside the package); the package's own test fixtures
  (`testorg__…`) are left out, as its leaderboard does.
- Submission: the complete codebase as `RUN/<instance_id>/submission.tar.gz`, with a
  `compile.sh` that builds `./executable`.
- Grading: `programbench.eval.eval_batch.run_eval_batch` writes `RUN/<id>/<id>.eval.json`, scored
  by `programbench.submission.score_instance` (fraction of the active, non-ignored tests passed).
  Grading compiles and tests inside the task's Docker image, so without a Docker engine every
  ProgramBench task is `grader_unavailable`.
"""

from __future__ import annotations

import re
import tarfile
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .tasks import Task
from .verifier import Grade, docker_engine_problem

FIXTURE_PREFIX = "testorg__"
INSTALL_HINT = "pip install programbench"

SPEC_TEMPLATE = """# Rebuild `{repository}` from scratch

Reimplement the command-line program `{repository}` (upstream commit `{commit}`, originally
written in {language}; difficulty: {difficulty}) so that it behaves exactly like the original.

- The original's compiled binary and its documentation are in the task's Docker image
  `{image}:task_cleanroom_v6`, under `/workspace`. Study its behaviour; do not decompile it.
- Deliver the complete source code in the project directory, with an executable `compile.sh`
  at its root that builds the program into `./executable` (no network access while it runs).
- The result is judged by ProgramBench's hidden behavioural test suite ({n_tests} tests): the
  score is the fraction of tests whose output matches the original's.
"""


def _package():
    try:
        from programbench.utils import load_data
    except ImportError:
        raise UsageError(f"the ProgramBench suite needs its package: {INSTALL_HINT}") from None
    return load_data


def _n_tests(instance: dict[str, Any], load_data) -> int:
    ignored = load_data.get_ignored_tests(instance)
    branches = instance.get("branches") or {}
    return sum(1 for b in load_data.get_active_branches(instance) for name in branches[b].get("tests", [])
               if f"{b}/{name}" not in ignored)


def instances(include_fixtures: bool = False) -> dict[str, dict[str, Any]]:
    """Every ProgramBench instance the installed package ships, keyed by instance id."""
    load_data = _package()
    found = load_data.load_all_instances()
    return {i["instance_id"]: i for i in found if include_fixtures or not i["instance_id"].startswith(FIXTURE_PREFIX)}


def task_from_instance(instance: dict[str, Any]) -> Task:
    load_data = _package()
    n_tests = _n_tests(instance, load_data)
    meta = {k: instance.get(k) for k in ("repository", "commit", "language", "difficulty")}
    spec = SPEC_TEMPLATE.format(image=instance["image_name"], n_tests=n_tests,
                                **{k: v or "unknown" for k, v in meta.items()})
    problems = () if n_tests else ("tests.json lists no active tests",)
    return Task(id=instance["instance_id"], kind="programbench", name=str(meta["repository"]),
                description=f"Rebuild {meta['repository']} ({meta['language']}) from its binary and docs",
                instruction=spec, metadata={**meta, "tests": n_tests, "image": instance["image_name"]},
                problems=problems)


def load_tasks(pattern: str | None = None) -> list[Task]:
    """The ProgramBench tasks whose instance id matches `pattern` (a regex), sorted by id."""
    try:
        rx = re.compile(pattern) if pattern else None
    except re.error as err:
        raise UsageError(f"programbench:{pattern}: not a valid regular expression: {err}") from None
    # The package's own fixture instances only when asked for by name (tests use them).
    chosen = instances(include_fixtures=bool(pattern and FIXTURE_PREFIX.rstrip("_") in pattern))
    return [task_from_instance(chosen[i]) for i in sorted(chosen) if rx is None or rx.search(i)]


def unavailable_reasons() -> list[str]:
    try:
        _package()
    except UsageError as err:
        return [str(err)]
    if problem := docker_engine_problem():
        return [f"needs Docker: ProgramBench compiles and tests inside the task's image, and {problem}"]
    return []


# ---- submission and grading --------------------------------------------------------------------
def package_submission(candidate: Path, run_dir: Path, instance_id: str) -> Path:
    """Pack the candidate's files as `run_dir/<instance_id>/submission.tar.gz` (paths relative to its root)."""
    target = run_dir / instance_id / "submission.tar.gz"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(target, "w:gz") as tar:
        for path in sorted(candidate.rglob("*")):
            rel = path.relative_to(candidate).as_posix()
            if rel.split("/", 1)[0] != ".git":
                tar.add(path, arcname=rel, recursive=False)
    return target


def score_eval(eval_json: Path, instance_id: str) -> Grade:
    """Read one `<id>.eval.json` the package wrote, scored by the package's own rule."""
    from programbench.eval.eval import EvaluationResult
    from programbench.submission import score_instance
    instance = instances(include_fixtures=True).get(instance_id)
    if instance is None:
        return Grade("verifier_error", 0.0, detail=f"{instance_id} is not a ProgramBench instance")
    result = EvaluationResult.model_validate_json(eval_json.read_text(encoding="utf-8"))
    score = score_instance(eval_json, instance)
    if result.error_code:
        return Grade("verifier_error", score, {"reward": score}, detail=f"programbench: {result.error_code}")
    return Grade("graded", score, {"reward": score, "tests_passed": float(result.n_resolved),
                                   "tests": float(len(result))})


def grade_programbench(task: Task, candidate: Path, grade_dir: Path) -> Grade:
    """Package the candidate and let `programbench` compile and test it in Docker."""
    if reasons := unavailable_reasons():
        return Grade("grader_unavailable", None, detail="; ".join(reasons))
    from programbench.eval.eval_batch import run_eval_batch
    run_dir = grade_dir / "programbench-run"
    package_submission(candidate, run_dir, task.id)
    run_eval_batch(sources=[run_dir], force=True, workers=1, filter_spec=f"^{re.escape(task.id)}$")
    eval_json = run_dir / task.id / f"{task.id}.eval.json"
    if not eval_json.exists():
        return Grade("verifier_error", 0.0, detail="programbench wrote no eval.json (see its log)")
    return score_eval(eval_json, task.id)
