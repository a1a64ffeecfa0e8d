"""ProgramBench through its own package (`pip install 'hoh[programbench]'`): list, package, grade.

- Tasks: the instances the installed `programbench` ships (`load_all_instances`); its own test
  fixtures (`testorg__…`) only when the pattern names them. `programbench:REGEX` selects by id.
- Packaging: each instance becomes a Harbor task under OUT/programbench/ID/ whose environment is
  the instance's own cleanroom image (`[environment] docker_image`), so the agent works in
  /workspace beside the original program's binary and documentation, as the task intends. An
  image that is not on this machine's Docker engine is an error naming it (nothing is pulled).
- Grading: not Harbor's verifier (the agent job runs with it disabled) but the package itself,
  on each loop's candidate: the tree becomes `submission.tar.gz`, `run_eval_batch` compiles and
  tests it in the instance's image, and `score_instance` scores the result (fraction of active
  tests passed). Its test data comes from PROGRAMBENCH_BLOB_DIR; the data hub is asked only
  with --programbench-download, under a timeout.
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
import threading
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..fsutil import atomic_write_json, atomic_write_text
from ..harness.process import call
from ..paths import AgentRunPaths, WorkspacePaths
from ..store.gitrun import run_git
from .jobs import docker_env
from .results import GRADE_SCHEMA_VERSION, RunPaths
from .settings import BenchSettings
from .suite import BenchTask, Suite

FIXTURE_PREFIX = "testorg__"
IMAGE_TAG = "task_cleanroom_v6"
INSTALL_HINT = "pip install 'hoh[programbench]'"
DOWNLOAD_TIMEOUT_SECONDS = 600
AGENT_TIMEOUT_SECONDS = 4 * 3600

INSTRUCTION = """# Rebuild `{repository}` from scratch

Reimplement the command-line program `{repository}` (upstream commit `{commit}`, originally written
in {language}; difficulty: {difficulty}) so that it behaves exactly like the original.

- The original program's compiled binary and its documentation are in your working directory,
  `/workspace`. Study its behaviour by running it; do not decompile it.
- Deliver the complete source code in `/workspace`, with an executable `compile.sh` at its root
  that builds the program into `./executable` (there is no network while it runs).
- The result is judged by ProgramBench's hidden behavioural test suite ({n_tests} tests): the score
  is the fraction of tests whose behaviour matches the original's.
"""

TASK_TOML = """schema_version = "1.1"

[task]
name = "programbench/{id}"
description = "Rebuild {repository} ({language}) from its binary and documentation"

[metadata]
repository = "{repository}"
language = "{language}"
difficulty = "{difficulty}"
tests = {n_tests}

[agent]
timeout_sec = {agent_timeout}

[verifier]
timeout_sec = 60.0

