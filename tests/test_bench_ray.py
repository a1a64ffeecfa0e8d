"""--executor ray on a local Ray instance this test starts gives the same per-task results as the
local executor. The CLI joins the instance as a second driver through --ray-address, the way a
user joins an existing cluster."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from test_bench_run import EXAMPLES, bench_argv

ray = pytest.importorskip("ray", reason="ray is an optional extra: pip install 'hoh[ray]'")

TASKS = "^(kvstore|rpn|wordfreq)$"


@pytest.fixture
def ray_address(isolated_home):
    # Loopback only; the isolated home keeps Ray's auth token where the CLI driver finds it too.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def comparable(out) -> dict:
    """Per task: outcome and, per loop, score, grade status, hoh status and candidate id."""
    result = {}
    for path in sorted((out / "trials").glob("*/trial.json")):
        rec = json.loads(path.read_text())
        result[rec["task"]] = (rec["outcome"], [(s["loop"], s["score"], s["grade"], s["hoh_status"], s["candidate_id"])
                                                for s in rec["scores"]])
    return result


def test_ray_executor_matches_local(tmp_path, ray_address):
    common = ("--harness", "scripted", "--loops", "2", "--jobs", "2", "--filter", TASKS, "-q")
    runs = {
        "local": bench_argv("run", EXAMPLES, "-o", tmp_path / "local", *common),
        "ray": bench_argv("run", EXAMPLES, "-o", tmp_path / "ray", "--executor", "ray", "--ray-address", ray_address,
                          *common),
    }
    procs = {name: subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    stdin=subprocess.DEVNULL, env=dict(os.environ)) for name, argv in runs.items()}
    for name, proc in procs.items():
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, (name, stderr)

    local, remote = comparable(tmp_path / "local"), comparable(tmp_path / "ray")
    assert sorted(local) == ["kvstore", "rpn", "wordfreq"]
    assert remote == local
    assert all(outcome == "completed" and [s[1] for s in loops] == [0.5, 1.0] for outcome, loops in local.values())
    # The trials really ran in Ray workers: each wrote its own workspace under the ray run's OUT.
    assert all((tmp_path / "ray" / "trials" / t / "workspace" / "state" / "journal.jsonl").exists()
               for t in local)
    # The CLI only disconnected from the cluster it joined; the instance this test started still runs.
    assert ray.is_initialized() and ray.cluster_resources().get("CPU") == 2
