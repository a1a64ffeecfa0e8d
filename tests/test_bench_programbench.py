"""ProgramBench through its own package: instances listed from it, packaged as Harbor tasks whose
environment is the instance's image, and every loop's candidate graded by the package itself.

No ProgramBench image can be pulled here, so a real instance is an error naming its image. The
package ships a test fixture instance (`testorg__calculator`); the test builds a local stand-in for
its cleanroom image (Debian with the original program and its docs in /workspace, and pytest with
xdist for the instance's tests) and a local copy of its test data (PROGRAMBENCH_BLOB_DIR), then runs
it end to end: hoh with the scripted harness inside that image, the package compiling and testing
each loop.
The package's data hub is asked only with --programbench-download, and a hub that does not answer is
given up at the timeout.
"""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from conftest import run_hoh
from harbor_env import harbor  # noqa: F401 - fixture

from hoh.bench.results import trial_results

pytest.importorskip("programbench", reason="ProgramBench is optional: pip install 'hoh[programbench]'")

FIXTURE = "testorg__calculator.abc1234"
IMAGE = "programbench/testorg_1776_calculator.abc1234:task_cleanroom_v6"
ORIGINAL = """#!/usr/bin/env bash
# the original calculator: A OP B
case "$2" in
  +) echo $(( $1 + $3 ));; -) echo $(( $1 - $3 ));; '*') echo $(( $1 * $3 ));;
  *) echo "unknown operator $2" >&2; exit 2;;
esac
"""
CALC_1 = '#!/usr/bin/env bash\ncase "$2" in\n  +) echo $(( $1 + $3 ));;\n  -) echo $(( $1 - $3 ));;\nesac\n'
CALC_2 = CALC_1.replace("esac", "  \\*) echo $(( $1 * $3 ));;\nesac")
ACCEPTANCE = [{"id": "T1.A1", "condition": "`calc.sh 2 + 3` prints 5", "method": "black-box"},
              {"id": "T1.A2", "condition": "`calc.sh 4 '*' 3` prints 12", "method": "black-box"}]
CHECKS = [{"id": "T1.A1", "run": "bash calc.sh 2 + 3", "expect_stdout": "5"},
          {"id": "T1.A2", "run": "bash calc.sh 4 '*' 3", "expect_stdout": "12",
           "finding": {"title": "multiplication is missing", "severity": "major"}}]


def loop(goal: str, issues: list[str], actions: list[dict], status: str) -> dict:
    return {"planner": {"reply": {"goal": goal, "preserve": [], "out_of_scope": [], "tasks": [
                {"id": "T1", "title": "calc.sh", "details": goal, "issues": issues, "acceptance": ACCEPTANCE}]}},
            "developer": {"actions": actions, "reply": {"summary": goal, "self_tests": [], "known_gaps": [],
                                                        "tasks": [{"id": "T1", "status": status, "notes": ""}]}},
            "qa": {"checks": CHECKS}}


# Loop 1 rebuilds + and - (2 of the instance's 3 tests), loop 2 adds * (3 of 3).
SCRIPT = {"schema_version": 1, "loops": {
    1: loop("+ and - first", [], [{"write": {"path": "calc.sh", "content": CALC_1}},
                                  {"write": {"path": "compile.sh", "executable": True,
                                             "content": "#!/bin/sh\ncp calc.sh executable && chmod +x executable\n"}}],
            "partial"),
    2: loop("multiplication", ["I-0001"], [{"write": {"path": "calc.sh", "content": CALC_2}}], "done")}}


def test_instances_come_from_the_package_with_their_image():
    result = run_hoh("bench", "list", "programbench:^jqlang", "--json")
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)["tasks"]
    assert row["name"].startswith("jqlang__jq") and row["metadata"]["tests"] > 0
    assert row["metadata"]["image"].startswith("programbench/jqlang_1776_jq") and row["metadata"]["image"].endswith(
        ":task_cleanroom_v6")
    assert row["status"] == "unavailable" and row["metadata"]["image"] in row["reason"]
    everything = json.loads(run_hoh("bench", "list", "programbench", "--json").stdout)["tasks"]
    assert len(everything) == 200 and not [r for r in everything if r["name"].startswith("testorg__")]


def test_an_instance_whose_image_is_missing_is_an_error_naming_it(harbor, tmp_path):
    out = tmp_path / "out"
    result = harbor.hoh("bench", "run", "programbench:^jqlang", "--harness", "scripted", "--env", "docker", "-o", out)
    assert result.returncode == 1, result.stderr
    [task] = json.loads((out / "summary.json").read_text())["tasks"]
    assert task["outcome"] == "error" and task["scores"] == [None, None, None]
    assert "is not on this machine's Docker engine" in task["error"] and "docker pull programbench/jqlang" in task["error"]
    assert not list((out / "jobs").iterdir())  # nothing was started for it