[environment]
docker_image = "{image}"
workdir = "/workspace"
"""

TEST_SH = """#!/usr/bin/env bash
# ProgramBench is graded by its own package (hoh bench grades every loop's candidate with it),
# not by this script: the agent job runs with Harbor's verifier disabled.
echo "graded by the programbench package, not here" >&2
exit 1
"""


def is_programbench(spec: str) -> bool:
    return spec == "programbench" or spec.startswith("programbench:")


def _load_data():
    # The package starts every container with --cpus 10 unless told otherwise, which an engine with
    # fewer cores refuses; it reads the setting once, at import.
    os.environ.setdefault("PROGRAMBENCH_DOCKER_CPUS", str(min(10, os.cpu_count() or 1)))
    try:
        from programbench.utils import load_data
    except ImportError:
        raise UsageError(f"the ProgramBench suite needs its package: {INSTALL_HINT}") from None
    return load_data


def instances(pattern: str | None) -> list[dict[str, Any]]:
    """The instances whose id matches `pattern` (a regex searched in the id), sorted by id."""
    load_data = _load_data()
    try:
        rx = re.compile(pattern) if pattern else None
    except re.error as err:
        raise UsageError(f"programbench:{pattern}: not a valid regular expression: {err}") from None
    fixtures = bool(pattern and FIXTURE_PREFIX.rstrip("_") in pattern)
    found = [i for i in load_data.load_all_instances() if fixtures or not i["instance_id"].startswith(FIXTURE_PREFIX)]
    return sorted((i for i in found if rx is None or rx.search(i["instance_id"])), key=lambda i: i["instance_id"])


def n_tests(instance: dict[str, Any]) -> int:
    load_data = _load_data()
    ignored = load_data.get_ignored_tests(instance)
    branches = instance.get("branches") or {}
    return sum(1 for b in load_data.get_active_branches(instance) for name in branches[b].get("tests", [])
               if f"{b}/{name}" not in ignored)


def image_of(instance: dict[str, Any]) -> str:
    return f"{instance['image_name']}:{IMAGE_TAG}"


def image_problem(image: str) -> str | None:
    """None when the Docker engine here has the image; else what is wrong, in one line."""
    try:
        result = call(["docker", "image", "inspect", "--format", "{{.Id}}", image], env=docker_env(), timeout=60)
    except OSError as err:
        return f"ProgramBench builds and tests in Docker, and the docker CLI cannot run here ({err})"
    if result.ok:
        return None
    detail = (result.stderr.strip().splitlines() or [""])[-1]
    if "No such image" in detail or "no such image" in detail.lower():
        return (f"the ProgramBench image {image} is not on this machine's Docker engine (hoh pulls nothing): "
                f"docker pull {image} (or docker load it), then rerun")
    return f"ProgramBench builds and tests in Docker, and the engine did not answer ({detail or 'no reply'})"


def suite(settings: BenchSettings, paths: RunPaths) -> Suite:
    """The selected instances as tasks to be packaged under OUT/programbench/; each missing image is an error."""
    pattern = settings.suite.partition(":")[2] or None
    chosen = instances(pattern)
    if not chosen:
        raise UsageError(f"no ProgramBench instance matches {settings.suite!r}")
    tasks = []
    for inst in chosen:
        problem = image_problem(image_of(inst))
        tasks.append(BenchTask(inst["instance_id"], {"path": str(paths.root / "programbench" / inst["instance_id"])},
                               None, problem))
    return Suite(settings.suite, tuple(tasks))


def materialize(settings: BenchSettings, paths: RunPaths, entries: list[dict[str, Any]]) -> None:
    """Write the Harbor task dirs of the runnable instances (deterministic; rewritten on every run)."""
    by_id = {i["instance_id"]: i for i in instances(settings.suite.partition(":")[2] or None)}
    for entry in entries:
        inst = by_id.get(entry["key"])
        if inst is None or entry.get("error"):
            continue
        root = Path(entry["config"]["path"])
        meta = {k: str(inst.get(k) or "unknown") for k in ("repository", "commit", "language", "difficulty")}
        atomic_write_text(root / "instruction.md", INSTRUCTION.format(n_tests=n_tests(inst), **meta))
        atomic_write_text(root / "task.toml", TASK_TOML.format(id=inst["instance_id"], image=image_of(inst),
                                                               n_tests=n_tests(inst), agent_timeout=AGENT_TIMEOUT_SECONDS,
                                                               **meta))
        atomic_write_text(root / "tests" / "test.sh", TEST_SH)


# ---- grading --------------------------------------------------------------------------------------
def tree_tar(trial: Path, loop: int) -> bytes:
    """Loop t's candidate as a tar (loop 0: A_0, the task's files as shipped, from hoh's history)."""
    paths = AgentRunPaths.for_trial(trial)
    if loop:
        return (Path(paths.candidate_dir(loop)) / "candidate.tar").read_bytes()
    ws = Path(paths.workspace)
    root = json.loads(WorkspacePaths(ws).identity.read_text(encoding="utf-8"))["root_commit"]
    return run_git(["--git-dir", str(ws / "history.git"), "archive", "--format=tar", root], cwd=ws, binary=True)


