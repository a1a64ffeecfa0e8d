"""Budgets over a whole run: a token, a cost and a wall-clock budget stop a run before the attempt that would
pass them, the overrun is bounded by one attempt and reported, `hoh resume --set` raises a budget and the
run finishes as an uninterrupted one would. Costs: the harness's own figure, a configured price, the
price table, or unknown (never 0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import Project, mini_script, run_hoh
from test_resume import snapshot

from hoh import api
from hoh.config import HarnessConfig, HohConfig, PriceConfig, apply_overrides
from hoh.usage import Usage
from hoh.harness.pricing import cost_usage, priced_cost, table_cost

TOKENS = {"planner": 1000, "developer": 2000, "qa": 1000}


def metered(loops: int, tokens: dict[str, int] = TOKENS, cost: dict[str, float] | None = None) -> dict:
    """The mini project, each role's run reporting fixed token counts (and, if given, its own cost)."""
    script = mini_script(loops)
    for t in range(1, loops + 1):
        for role, n in tokens.items():
            usage = {"input_tokens": n * 6 // 10, "output_tokens": n - n * 6 // 10}
            if cost:
                usage["cost_usd"] = cost[role]
            script["loops"][t][role]["usage"] = usage
    return script


def events(ws: Path) -> list[dict]:
    return [json.loads(line) for line in (ws / "state" / "journal.jsonl").read_text().splitlines()]


def attempts(ws: Path) -> list[dict]:
    return [e for e in events(ws) if e["event"] == "attempt_finished"]


def status(ws: Path) -> dict:
    result = run_hoh("status", "-w", ws, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def new_project(tmp_path: Path, script: dict, name: str = "p") -> Project:
    (tmp_path / name).mkdir()
    return Project(tmp_path / name, script)


def reference_run(tmp_path: Path, script: dict, loops: int) -> Path:
    """The same script built without interruption, for comparing state."""
    p = new_project(tmp_path, script, "reference")
    result = run_hoh("build", p.spec, "-w", p.ws, "--loops", loops, "-q")
    assert result.returncode == 0, result.stderr
    return p.ws


def test_a_token_budget_stops_before_the_attempt_that_would_pass_it_and_resume_finishes(tmp_path):
    script = metered(3)
    reference = reference_run(tmp_path, script, 3)
    p = new_project(tmp_path, script)
    built = run_hoh("build", p.spec, "-w", p.ws, "--loops", "3", "-q", "--set", "budget.tokens=9000")
    assert built.returncode == 3, built.stderr
    assert "budget_exhausted" in built.stderr and "--set budget." in built.stderr
    journal = events(p.ws)
    # Loop 3's Planner brought the spend to exactly 9,000; its Developer (2,000 last time) would pass it.
    stop = next(e for e in journal if e["event"] == "budget_stop")
    assert (stop["loop"], stop["role"], stop["budget"]) == (3, "developer", "tokens")
    assert (stop["spent"], stop["estimate"], stop["limit"]) == (9000, 2000, 9000)
    assert not [e for e in journal if e["event"] == "attempt_started" and e["loop"] == 3 and e["role"] != "planner"]
    assert journal[-1]["event"] == "run_finished" and journal[-1]["status"] == "budget_exhausted"
    shown = status(p.ws)
    assert shown["state"] == "budget_exhausted" and shown["tokens"] == 9000
    assert shown["budget"]["tokens"] == {"limit": 9000, "spent": 9000, "overrun": 0}
    eta = shown["eta"]  # from the loop rate: one loop to go, at the mean pace of the two finished ones
    assert eta["remaining_loops"] == 1 and eta["at"] is None
    assert eta["seconds_per_loop"] == pytest.approx(sum(lp["seconds"] for lp in shown["loops"][:2]) / 2, abs=0.1)
    assert "ETA " in run_hoh("status", "-w", p.ws).stdout
    assert shown["stop_reason"]["status"] == "budget_exhausted" and "budget.tokens" in shown["stop_reason"]["error"]
    assert {k: shown["stop_reason"][k] for k in ("budget", "role", "loop", "spent", "estimate")} == {
        "budget": "tokens", "role": "developer", "loop": 3, "spent": 9000, "estimate": 2000}

    resumed = run_hoh("resume", "-w", p.ws, "-q", "--set", "budget.tokens=20000")
    assert resumed.returncode == 0, resumed.stderr
    assert yaml.safe_load((p.ws / "hoh.yaml").read_text())["budget"]["tokens"] == 20000
    assert status(p.ws)["tokens"] == 12000 and status(p.ws)["loops_finished"] == 3
    assert snapshot(p.ws) == snapshot(reference)  # stopped and resumed, the same state as without a budget


def test_a_cost_budget_priced_by_the_table_stops_and_resumes(tmp_path):
    from genai_prices import Usage as TableUsage
    from genai_prices import calc_price
    script = metered(3)
    p = new_project(tmp_path, script)
    model = ["--set", "harness.model=gpt-4o"]
    built = run_hoh("build", p.spec, "-w", p.ws, "--loops", "3", "-q", "--set", "budget.cost_usd=0.05", *model)
    assert built.returncode == 3, built.stderr
    for a in attempts(p.ws):  # every attempt priced from its tokens by the table, independently recomputed
        u = a["usage"]
        expected = float(calc_price(TableUsage(input_tokens=u["input_tokens"], output_tokens=u["output_tokens"]),
                                    "gpt-4o").total_price)
        assert a["cost_source"] == "table" and a["model"] == "gpt-4o"
        assert u["cost_usd"] == pytest.approx(expected) and expected > 0
    stop = next(e for e in events(p.ws) if e["event"] == "budget_stop")
    assert stop["budget"] == "cost_usd" and stop["spent"] <= 0.05 < stop["spent"] + stop["estimate"]
    spent = sum(a["usage"]["cost_usd"] for a in attempts(p.ws))
    assert status(p.ws)["cost_usd"] == pytest.approx(spent) and spent <= 0.05
    resumed = run_hoh("resume", "-w", p.ws, "-q", "--set", "budget.cost_usd=1")
    assert resumed.returncode == 0, resumed.stderr
    assert status(p.ws)["state"] == "finished" and status(p.ws)["loops_finished"] == 3


def test_the_overrun_is_at_most_one_attempt_and_is_reported(tmp_path):
    p = new_project(tmp_path, metered(1))
    # The Developer's first attempt has nothing to be estimated from: it may pass the budget, once.
    built = run_hoh("build", p.spec, "-w", p.ws, "--loops", "1", "-q", "--set", "budget.tokens=1500")
    assert built.returncode == 3
    done = attempts(p.ws)
    assert [a["role"] for a in done] == ["planner", "developer"]
    last = done[-1]["usage"]["input_tokens"] + done[-1]["usage"]["output_tokens"]
    shown = status(p.ws)["budget"]["tokens"]
    assert shown["spent"] == 3000 and shown["overrun"] == 1500 and 0 < shown["overrun"] <= last
    stop = next(e for e in events(p.ws) if e["event"] == "budget_stop")
    assert (stop["role"], stop["spent"]) == ("qa", 3000)
    human = run_hoh("status", "-w", p.ws)
    assert "tokens 3,000 / 1,500 (over by 1,500)" in human.stdout


def test_a_wall_clock_budget(tmp_path):
    script = metered(2)
    script["loops"][1]["developer"]["actions"].insert(0, {"sleep": 1.5})
    p = new_project(tmp_path, script)
    built = run_hoh("build", p.spec, "-w", p.ws, "--loops", "2", "-q", "--set", "budget.wall_hours=0.0003")
    assert built.returncode == 3
    stop = next(e for e in events(p.ws) if e["event"] == "budget_stop")
    assert stop["budget"] == "wall_hours" and stop["spent"] >= 0.0003 - stop["estimate"]
    assert status(p.ws)["state"] == "budget_exhausted"


def test_the_harness_figure_wins_over_the_table(tmp_path):
    cost = {"planner": 0.5, "developer": 0.25, "qa": 0.125}
    p = new_project(tmp_path, metered(1, cost=cost))
    assert p.build(1, {"harness.model": "gpt-4o"}).status == "finished"
    recorded = {a["role"]: (a["usage"]["cost_usd"], a["cost_source"]) for a in attempts(p.ws)}
    assert recorded == {role: (c, "harness") for role, c in cost.items()}
    assert api.status(p.ws)["cost_usd"] == pytest.approx(0.875)


def test_a_cost_budget_with_an_unpriced_model_is_refused_at_start(tmp_path):
    p = new_project(tmp_path, metered(1))
    for sets, needle in ((["budget.cost_usd=1"], "scripted's default model"),
                         (["budget.cost_usd=1", "harness.model=mock-model"], "model 'mock-model'"),
                         (["budget.cost_usd=1", "harness.model=gpt-4o", "roles.qa.model=mock-qa"], "model 'mock-qa'")):
        result = run_hoh("build", p.spec, "-w", p.ws, "-q", *[a for s in sets for a in ("--set", s)])
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and "budget.cost_usd" in lines[0] and needle in lines[0]
        assert not p.ws.exists()
    # A price for the model makes the same budget acceptable; on resume a bad --set changes nothing.
    ok = run_hoh("build", p.spec, "-w", p.ws, "-q", "-n", "1", "--set", "budget.cost_usd=1",
                 "--set", "harness.model=mock-model", "--set", "harness.price={input: 3, output: 15}")
    assert ok.returncode == 0, ok.stderr
    assert {a["cost_source"] for a in attempts(p.ws)} == {"price"}
    before = (p.ws / "hoh.yaml").read_bytes()
    refused = run_hoh("resume", "-w", p.ws, "--loops", "1", "--set", "harness.model=unpriced-x", "--set",
                      "harness.price=null")
    assert refused.returncode == 2 and "model 'unpriced-x'" in refused.stderr
    assert (p.ws / "hoh.yaml").read_bytes() == before and len(attempts(p.ws)) == 3


@pytest.mark.parametrize("setting,needle", [
    ("budget.tokens=-5", "budget.tokens"), ("budget.cost_usd=abc", "budget.cost_usd"),
    ("budget.wall_hours=0", "budget.wall_hours"), ("budget.tokens=yes", "budget.tokens"),
    ("policy.patience=0", "policy.patience"), ("roles.tester.model=x", "roles.tester"),
    ("roles.qa.harness=nope", "roles.qa.harness"), ("hooks.on_stop=''", "hooks.on_stop"),
])
def test_bad_long_run_settings_fail_cleanly(tmp_path, setting, needle):
    p = new_project(tmp_path, metered(1))
    result = run_hoh("build", p.spec, "-w", p.ws, "--set", setting)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and needle in lines[0], result.stderr
    assert not p.ws.exists()
    assert p.build(1).status == "finished"  # the same on resume: nothing written, nothing run
    before = (p.ws / "hoh.yaml").read_bytes()
    again = run_hoh("resume", "-w", p.ws, "--loops", "1", "--set", setting)
    assert again.returncode == 2 and needle in again.stderr and (p.ws / "hoh.yaml").read_bytes() == before
    assert len(attempts(p.ws)) == 3


def test_a_per_role_harness_that_is_not_installed_is_named(tmp_path):
    import os
    import subprocess
    import sys
    p = new_project(tmp_path, metered(1))
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-m", "hoh", "build", str(p.spec), "-H", "scripted", "-w", str(p.ws), "--set",
                             "roles.qa.harness=codex"], env=env, capture_output=True, text=True)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1
    assert lines[0].startswith("hoh: roles.qa.harness: codex:") and "npm install -g @openai/codex" in lines[0]
    assert not p.ws.exists()


