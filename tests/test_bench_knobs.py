"""Harbor's knobs through `hoh bench run` on a real Docker engine: --agent-timeout-multiplier, --ak, --ae
and --ek each reach the trials (Harbor's trial configs, what the oracle's solve.sh saw, hoh's budget, the
containers docker kept); an --ae value reaches the agent and is nowhere under OUT; bad values are refused
in one line before OUT exists. What `hoh bench` prints is hoh's own (no LiteLLM warnings), and an
interrupted run's containers do not outlive it. Needs Harbor and Docker (see harbor_env.py)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml
from harbor_env import (BASE_IMAGE, EXAMPLES, compose_containers, containers_of_job, copy_task, harbor,  # noqa: F401
                        remove_compose_projects)

from hoh.bench.jobs import Running, remove_leftovers
from hoh.bench.results import trial_results
from hoh.harness.process import run_process
from hoh.paths import AgentRunPaths

COST_MAP = "LITELLM_LOCAL_MODEL_COST_MAP"
PROBE = 'printf "probe %s %s\\n" "$(printf %s "$HOH_PROBE" | sha256sum | cut -c1-64)" ' \
        '"$(printf %s "$HOH_PROBE_LIT" | sha256sum | cut -c1-64)"\n'


def hoh_as_users_run_it(harbor, *args, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`hoh ...` from Harbor's venv without the tests' LiteLLM setting: as a user's shell runs it."""
    base = {k: v for k, v in harbor.env().items() if k != COST_MAP}
    return subprocess.run([str(harbor.exe.parent / "python"), "-m", "hoh", *map(str, args)], capture_output=True,
                          text=True, timeout=900, env={**base, **(env or {})}, stdin=subprocess.DEVNULL)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def files_holding(root: Path, *needles: str) -> list[Path]:
    """`grep -rl` over everything under root."""
    return [p for p in root.rglob("*") if p.is_file() and any(n.encode() in p.read_bytes() for n in needles)]