def package_submission(tar_bytes: bytes, target: Path) -> Path:
    """The tree as ProgramBench's `submission.tar.gz` (paths relative to the root, no .git)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as src, tarfile.open(target, "w:gz") as dst:
        for member in src.getmembers():
            if member.name.split("/", 1)[0] == ".git" or member.name in ("", "."):
                continue
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    return target


def blob_problem(instance: dict[str, Any], download: bool) -> str | None:
    """None when the instance's test data is on this machine (or was fetched); else why not."""
    load_data = _load_data()
    branches = load_data.get_active_branches(instance)
    iid = instance["instance_id"]
    local = os.environ.get("PROGRAMBENCH_BLOB_DIR")
    if local:
        missing = [b for b in branches if not (Path(local) / iid / "tests" / f"{b}.tar.gz").is_file()]
        return None if not missing else f"PROGRAMBENCH_BLOB_DIR={local} lacks {iid}/tests/{missing[0]}.tar.gz"
    if not download:
        return (f"the test data of {iid} is not on this machine: set PROGRAMBENCH_BLOB_DIR to a local copy, "
                "or pass --programbench-download to fetch it from ProgramBench's hub")
    from programbench.utils.blob_store import get_blob_dir
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "60")
    box: list[Any] = []
    worker = threading.Thread(target=lambda: box.append(_try(get_blob_dir, iid)), daemon=True)
    worker.start()
    worker.join(DOWNLOAD_TIMEOUT_SECONDS)
    if not box:
        return f"fetching the test data of {iid} took longer than {DOWNLOAD_TIMEOUT_SECONDS}s"
    if isinstance(box[0], Exception) or box[0] is None:
        return f"could not fetch the test data of {iid}: {box[0] or 'not on the hub'}"
    return None


def _try(fn, *args):
    try:
        return fn(*args)
    except Exception as err:  # noqa: BLE001 - reported as the grade's error
        return err


def grade_one(paths: RunPaths, settings: BenchSettings, key: str, trial: Path, loop: int) -> dict[str, Any]:
    """Grade loop t's candidate with the package: rewards, or an error with the reason."""
    from programbench.eval.eval import EvaluationResult
    from programbench.eval.eval_batch import run_eval_batch
    from programbench.submission import score_instance
    instance = {i["instance_id"]: i for i in instances(key)}.get(key)
    if instance is None:
        return {"error": f"{key} is not a ProgramBench instance of the installed package"}
    problem = image_problem(image_of(instance)) or blob_problem(instance, settings.programbench_download)
    if problem:
        return {"error": problem}
    run_dir = paths.root / "grades" / key / f"loop-{loop:04d}-eval"
    package_submission(tree_tar(trial, loop), run_dir / key / "submission.tar.gz")
    run_eval_batch(sources=[run_dir], force=True, workers=1, filter_spec=f"^{re.escape(key)}$")
    eval_json = run_dir / key / f"{key}.eval.json"
    if not eval_json.exists():
        return {"error": f"programbench wrote no {eval_json.name} (see its log above)"}
    result = EvaluationResult.model_validate_json(eval_json.read_text(encoding="utf-8"))
    if result.error_code:
        return {"error": f"programbench: {result.error_code}: {(result.error_details or '').strip()[:300]}"}
    score = score_instance(eval_json, instance)
    return {"rewards": {"reward": score, "tests_passed": float(result.n_resolved), "tests": float(len(result))}}


def _graded(path: Path) -> bool:
    try:
        return bool(json.loads(path.read_text(encoding="utf-8")).get("rewards"))
    except (OSError, ValueError):
        return False


def grade_loops(paths: RunPaths, settings: BenchSettings, key: str, trial: Path, plan: list[int], slots) -> bool:
    """Grade every loop of `plan` not graded yet; True when any grading ran."""
    ran = False
    for loop in plan:
        target = paths.package_grade(key, loop)
        if target.exists() and _graded(target):
            continue  # an error is tried again on a rerun (a missing image or test data may be there now)
        with slots.take(1):
            outcome = grade_one(paths, settings, key, trial, loop)
        atomic_write_json(target, {"schema_version": GRADE_SCHEMA_VERSION, "loop": loop,
                                   "rewards": outcome.get("rewards"), "error": outcome.get("error")})
        ran = True
    return ran