def test_test_data_comes_from_the_hub_only_when_asked_and_within_a_timeout(tmp_path):
    # A hub that accepts connections and never answers: the download is abandoned at the timeout.
    hub = socket.socket()
    hub.bind(("127.0.0.1", 0))
    hub.listen(16)
    code = ("import time; from hoh.bench import programbench as pb; pb.DOWNLOAD_TIMEOUT_SECONDS = 3; "
            "[i] = pb.instances('testorg'); print(pb.blob_problem(i, False)); t = time.monotonic(); "
            "print(pb.blob_problem(i, True)); print(time.monotonic() - t)")
    env = {k: v for k, v in os.environ.items() if k != "PROGRAMBENCH_BLOB_DIR"}
    env.update(HF_ENDPOINT=f"http://127.0.0.1:{hub.getsockname()[1]}", HF_HOME=str(tmp_path / "hf"))
    try:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    finally:
        hub.close()
    assert result.returncode == 0, result.stderr
    not_asked, asked, seconds = result.stdout.splitlines()
    assert f"the test data of {FIXTURE} is not on this machine" in not_asked and "--programbench-download" in not_asked
    assert asked == f"fetching the test data of {FIXTURE} took longer than 3s" and float(seconds) < 10
    # a local copy that lacks a branch's archive is named, file and all
    env["PROGRAMBENCH_BLOB_DIR"] = str(tmp_path)
    local = subprocess.run([sys.executable, "-c", code.replace("print(pb.blob_problem(i, True)); ", "")],
                           capture_output=True, text=True, env=env, timeout=120)
    assert f"PROGRAMBENCH_BLOB_DIR={tmp_path} lacks {FIXTURE}/tests/" in local.stdout, local.stderr


@pytest.fixture(scope="module")
def stand_in(harbor, tmp_path_factory) -> Path:
    """The fixture instance's cleanroom image, built here (and removed after), and its test data."""
    import programbench
    root = tmp_path_factory.mktemp("programbench")
    context = root / "image"
    (context / "workspace").mkdir(parents=True)
    (context / "workspace" / "calculator").write_text(ORIGINAL)
    (context / "workspace" / "calculator").chmod(0o755)
    (context / "workspace" / "README.md").write_text("calculator A OP B: prints the result of + - *\n")
    # pytest with xdist (ProgramBench's test images ship both; its runner passes xdist's options) and their
    # pure-Python dependencies, installed files and metadata alike (xdist registers through an entry point)
    for dist in ("pytest", "pluggy", "iniconfig", "packaging", "pygments", "pytest-xdist", "execnet"):
        for file in importlib.metadata.distribution(dist).files or []:
            source = Path(file.locate())
            if "__pycache__" not in file.parts and source.is_file() and not file.parts[0].startswith(".."):
                target = context / "site" / file
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(source, target)
    (context / "Dockerfile").write_text("FROM localhost/hoh-base:bookworm\nCOPY site/ /usr/lib/python3/dist-packages/\n"
                                        "COPY workspace/ /workspace/\nWORKDIR /workspace\n")
    subprocess.run(["docker", "build", "-q", "-t", IMAGE, str(context)], check=True, capture_output=True, timeout=600)
    tests = Path(programbench.__file__).parent / "data" / "tasks" / FIXTURE / "tests"
    blobs = root / "blobs" / FIXTURE / "tests"
    blobs.mkdir(parents=True)
    for branch in (d for d in tests.iterdir() if d.is_dir()):
        with tarfile.open(blobs / f"{branch.name}.tar.gz", "w:gz") as tar:
            tar.add(branch / "eval", arcname="eval", filter=lambda m: None if "__pycache__" in m.name else m)
            # The fixture's tests.json names its tests from eval/ (`tests.test_calculator.…`): an ini file
            # there makes it pytest's rootdir, so the JUnit names match.
            ini = tarfile.TarInfo("eval/pytest.ini")
            ini.size = len(b"[pytest]\n")
            tar.addfile(ini, io.BytesIO(b"[pytest]\n"))
    (root / "script.yaml").write_text(yaml.safe_dump(SCRIPT, sort_keys=False))
    yield root
    subprocess.run(["docker", "image", "rm", "-f", IMAGE], capture_output=True, timeout=120)


def test_the_package_grades_every_loop_of_hoh_in_the_instance_s_image(harbor, stand_in, tmp_path):
    out = tmp_path / "out"
    result = harbor.hoh("bench", "run", "programbench:testorg", "--harness", "scripted", "--loops", "2",
                        "--set", f"harness.script={stand_in / 'script.yaml'}", "--env", "docker", "-o", out,
                        env={"PROGRAMBENCH_BLOB_DIR": str(stand_in / "blobs")})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    [task] = json.loads((out / "summary.json").read_text())["tasks"]
    assert task["task"] == FIXTURE and task["outcome"] == "completed"
    assert task["scores"] == [pytest.approx(2 / 3), 1.0]  # loop 2 adds the missing operator
    assert task["rewards"] == {"reward": 1.0, "tests_passed": 3.0, "tests": 3.0}
    # the agent worked in the instance's own image, beside the original program and its docs
    [(trial, agent)] = trial_results(out / "jobs" / f"{FIXTURE}.agent")
    assert agent["verifier_result"] is None  # Harbor's verifier is off: the package grades
    with tarfile.open(trial / "hoh" / "candidates" / "loop-0001" / "candidate.tar") as tar:
        assert {"calculator", "README.md", "calc.sh", "compile.sh"} <= set(tar.getnames())
    instruction = (out / "programbench" / FIXTURE / "instruction.md").read_text()
    assert "Rebuild `testorg/calculator`" in instruction and "/workspace" in instruction
    for loop in (1, 2):
        grade = json.loads((out / "grades" / FIXTURE / f"loop-{loop:04d}.json").read_text())
        assert grade["error"] is None and grade["rewards"]["tests"] == 3.0
        evaluated = out / "grades" / FIXTURE / f"loop-{loop:04d}-eval" / FIXTURE / f"{FIXTURE}.eval.json"
        assert json.loads(evaluated.read_text())["error_code"] is None
