"""The oracle harness (applies a task's solution/solve.sh), and the throughput benchmark's smoke run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO
from test_bench_run import EXAMPLES, hoh_bench

from hoh import api
from hoh.config import HarnessConfig, HohConfig
from hoh.harness import registry
from hoh.harness.base import RoleRequest


def test_oracle_argv_is_built_without_running_anything(tmp_path):
    adapter = registry.create(HarnessConfig(name="oracle", extra_args=["--solution", "/tasks/x/solution"]))
    request = RoleRequest(role="developer", loop=2, attempt=1, prompt="p", workdir=tmp_path, access="write")
    assert adapter.build_argv(request) == [sys.executable, "-m", "hoh.harness.oracle", "--role", "developer",
                                           "--loop", "2", "--attempt", "1", "--solution", "/tasks/x/solution"]


def test_oracle_applies_the_solution_in_a_hoh_loop(tmp_path):
    task = EXAMPLES / "roman"
    config = HohConfig(loops=1, harness=HarnessConfig(name="oracle", extra_args=["--solution", str(task / "solution")]))
    report = api.build(task / "instruction.md", tmp_path / "ws", config)
    assert report.status == "finished"
    loop = tmp_path / "ws" / "state" / "loops" / "0001"
    developer = json.loads((loop / "developer.json").read_text())
    assert developer["tasks"] == [{"id": "T1", "status": "done", "notes": ""}]
    assert developer["self_tests"][0]["exit_code"] == 0
    qa = json.loads((loop / "qa.json").read_text())
    assert qa["criteria"][0]["status"] == "insufficient_evidence"  # the oracle claims no acceptance
    files = subprocess.run(["git", "ls-tree", "--name-only", "loop-0001"], cwd=tmp_path / "ws" / "project",
                           capture_output=True, text=True, check=True).stdout.split()
    assert files == ["roman.py"]  # solve.sh's output, and nothing of the solution dir itself


def test_a_task_without_a_solution_is_an_error_for_the_oracle(tmp_path):
    suite = tmp_path / "suite"
    shutil.copytree(EXAMPLES / "rpn", suite / "rpn")
    shutil.rmtree(suite / "rpn" / "solution")
    result = hoh_bench("run", suite, "--harness", "oracle", "-o", tmp_path / "out", "-q")
    assert result.returncode == 1
    rec = json.loads((tmp_path / "out" / "trials" / "rpn" / "trial.json").read_text())
    assert rec["outcome"] == "error" and "solution/solve.sh" in rec["error"]


def test_throughput_benchmark_runs(tmp_path):
    """A smoke run with tiny sleeps (the ratio itself is measured by running the script on its own)."""
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "perf" / "throughput.py"), "--tasks", "2",
                             "--sleep", "0.05", "--target", "0"], capture_output=True, text=True, timeout=180,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("workers=1  trials=2") and lines[1].startswith("workers=2  trials=2")
    assert lines[2].startswith("ratio 2/1 = ")
    assert Path(REPO / "benchmarks" / "README.md").read_text().count("perf/throughput.py") >= 1