# ---- cost, unit by unit -------------------------------------------------------------------------
def test_table_prices_cache_reads_as_such_and_unknown_models_stay_unknown():
    fresh = table_cost(Usage(1_000_000, 0, 0), "gpt-4o")
    cached = table_cost(Usage(1_000_000, 1_000_000, 0), "gpt-4o")
    assert fresh == pytest.approx(2.5) and cached == pytest.approx(1.25)  # gpt-4o: $2.50 in, $1.25 cached
    assert table_cost(Usage(10, 0, 10), "openai/gpt-4o") == table_cost(Usage(10, 0, 10), "gpt-4o")
    assert table_cost(Usage(10, 0, 10), "mock-model") is None and table_cost(Usage(10, 0, 10), None) is None
    assert priced_cost(Usage(2_000_000, 1_000_000, 1_000_000), PriceConfig(input=3, output=15, cache_read=0.3)) == \
        pytest.approx(3 + 0.3 + 15)


def test_cost_sources_in_order():
    reported = Usage(100, 0, 50, 0, 0.42)
    table = HarnessConfig(model="gpt-4o")
    assert cost_usage(reported, table, True) == (reported, "harness")
    # A figure the CLI cannot really know (Pi or OpenCode on an endpoint of hoh's, reporting 0) is not taken.
    usage, source = cost_usage(Usage(100, 0, 50, 0, 0.0), table, False)
    assert source == "table" and usage.cost_usd == pytest.approx(table_cost(Usage(100, 0, 50), "gpt-4o"))
    priced = HarnessConfig(model="gpt-4o", price=PriceConfig(input=1, output=1))
    assert cost_usage(Usage(1_000_000, 0, 0), priced, True)[1] == "price"
    assert cost_usage(Usage(100, 0, 50, 0, 0.0), HarnessConfig(model="mock-model"), False) == \
        (Usage(100, 0, 50, 0, None), None)


def test_role_settings_layer_over_the_harness():
    from hoh.config import role_harness
    config = apply_overrides(HohConfig(), ["harness.name=pi", "harness.model=big", "harness.extra_args=[-x]",
                                           "harness.price={input: 1, output: 2}", "roles.planner.model=small",
                                           "roles.qa.harness=codex"])
    planner, developer, qa = (role_harness(config, r) for r in ("planner", "developer", "qa"))
    assert (planner.name, planner.model, planner.price, planner.extra_args) == ("pi", "small", None, ["-x"])
    assert (developer.name, developer.model, developer.price.input) == ("pi", "big", 1)
    assert (qa.name, qa.model, qa.extra_args) == ("codex", "big", [])
