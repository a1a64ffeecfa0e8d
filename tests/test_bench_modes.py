"""--mode vanilla | continuation and each --ablate change what hoh runs inside the Harbor trial,
asserted on the trials' persisted hoh state (roles that ran, inputs they were given, plans,
candidates) and on the per-loop grades Harbor's verifier gave; and the pairwise win rates of the
runs side by side.

Every cell runs the example task `kvstore` (loop 1 scores 0.5, loop 2 patches loop 1's script to
1.0) on Docker, concurrently, once per module; hoh mode itself is the session's scripted run.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import run_hoh
from harbor_env import EXAMPLES, bench_runs, finish, harbor  # noqa: F401 - fixtures

from hoh.bench.results import trial_results

CELLS = {  # kvstore's reference solution is graded once, in the vanilla cell; the others skip it
    "vanilla": ["--mode", "vanilla"],
    "continuation": ["--mode", "continuation", "--loops", "2", "--no-calibrate"],
    "no-plan-update": ["--ablate", "plan-update", "--loops", "2", "--no-calibrate"],
    "no-evidence": ["--ablate", "evidence", "--loops", "2", "--no-calibrate"],
    "no-warm-start": ["--ablate", "warm-start", "--loops", "2", "--no-calibrate"],
}


class Cell:
    """One run's kvstore trial: its record, and the hoh workspace Harbor collected from the container."""

    def __init__(self, out: Path):
        self.out = out
        [(self.trial, self.result)] = trial_results(out / "jobs" / "kvstore.agent")
        self.ws = self.trial / "hoh" / "workspace"

    @property
    def record(self) -> dict:
        return next(t for t in json.loads((self.out / "summary.json").read_text())["tasks"] if t["task"] == "kvstore")

    @property
    def scores(self) -> list[float]:
        return self.record["scores"]

    @property
    def settings(self) -> dict:
        return json.loads((self.out / "run.json").read_text())["settings"]

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

    def graded(self) -> list[int]:
        return sorted(r["config"]["agent"]["kwargs"]["loop"] for _, r in trial_results(self.out / "jobs" / "kvstore.grade"))


@pytest.fixture(scope="module")
def cells(harbor, bench_runs, tmp_path_factory) -> dict[str, Cell]:
    root = tmp_path_factory.mktemp("modes")
    finish({name: harbor.hoh_async("bench", "run", EXAMPLES / "kvstore", "--harness", "scripted", "--env", "docker",
                                   "-o", root / name, "-j", "2", "-q", *args) for name, args in CELLS.items()})
    return {"hoh": Cell(bench_runs["scripted"]), **{name: Cell(root / name) for name in CELLS}}


def test_hoh_mode_runs_planner_developer_qa_with_evidence(cells):
    c = cells["hoh"]
    assert c.scores == [0.5, 1.0, 1.0] and c.settings["mode"] == "hoh" and c.settings["ablate"] == []
    assert c.roles(2) == ["developer", "planner", "qa"]
    assert [f["path"] for f in c.inputs(2, "planner")["files"]] == ["spec.md", "state/INDEX.md", "state/ledger.json"]
    assert c.json(2, "qa")["verdict"] == "pass"
    assert c.config()["policy"]["on_role_failure"] == "continue"  # a benchmark goes on past a failed role


def test_calibration_grades_the_reference_solution_once_unless_switched_off(cells):
    assert cells["vanilla"].record["calibration"]["state"] == "gradable"
    [(_, oracle)] = trial_results(cells["vanilla"].out / "jobs" / "kvstore.calibrate")
    assert oracle["agent_info"]["name"] == "oracle" and oracle["verifier_result"]["rewards"] == {"reward": 1.0}
    off = cells["continuation"]
    assert off.record["calibration"]["state"] == "off" and not (off.out / "jobs" / "kvstore.calibrate").exists()
    assert off.settings["calibrate"] is False


