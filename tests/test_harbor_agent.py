"""hoh as a Harbor agent, end to end: the real `harbor` CLI runs the examples in real Docker containers
with Harbor's own oracle and with `hoh.harbor:HohAgent`, whose Runtime runs in the Harbor process while
every role runs in the trial's container (the scripted harness, and the real OpenCode CLI against hoh's
mock model on a plain Debian image without Python and git); Harbor's verifier grades every trial.
Asserted on what the jobs leave on disk: result.json, the hoh workspace and the candidates it kept.
Needs Harbor and Docker (see harbor_env.py)."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml
from harbor_env import EXAMPLES, Trial, bare_task, copy_task, harbor, image_has  # noqa: F401 - harbor is a fixture

from hoh import api
from hoh.bench.results import trial_results
from hoh.config import HohConfig
from hoh.harness.sandbox import PLACEHOLDER_KEY
from hoh.store.journal import Journal, RunHistory
from hoh.testing.demo_mock import mock_script
from hoh.testing.mock_llm import MockLLM

AGENT = ("--agent", "hoh.harbor:HohAgent")
SENTINEL = "sk-hoh-sentinel-4b1d"
TASKS = ["csvstat", "kvstore", "roman", "rpn", "wordfreq"]


def members(tar_path: Path) -> set[str]:
    with tarfile.open(tar_path) as tar:
        return {m.name for m in tar.getmembers() if m.isfile()}


def frozen(trial: Trial, t: int) -> dict:
    return json.loads((trial.ws / "state" / "loops" / f"{t:04d}" / "candidate.json").read_text())


OPTIONS = """
import json, sys
from hoh.harbor import HohAgent, HohAgentOptions
compose = lambda model=None, **kw: HohAgent.compose_config(HohAgentOptions(**kw), model)
config = sys.argv[1]
out = {}
c = compose(config=config)
out["file"] = [c.harness.name, c.loops, c.harness.model]
c = compose(model="m", config=config, loops=5, overrides=["policy.max_retries=7", "loops=6"])
out["layered"] = [c.harness.name, c.loops, c.harness.model, c.policy.max_retries]
c = compose(harness="scripted", script="s.yaml")
out["scripted"] = [c.harness.script, c.loops]
for bad in ({"harness": "nope"}, {"overrides": ["no.such.key=1"]}, {"overrides": ["loops=0"]}, {}):
    try:
        compose(**bad)
    except ValueError as err:
        out.setdefault("errors", []).append(str(err))
print(json.dumps(out))
"""


def test_agent_options_layer_over_a_hoh_config_and_bad_ones_are_one_line(harbor, tmp_path):
    config = tmp_path / "hoh.yaml"
    config.write_text("harness: {name: opencode, model: big}\nloops: 4\n")
    result = harbor.python(OPTIONS.replace("sys.argv[1]", repr(str(config))))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["file"] == ["opencode", 4, "big"]
    assert out["layered"] == ["opencode", 6, "m", 7]
    assert out["scripted"] == ["s.yaml", 3]  # pointed at its upload only once uploaded (upload_inputs)
    assert len(out["errors"]) == 4 and all(e.startswith("hoh agent: ") and "\n" not in e for e in out["errors"])
    assert "unknown harness 'nope'" in out["errors"][0]
    assert "no harness chosen: pass --ak harness=NAME" in out["errors"][3]


def test_examples_are_valid_harbor_tasks_and_the_oracle_scores_one_on_each(harbor, tmp_path):
    assert harbor.lint(*(EXAMPLES / t for t in TASKS)) == []
    trials = harbor.run(EXAMPLES, tmp_path / "jobs", "oracle", "--agent", "oracle", "-n", "2")
    assert [t.task for t in trials] == [f"hoh-examples/{t}" for t in TASKS]
    for trial in trials:
        assert trial.exception is None, trial.exception
        assert trial.result["verifier_result"]["rewards"] == {"reward": 1.0}, trial.task


def test_hoh_with_the_scripted_harness_builds_in_the_container_loop_by_loop(harbor, tmp_path):
    """Two trials at once in one Harbor process: each Runtime here, each role in its own trial's container."""
    suite = tmp_path / "suite"
    for name in ("roman", "kvstore"):
        copy_task(name, suite / name)
    attach_checks(suite / "roman", ["T1.A1", "T1.A2"], ["roman.py"])
    # A server on this machine, named as Docker Desktop names the host: hoh (here) reaches it.
    with MockLLM() as host_server:
        port = host_server.port
        trials = harbor.run(suite, tmp_path / "jobs", "scripted", *AGENT, "--ak", "harness=scripted",
                            "--ak", "loops=2", "-n", "2", "--ak", f"base_url=http://host.docker.internal:{port}/v1")
    roman = {t.task: t for t in trials}["hoh-examples/roman"]
    for trial in trials:
        assert trial.exception is None, trial.exception
        assert trial.reward == 1.0, trial.task
        ws = trial.ws
        for name in ("journal.jsonl", "ledger.json", "INDEX.md"):
            assert (ws / "state" / name).is_file()
        history = RunHistory.read(Journal(ws / "state" / "journal.jsonl"))
        assert [(t, loop.status) for t, loop in sorted(history.loops.items())] == [(1, "partial"), (2, "pass")]
        for t in (1, 2):
            artifact = json.loads((trial.candidate_dir(t) / "candidate.json").read_text())
            assert artifact["candidate_id"] == frozen(trial, t)["candidate_id"] == history.loops[t].candidate_id
            assert artifact["workdir"] == "/workspace"
            assert (trial.candidate_dir(t) / "candidate.tar").is_file()
        assert not trial.candidate_dir(3).exists()
        agent_result = trial.result["agent_result"]
        assert agent_result["n_input_tokens"] == history.usage.input_tokens > 0
        assert agent_result["n_output_tokens"] == history.usage.output_tokens > 0
        assert [loop["verdict"] for loop in agent_result["metadata"]["hoh"]["loops"]] == ["partial", "pass"]
        summary = trial.hoh_summary()
        assert summary["workdir"] == "/workspace"
        assert summary["base_url"] == f"http://127.0.0.1:{port}/v1"
        assert not (trial.dir / "agent" / "hoh").exists()  # nothing of hoh's state in the dir mounted into the container
    # Loop 1 wrote half the program, loop 2 the rest: each artifact is that loop's tree.
    assert members(roman.candidate_dir(1) / "candidate.tar") == {"roman.py"}
    assert members(roman.candidate_dir(2) / "candidate.tar") == {"roman.py", "roman_parse.py"}
    assert "hoh loop 2/2: pass" in roman.hoh.log.read_text()
    # QA's two `to` checks, admitted in loop 1 and replayed on loop 2's candidate, both run in the container.
    checks = json.loads((roman.ws / "state" / "checks.json").read_text())
    assert [c["id"] for c in checks["checks"]] == ["C-0001", "C-0002"]
    replayed = json.loads((roman.ws / "state" / "loops" / "0002" / "replay.json").read_text())
    assert [(r["id"], r["status"]) for r in replayed["results"]] == [("C-0001", "passed"), ("C-0002", "passed")]


