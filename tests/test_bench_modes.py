"""--mode vanilla | continuation and each --ablate change what a trial runs, asserted on the trials'
persisted hoh state (roles that ran, inputs they were given, plans, candidates) and on their grades.

All cells run on the example task `kvstore` (loop 1 scores 0.5, loop 2 patches loop 1's script to 1.0),
concurrently, once per module.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from test_bench_run import EXAMPLES, bench_argv, hoh_bench

CELLS = {
    "hoh": ["--loops", "2"],
    "vanilla": ["--mode", "vanilla"],
    "continuation": ["--mode", "continuation", "--loops", "2"],
    "no-plan-update": ["--ablate", "plan-update", "--loops", "2"],
    "no-evidence": ["--ablate", "evidence", "--loops", "2"],
    "no-warm-start": ["--ablate", "warm-start", "--loops", "2"],
}


class Cell:
    def __init__(self, out: Path):
        self.out = out
        self.trial = out / "trials" / "kvstore"
        self.ws = self.trial / "workspace"

    @property
    def record(self) -> dict:
        return json.loads((self.trial / "trial.json").read_text())

    @property
    def scores(self) -> list[float]:
        return [s["score"] for s in self.record["scores"]]

    def loop(self, t: int) -> Path:
        return self.ws / "state" / "loops" / f"{t:04d}"

    def json(self, t: int, name: str) -> dict:
        return json.loads((self.loop(t) / f"{name}.json").read_text())

    def roles(self, t: int) -> list[str]:
        return sorted(p.name for p in (self.loop(t) / "roles").iterdir())

    def inputs(self, t: int, role: str) -> dict:
        return json.loads((self.loop(t) / "roles" / role / "attempt-1" / "inputs.json").read_text())

    def journal(self) -> list[dict]:
        return [json.loads(line) for line in (self.ws / "state" / "journal.jsonl").read_text().splitlines()]

    def config(self) -> dict:
        return yaml.safe_load((self.ws / "hoh.yaml").read_text())


@pytest.fixture(scope="module")
def cells(tmp_path_factory) -> dict[str, Cell]:
    root = tmp_path_factory.mktemp("modes")
    procs = {}
    for name, args in CELLS.items():
        argv = bench_argv("run", EXAMPLES, "--filter", "^kvstore$", "--harness", "scripted", "-o", root / name, "-q",
                          *args)
        procs[name] = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       stdin=subprocess.DEVNULL, env={**os.environ, "HOME": str(root)})
    for name, proc in procs.items():
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, (name, stderr)
    return {name: Cell(root / name) for name in CELLS}


def test_hoh_mode_runs_planner_developer_qa_with_evidence(cells):
    c = cells["hoh"]
    assert c.scores == [0.5, 1.0] and c.record["mode"] == "hoh" and c.record["ablate"] == []
    assert c.roles(2) == ["developer", "planner", "qa"]
    assert [f["path"] for f in c.inputs(2, "planner")["files"]] == ["spec.md", "state/INDEX.md", "state/ledger.json"]
    assert c.json(2, "qa")["verdict"] == "pass"


def test_vanilla_is_one_developer_pass(cells):
    c = cells["vanilla"]
    assert c.record["mode"] == "vanilla" and c.record["loops"] == 1 and c.scores == [0.5]
    assert c.config()["mode"] == "developer_only"
    assert c.roles(1) == ["developer"]  # no Planner, no QA
    assert c.json(1, "plan")["tasks"][0]["id"] == "T1" and c.json(1, "plan")["goal"] == "Implement the product spec"
    assert not (c.loop(1) / "qa.json").exists() and not c.loop(2).exists()
    assert [e["status"] for e in c.journal() if e["event"] == "loop_finished"] == ["unverified"]


def test_continuation_reruns_the_harness_on_its_own_output(cells):
    c = cells["continuation"]
    assert c.record["mode"] == "continuation" and c.scores == [0.5, 1.0]
    for t in (1, 2):
        assert c.roles(t) == ["developer"] and not (c.loop(t) / "qa.json").exists()
    # Loop 2 started from loop 1's candidate: the harness continued its own work.
    assert c.json(2, "candidate")["parent"] == c.json(1, "candidate")["commit"]
    assert c.inputs(2, "developer")["project"]["commit"] == c.json(1, "candidate")["commit"]


def test_no_plan_update_reuses_the_first_plan(cells):
    c = cells["no-plan-update"]
    assert c.record["ablate"] == ["plan-update"] and c.scores == [0.5, 1.0]
    assert c.roles(2) == ["developer", "qa"]  # the Planner did not run in loop 2
    plan1, plan2 = c.json(1, "plan"), c.json(2, "plan")
    assert {**plan1, "loop": 2} == plan2
    assert plan2["tasks"][0]["issues"] == []  # the fresh loop-2 plan cites the QA issues; the reused one cannot
    assert cells["hoh"].json(2, "plan")["tasks"][0]["issues"] == ["I-0001", "I-0002"]
    reused = [e for e in c.journal() if e["event"] == "step_finished" and e["step"] == "planner"]
    assert [e["reused_plan"] for e in reused] == [False, True]


def test_no_evidence_hides_the_ledger_and_index_from_the_planner(cells):
    c = cells["no-evidence"]
    assert c.record["ablate"] == ["evidence"] and c.scores == [0.5, 1.0]
    inputs = c.inputs(2, "planner")
    assert [f["path"] for f in inputs["files"]] == ["spec.md"]
    assert inputs["mechanisms"]["evidence_feedback"] is False
    assert c.config()["mechanisms"]["evidence_feedback"] is False


def test_no_warm_start_makes_the_developer_start_from_nothing(cells):
    c = cells["no-warm-start"]
    assert c.record["ablate"] == ["warm-start"]
    # Loop 2's patch of loop 1's kv.sh has nothing to patch: the artifact regresses.
    assert c.scores == [0.5, 0.0]
    assert c.inputs(2, "developer")["project"]["warm_start"] == "false"
    tree = subprocess.run(["git", "ls-tree", "--name-only", c.json(2, "candidate")["commit"]], cwd=c.ws / "project",
                          capture_output=True, text=True, check=True).stdout.split()
    assert tree == ["selftest.sh"]
    summary = json.loads((c.out / "summary.json").read_text())
    assert [e["mean"] for e in summary["mean_score_by_loop"]] == [0.5, 0.0]


@pytest.mark.parametrize("args, message", [
    (["--mode", "vanilla", "--loops", "2"], "one Developer pass"),
    (["--mode", "continuation", "--ablate", "evidence"], "has none to switch off"),
    (["--ablate", "planner"], "unknown ablation 'planner'"),
    (["--mode", "solo"], "unknown mode 'solo'"),
    (["--executor", "k8s"], "unknown executor 'k8s'"),
    (["--harness", "nope"], "unknown harness 'nope'"),
    (["--harness", "codex", "--set", "harness.command=/no/such/codex"], "is not installed"),
])
def test_bad_mode_combinations_are_refused(tmp_path, args, message):
    result = hoh_bench("run", EXAMPLES, "-o", tmp_path / "out", "-q", *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()