def test_vanilla_is_one_developer_pass(cells):
    c = cells["vanilla"]
    assert c.settings["mode"] == "vanilla" and c.settings["loops"] == 1 and c.scores == [0.5]
    assert c.config()["mode"] == "developer_only"
    assert c.roles(1) == ["developer"]  # no Planner, no QA
    assert c.json(1, "plan")["goal"] == "Implement the product spec"
    assert not (c.loop(1) / "qa.json").exists() and not c.loop(2).exists()
    assert [e["status"] for e in c.journal() if e["event"] == "loop_finished"] == ["unverified"]
    assert c.graded() == [1]


def test_continuation_reruns_the_harness_on_its_own_output(cells):
    c = cells["continuation"]
    assert c.settings["mode"] == "continuation" and c.scores == [0.5, 1.0] and c.graded() == [1, 2]
    for t in (1, 2):
        assert c.roles(t) == ["developer"] and not (c.loop(t) / "qa.json").exists()
    # Loop 2 started from loop 1's candidate: the harness continued its own work.
    assert c.json(2, "candidate")["parent"] == c.json(1, "candidate")["commit"]
    assert c.inputs(2, "developer")["project"]["commit"] == c.json(1, "candidate")["commit"]


def test_no_plan_update_reuses_the_first_plan(cells):
    c = cells["no-plan-update"]
    assert c.settings["ablate"] == ["plan-update"] and c.scores == [0.5, 1.0]
    assert c.roles(2) == ["developer", "qa"]  # the Planner did not run in loop 2
    plan1, plan2 = c.json(1, "plan"), c.json(2, "plan")
    assert {**plan1, "loop": 2} == plan2
    assert plan2["tasks"][0]["issues"] == []  # a fresh loop-2 plan cites the QA issues; the reused one cannot
    assert cells["hoh"].json(2, "plan")["tasks"][0]["issues"] == ["I-0001", "I-0002"]


def test_no_evidence_hides_the_ledger_and_index_from_the_planner(cells):
    c = cells["no-evidence"]
    assert c.settings["ablate"] == ["evidence"] and c.scores == [0.5, 1.0]
    inputs = c.inputs(2, "planner")
    assert [f["path"] for f in inputs["files"]] == ["spec.md"]
    assert inputs["mechanisms"]["evidence_feedback"] is False
    assert c.config()["mechanisms"]["evidence_feedback"] is False


def test_no_warm_start_makes_the_developer_start_from_nothing(cells):
    c = cells["no-warm-start"]
    assert c.settings["ablate"] == ["warm-start"]
    # Loop 2's patch of loop 1's kv.sh has nothing to patch: Harbor's verifier grades the regression.
    assert c.scores == [0.5, 0.0] and c.graded() == [1, 2]
    assert c.inputs(2, "developer")["project"]["warm_start"] == "false"
    tree = subprocess.run(["git", "--git-dir", str(c.ws / "history.git"), "ls-tree", "--name-only",
                           c.json(2, "candidate")["commit"]], capture_output=True, text=True, check=True).stdout.split()
    assert tree == ["selftest.sh"]


def test_win_rates_and_dominance_across_the_cells(cells):
    hoh, vanilla, cold = (cells[name].out for name in ("hoh", "vanilla", "no-warm-start"))
    result = run_hoh("bench", "report", hoh, "--compare", vanilla, "--compare", cold, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    rates = data["win_rates"]
    assert rates["runs"] == ["scripted · hoh", "scripted · vanilla", "scripted · hoh · −warm-start"]
    # kvstore is the task all three ran: hoh 1.0, vanilla 0.5, without warm start 0.0
    assert rates["matrix"] == [[None, 1.0, 1.0], [0.0, None, 1.0], [0.0, 0.0, None]]
    assert rates["dominance"] == [1.0, 0.5, 0.0]
    kv = next(t for t in data["comparisons"][0]["tasks"] if t["task"] == "kvstore")
    assert kv == {"task": "kvstore", "a": 1.0, "b": 0.5, "delta": -0.5, "note": ""}
    assert {t["note"] for t in data["comparisons"][0]["tasks"] if t["task"] != "kvstore"} == {"only in A"}
    text = run_hoh("bench", "report", hoh, "--compare", vanilla, "--compare", cold)
    assert "B over A: 0 wins, 0 ties, 1 losses on 1 tasks · win rate 0.000" in text.stdout
    assert "Dominance" in text.stdout