def test_the_key_given_with_ae_is_in_no_process_of_the_trials_container(harbor, tmp_path):
    """Harbor lays the agent's `--ae` values over every `exec` of its phase; hoh takes the key from them for its
    proxy, and its own execs carry none: a Developer reading every process's environment in the container (the
    supervisor, the shell of hoh's exec, itself) finds the placeholder only: the scripted harness needs no model, so
    its role has no network and no proxy, and a role that can reach nothing gets no key."""
    suite = tmp_path / "suite"
    task = copy_task("roman", suite / "roman")
    script = task / "scripted" / "script.yaml"
    data = yaml.safe_load(script.read_text())
    probe = "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f 2>/dev/null; echo; done | grep -a HOH_TEST_KEY"
    data["loops"][1]["developer"]["actions"].append({"run": probe, "save": "ENVIRON.txt"})
    script.write_text(yaml.safe_dump(data, sort_keys=False))
    with MockLLM() as host_server:
        [trial] = harbor.run(suite, tmp_path / "jobs", "ae", *AGENT, "--ak", "harness=scripted", "--ak", "loops=1",
                             "--ak", f"base_url=http://host.docker.internal:{host_server.port}/v1",
                             "--ak", "api_key_env=HOH_TEST_KEY", "--ae", f"HOH_TEST_KEY={SENTINEL}")
    assert trial.exception is None, trial.exception
    with tarfile.open(trial.candidate_dir(1) / "candidate.tar") as tar:
        seen = tar.extractfile("ENVIRON.txt").read().decode()
    assert f"HOH_TEST_KEY={PLACEHOLDER_KEY}" in seen, seen  # the probe read the CLI's own
    assert SENTINEL not in seen


def attach_checks(task: Path, ids: list[str], paths: list[str]) -> None:
    """The task's scripted QA attaches these criteria's checks (for hoh to admit and replay in the container);
    only here, so the other trials of the example pay for no check runs in their containers."""
    script = task / "scripted" / "script.yaml"
    data = yaml.safe_load(script.read_text())
    for check in data["checks"]:  # every loop's QA shares this list (a YAML alias)
        if check["id"] in ids:
            check["attach"] = {"paths": paths}
    script.write_text(yaml.safe_dump(data, sort_keys=False))