def one_line_error(result: subprocess.CompletedProcess, message: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("hoh: ") and message in lines[0], result.stderr


def test_agent_env_reaches_the_oracle_and_no_value_is_written(harbor, tmp_path):
    secret, literal = f"from-env-{uuid.uuid4().hex}", f"on-the-line-{uuid.uuid4().hex}"
    task = copy_task("roman", tmp_path / "roman")
    solve = task / "solution" / "solve.sh"
    solve.write_text(solve.read_text() + PROBE)
    out = tmp_path / "out"
    # HOH_PROBE is not a name Harbor's redaction recognizes as secret (no KEY, TOKEN, ...): hoh must keep it out.
    argv = ("bench", "run", task, "--harness", "oracle", "--env", "docker", "-o", out, "--ae", "HOH_PROBE",
            "--ae", f"HOH_PROBE_LIT={literal}", "--agent-timeout-multiplier", "2.5", "--ek", "keep_containers=true")
    result = hoh_as_users_run_it(harbor, *argv, env={"HOH_PROBE": secret})
    job = out / "jobs" / "roman.agent"
    try:
        assert result.returncode == 0, result.stderr[-3000:]
        [(trial, trial_result)] = trial_results(job)
        assert trial_result["verifier_result"]["rewards"] == {"reward": 1.0}
        # both values reached solve.sh in the container ...
        assert f"probe {sha(secret)} {sha(literal)}" in (trial / "agent" / "oracle.txt").read_text()
        # ... and not one file under OUT holds either (run.json, hoh's JobConfig, Harbor's configs, results, logs)
        assert files_holding(out, secret, literal) == []
        config = trial_result["config"]
        assert config["agent"]["env"] == {"HOH_PROBE": "${HOH_PROBE}", "HOH_PROBE_LIT": "${HOH_PROBE_LIT}"}
        assert config["agent_timeout_multiplier"] == 2.5
        assert config["environment"]["kwargs"] == {"keep_containers": True}
        settings = json.loads((out / "run.json").read_text())["settings"]
        assert (settings["agent_env"], settings["agent_timeout_multiplier"], settings["environment_kwargs"]) == \
            (["HOH_PROBE", "HOH_PROBE_LIT"], 2.5, {"keep_containers": True})
        # --ek keep_containers reached Harbor's docker environment: it stopped the trial's container, kept it
        assert containers_of_job(job), compose_containers()
        # Harbor's own output (its log beside the JobConfig) has no LiteLLM warnings either
        assert "cost map" not in (out / "harbor" / "roman.agent.err").read_text().lower()
    finally:
        remove_compose_projects(job)  # what keep_containers kept: the stopped container and its network
    again = hoh_as_users_run_it(harbor, *argv, env={"HOH_PROBE": "another value"})  # values are not settings
    assert again.returncode == 0 and "cost map" not in again.stderr.lower(), again.stderr
    changed = [a if a != "2.5" else "3" for a in argv]
    one_line_error(hoh_as_users_run_it(harbor, *changed, env={"HOH_PROBE": secret}),
                   "agent_timeout_multiplier: 2.5 in OUT, 3.0 now")


def test_agent_kwargs_and_the_multiplier_reach_hoh_s_agent_only(harbor, tmp_path):
    task = copy_task("roman", tmp_path / "roman")
    script = yaml.safe_load((task / "scripted" / "script.yaml").read_text())
    # one loop doing what loops 1 and 2 of the task's own script do: the whole program at @1
    script["loops"][1]["developer"]["actions"] += script["loops"][2]["developer"]["actions"]
    script["loops"] = {1: script["loops"][1]}
    (tmp_path / "at-once.yaml").write_text(yaml.safe_dump(script, sort_keys=False))
    out = tmp_path / "out"
    result = harbor.hoh("bench", "run", task, "--harness", "scripted", "--loops", "1", "--env", "docker", "-o", out,
                        "--ak", f"script={tmp_path / 'at-once.yaml'}", "--agent-timeout-multiplier", "2.5")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tasks"][0]["scores"] == [1.0]  # the task's own script scores 0.5 at @1
    [(trial, agent)] = trial_results(out / "jobs" / "roman.agent")
    assert agent["config"]["agent"]["kwargs"]["script"] == str(tmp_path / "at-once.yaml")
    hoh_summary = json.loads(AgentRunPaths.for_trial(trial).summary.read_text())
    assert hoh_summary["budget_seconds"] == 600.0 * 2.5  # hoh's own budget is Harbor's multiplied timeout
    [(_, grade)] = trial_results(out / "jobs" / "roman.grade")
    assert grade["config"]["agent_timeout_multiplier"] is None  # a replay, under the task's own timeouts
    assert grade["verifier_result"]["rewards"] == {"reward": 1.0}


@pytest.mark.parametrize("args, message", [
    (["--ak", "noequals"], "--ak 'noequals': expected KEY=VALUE"),
    (["--ek", "=1"], "--ek '=1': expected KEY=VALUE"),
    (["--ak", "loops=2"], "--ak loops: hoh sets it from --loops"),
    (["--ak", "nosuch=1"], "Unknown option 'nosuch'"),
    (["--ae", "NOT-A-NAME=1"], "--ae 'NOT-A-NAME': not a variable name"),
    (["--ae", "HOH_SURELY_UNSET"], "--ae HOH_SURELY_UNSET: HOH_SURELY_UNSET is not set here"),
    (["--agent-timeout-multiplier", "0"], "--agent-timeout-multiplier must be more than 0, got 0"),
    (["--agent-timeout-multiplier", "-2"], "--agent-timeout-multiplier must be more than 0, got -2"),
])
def test_bad_knobs_are_refused_before_anything_starts(harbor, tmp_path, args, message):
    one_line_error(harbor.hoh("bench", "run", EXAMPLES, "-o", tmp_path / "out", "--harness", "scripted", *args),
                   message)
    assert not (tmp_path / "out").exists()


def test_hoh_bench_prints_no_third_party_warnings(harbor, tmp_path):
    # A model name makes Harbor's preflight parse it with LiteLLM, whose import fetches its cost map from the
    # internet (offline: four warnings and seconds of retries). The run then stops at the include filter.
    refused = hoh_as_users_run_it(harbor, "bench", "run", EXAMPLES, "--harness", "scripted", "--model",
                                  "openai/gpt-test", "--env", "docker", "-o", tmp_path / "out", "--include", "none-*")
    one_line_error(refused, "No tasks matched the filter")
    listed = hoh_as_users_run_it(harbor, "bench", "list", Path(__file__).parent / "data" / "bench_shapes" / "steps")
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    assert "LiteLLM" not in listed.stdout + refused.stdout


def test_leftover_containers_of_a_job_are_removed_and_no_others(harbor, tmp_path):
    job = tmp_path / "jobs" / "roman.agent"
    (job / "Roman__AbC1234").mkdir(parents=True)  # a trial dir: its compose project is roman__abc1234__env
    made = {}
    for project in ("roman__abc1234__env", "roman__abc1234__verifier__tests", "roman__other99__env"):
        created = subprocess.run(["docker", "create", "--label", f"com.docker.compose.project={project}", BASE_IMAGE,
                                  "true"], capture_output=True, text=True, timeout=60, check=True)
        made[project] = created.stdout.strip()[:12]
    try:
        removed = remove_leftovers(job)
        left = {project for _, project in compose_containers()}
        assert "roman__other99__env" in left  # another trial's (another job's, another run's) is kept
        assert not left & {"roman__abc1234__env", "roman__abc1234__verifier__tests"}
        assert sorted(r[:12] for r in removed) == sorted([made["roman__abc1234__env"],
                                                           made["roman__abc1234__verifier__tests"]])
    finally:
        subprocess.run(["docker", "rm", "-f", *made.values()], capture_output=True, timeout=60)


def test_a_harbor_that_ignores_the_interrupt_is_killed_after_the_grace_period(tmp_path):
    running = Running(grace=1.0)
    stubborn = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                "print('up', flush=True); time.sleep(600)"]
    box = {}

    def run() -> None:
        box["result"] = run_process(stubborn, cwd=tmp_path, env=dict(os.environ), stdin=None,
                                    stdout_path=tmp_path / "out", stderr_path=tmp_path / "err",
                                    wall_timeout=float("inf"), idle_timeout=float("inf"), on_spawn=running.add)

    thread = threading.Thread(target=run)
    thread.start()
    while not (tmp_path / "out").exists() or "up" not in (tmp_path / "out").read_text():
        time.sleep(0.05)
    started = time.monotonic()
    running.stop()
    thread.join(timeout=30)
    assert not thread.is_alive() and box["result"].exit_code == -9
    assert 0.9 < time.monotonic() - started < 10


def test_knobs_parse_as_harbor_s_and_values_stay_out_of_the_configs():
    from hoh.bench.settings import BenchSettings, parse_agent_env, parse_kwargs
    assert parse_kwargs("--ak", ["n=2", "on=true", "py=False", "none=None", "s=two words", 'j={"a": [1]}', "e="]) == \
        {"n": 2, "on": True, "py": False, "none": None, "s": "two words", "j": {"a": [1]}, "e": ""}
    assert parse_agent_env(["A", "B=given=here"], environ={"A": "from-env"}) == {"A": "from-env", "B": "given=here"}
    settings = BenchSettings(suite="s", harness="scripted", agent_env=["A", "B"], agent_kwargs={"script": "x.yaml"},
                             environment_kwargs={"keep_containers": True})
    agent = settings.agent_config(None)
    assert agent["env"] == {"A": "${A}", "B": "${B}"} and agent["kwargs"]["script"] == "x.yaml"
    assert settings.environment_config() == {"type": "docker", "kwargs": {"keep_containers": True}}
    oracle = BenchSettings(suite="s", harness="oracle", agent_kwargs={"k": 1}).agent_config(None)
    assert oracle == {"name": "oracle", "kwargs": {"k": 1}}