def replay_script(task: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The task's scripted build, run here, as a mock-model script a real CLI replays; and its workspace."""
    ref = tmp_path / "ref"
    ref.mkdir()
    shutil.copy(task / "instruction.md", ref / "spec.md")
    (ref / "project").mkdir()
    (ref / "project" / "NOTES.md").write_text("given by the task\n")
    config = HohConfig(loops=2).model_copy(update={"harness": HohConfig().harness.model_copy(
        update={"name": "scripted", "script": str(task / "scripted" / "script.yaml")})})
    assert api.build(ref / "spec.md", ref / "ws", config, project=ref / "project").status == "finished"
    mock = tmp_path / "mock.json"
    mock.write_text(json.dumps(mock_script(yaml.safe_load((task / "scripted" / "script.yaml").read_text()), ref / "ws")))
    return mock, ref / "ws"


def test_hoh_with_the_real_opencode_cli_on_an_image_without_python_and_git(harbor, harness_bin, tmp_path):
    """OpenCode's own binary, uploaded from this machine into a plain Debian container that has neither
    Python nor git, replays the scripted build through its own tools against hoh's mock model served on this
    machine (reached through hoh's egress proxy on the container's gateway): same trees, same candidate ids;
    A_0 is the file the image put in the workdir, and a shell-only verifier grades the last candidate."""
    task = bare_task(tmp_path / "kvbare")
    assert image_has(task / "environment", "hoh-test-kvbare", "python3", "git", "bash", "awk") == \
        ["/usr/bin/bash", "/usr/bin/awk"]
    mock, ref = replay_script(task, tmp_path)

    # The key comes through Harbor's --ae and hoh's api_key_env; it stays in hoh's egress proxy here, the CLI
    # gets the attempt's token, and hoh redacts the key from everything it writes.
    [trial] = harbor.run(task, tmp_path / "jobs", "opencode", *AGENT, "-m", "mock-model", "--ak", "harness=opencode",
                         "--ak", "loops=2", "--ak", f"mock_llm={mock}", "--ak", f"harness_bin={harness_bin}",
                         "--ak", "api_key_env=HOH_TEST_KEY", "--ae", f"HOH_TEST_KEY={SENTINEL}")
    assert trial.exception is None, trial.exception
    assert trial.reward == 1.0
    history = RunHistory.read(Journal(trial.ws / "state" / "journal.jsonl"))
    assert trial.hoh_summary()["harness"] == "opencode"
    assert [loop.candidate_id for loop in history.loop_list()] == [loop["candidate_id"] for loop in
                                                                   api.status(ref)["loops"]]
    developer = json.loads((trial.ws / "state" / "loops" / "0001" / "roles" / "developer" / "attempt-1"
                            / "result.json").read_text())
    assert developer["ok"] and developer["harness"]["tool_calls"] >= 1
    assert trial.result["agent_result"]["n_input_tokens"] == history.usage.input_tokens > 0
    for t, files in ((1, {"NOTES.md", "kv.sh"}), (2, {"NOTES.md", "kv.sh", "selftest.sh"})):
        assert members(trial.candidate_dir(t) / "candidate.tar") == files
        artifact = json.loads((trial.candidate_dir(t) / "candidate.json").read_text())
        assert artifact["candidate_id"] == history.loops[t].candidate_id and artifact["workdir"] == "/workspace"
    with tarfile.open(trial.candidate_dir(2) / "candidate.tar") as tar:  # written by OpenCode's own tools
        assert tar.getmember("kv.sh").mode & 0o111
    requests = [json.loads(line) for line in trial.hoh.mock_log.read_text().splitlines()]
    assert requests and {r["headers"]["authorization"] for r in requests} == {f"<redacted len={len('Bearer ' + SENTINEL)}>"}
    written = [p for p in trial.hoh.root.rglob("*") if p.is_file() and not p.is_symlink()]
    assert not [p for p in written if SENTINEL.encode() in p.read_bytes()]


def test_hoh_bench_grades_every_loop_of_the_real_opencode_cli_on_an_image_without_python_and_git(
        harbor, harness_bin, tmp_path):
    """`hoh bench run` with OpenCode against hoh's mock model (a server on this machine, given as --base-url):
    hoh's agent in Harbor, then every loop's candidate replayed into a fresh container of the bare image and
    graded by the task's own (shell-only) verifier."""
    suite = tmp_path / "suite"
    task = bare_task(suite / "kvbare")
    mock, ref = replay_script(task, tmp_path)
    out = tmp_path / "out"
    with MockLLM(script=str(mock)) as server:
        result = harbor.hoh("bench", "run", suite, "--harness", "opencode", "--model", "mock-model", "--base-url",
                            server.base_url, "--loops", "2", "--env", "docker", "-o", out, "-q",
                            env={"HOH_HARNESS_BIN": str(harness_bin)})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    [record] = json.loads((out / "summary.json").read_text())["tasks"]
    assert record["outcome"] == "completed" and record["scores"] == [0.5, 1.0], record
    assert record["rewards"] == {"reward": 1}  # awk's 1, as the shell-only verifier wrote it
    grades = {r["config"]["agent"]["kwargs"]["loop"]: r for _, r in trial_results(out / "jobs" / "kvbare.grade")}
    assert sorted(grades) == [1, 2]
    for t, expected in ((1, 0.5), (2, 1)):  # each grade trial replayed exactly loop t's candidate, the scripted one's
        assert grades[t]["exception_info"] is None and grades[t]["verifier_result"]["rewards"] == {"reward": expected}
        assert grades[t]["agent_result"]["metadata"]["hoh_candidate"]["candidate_id"] == \
            api.status(ref)["loops"][t - 1]["candidate_id"]
    [(_, live)] = trial_results(out / "jobs" / "kvbare.agent")
    assert live["exception_info"] is None and live["verifier_result"]["rewards"] == {"reward": 1}


def sleepy(task: Path, loop: int, role: str) -> None:
    path = task / "scripted" / "script.yaml"
    script = yaml.safe_load(path.read_text())
    entry = script["loops"][loop][role]
    entry["actions"] = [{"sleep": 600}, *entry.get("actions", [])]
    path.write_text(yaml.safe_dump(script, sort_keys=False))


def test_the_task_timeout_is_the_whole_run_s_budget(harbor, tmp_path):
    suite = tmp_path / "suite"
    cut = copy_task("roman", suite / "cut", timeout_sec=70.0)
    sleepy(cut, 2, "developer")  # loop 2 cannot finish in time
    short = copy_task("rpn", suite / "short", timeout_sec=25.0)
    sleepy(short, 1, "planner")  # not even the first role can
    trials = {t.task: t for t in harbor.run(suite, tmp_path / "jobs", "budget", *AGENT, "--ak", "harness=scripted",
                                            "--ak", "loops=2", "-n", "2")}

    cut = trials["hoh-examples/roman"]
    assert cut.exception is None, cut.exception  # a budget that ends a later loop is an ordinary end
    assert cut.reward == 0.5  # what the verifier graded is loop 1's candidate, restored
    summary = cut.hoh_summary()
    assert summary["status"] == "out_of_time" and summary["loops_finished"] == 1
    assert cut.candidate_dir(1).is_dir() and not cut.candidate_dir(2).exists()

    short = trials["hoh-examples/rpn"]
    kind, message = short.exception
    assert kind == "TaskEnvironmentError" and "\n" not in message
    assert "before hoh's first role (the planner of loop 1) finished" in message
    assert short.reward is None  # not graded: no silent zero


def test_what_the_environment_lacks_ends_the_trial_in_one_line(harbor, tmp_path):
    """One agent (the scripted harness, a role timeout of 900s), three tasks, each lacking one thing:
    the trial ends with an exception naming it, ungraded: never a silent zero."""
    suite = tmp_path / "suite"
    no_python = copy_task("wordfreq", suite / "no-python", timeout_sec=1200.0)
    dockerfile = no_python / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "RUN rm -f /usr/bin/python3*\n")
    copy_task("rpn", suite / "short", timeout_sec=600.0)
    at_root = copy_task("kvstore", suite / "at-root", timeout_sec=1200.0)
    dockerfile = at_root / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "WORKDIR /\n")
    trials = harbor.run(suite, tmp_path / "jobs", "lacks", *AGENT, "--ak", "harness=scripted", "--ak", "loops=1",
                        "--ak", 'overrides=["timeouts.wall_seconds=900"]', "-n", "3")
    expected = {"hoh-examples/wordfreq": "the scripted harness runs hoh's own agent, which needs a python3",
                "hoh-examples/rpn": "the task's agent timeout (600s) is shorter than one hoh role",
                "hoh-examples/kvstore": "the task's working directory is '/'; hoh builds the project there and "
                                        "needs a directory of its own"}
    assert {t.task for t in trials} == set(expected)
    for trial in trials:
        kind, message = trial.exception
        assert kind == "TaskEnvironmentError" and expected[trial.task] in message and "\n" not in message, message
        assert trial.reward is None


def test_an_endpoint_hoh_cannot_reach_ends_the_trial_in_one_line(harbor, tmp_path):
    [trial] = harbor.run(EXAMPLES / "wordfreq", tmp_path / "jobs", "endpoint", *AGENT, "--ak", "harness=scripted",
                         "--ak", "loops=1",
                         "--ak", "base_url=http://host.docker.internal:9/v1")
    kind, message = trial.exception
    assert kind == "TaskEnvironmentError" and "\n" not in message
    # hoh's egress proxy, here, forwards the CLI's requests: the endpoint must be reachable from here
    assert message.startswith("the model endpoint http://host.docker.internal:9/v1 (http://127.0.0.1:9/v1 here) "
                              "is not reachable from this machine (Connection refused)")
    assert trial.reward is None
