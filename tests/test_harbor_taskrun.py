"""`hoh.taskrun`, the part of the Harbor agent that runs inside a task environment, run here on
this machine: loop by loop on a workdir, one candidate artifact per finished loop, the time
budget ending a loop (the workdir goes back to the last finished candidate), and the model
endpoint as the environment sees it. No Docker, no Harbor: those are test_harbor_agent.py."""

from __future__ import annotations

import copy
import io
import json
import signal
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from hoh.errors import TaskEnvironmentError
from hoh.taskrun.endpoint import check_reachable, default_gateway, resolve_base_url

ROMAN = REPO / "benchmarks" / "examples" / "roman"


class Run:
    """A task-like layout: an instruction, a workdir, Harbor's log and artifact dirs."""

    def __init__(self, root: Path, script: dict):
        self.root = root
        self.workdir, self.logs, self.artifacts = root / "workdir", root / "logs", root / "artifacts"
        for d in (self.workdir, self.logs, self.artifacts):
            d.mkdir(parents=True)
        (root / "spec.md").write_text((ROMAN / "instruction.md").read_text())
        (root / "script.yaml").write_text(yaml.safe_dump(script, sort_keys=False))
        (root / "hoh.yaml").write_text(yaml.safe_dump({"harness": {"name": "scripted",
                                                                   "script": str(root / "script.yaml")}}))

    def taskrun(self, loops: int, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "hoh.taskrun", "--spec", self.root / "spec.md", "--project", self.workdir,
                "--config", self.root / "hoh.yaml", "--loops", str(loops), "--logs", self.logs,
                "--artifacts", self.artifacts, *extra]
        return subprocess.run(list(map(str, argv)), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def summary(self) -> dict:
        return json.loads((self.logs / "hoh-run.json").read_text())

    def artifact(self, t: int) -> tuple[dict, set[str]]:
        d = self.artifacts / "hoh" / f"loop-{t:04d}"
        with tarfile.open(d / "candidate.tar") as tar:
            names = {m.name for m in tar.getmembers() if m.isfile()}
        return json.loads((d / "candidate.json").read_text()), names

    def frozen(self, t: int) -> dict:
        return json.loads((self.logs / "hoh" / "state" / "loops" / f"{t:04d}" / "candidate.json").read_text())

    def workdir_files(self) -> set[str]:
        """The workdir's files, but its own .git (hoh publishes every loop's commit there)."""
        return {rel for p in self.workdir.rglob("*") if p.is_file()
                and not (rel := p.relative_to(self.workdir).as_posix()).startswith(".git/")}


def roman_script() -> dict:
    return yaml.safe_load((ROMAN / "scripted" / "script.yaml").read_text())


def with_sleep(script: dict, loop: int, role: str, seconds: float) -> dict:
    script = copy.deepcopy(script)
    entry = script["loops"][loop][role]
    entry["actions"] = [{"sleep": seconds}, *entry.get("actions", [])]
    return script


def test_each_finished_loop_leaves_its_candidate_and_the_workdir_holds_the_last(tmp_path):
    run = Run(tmp_path, roman_script())
    result = run.taskrun(2)
    assert result.returncode == 0, result.stderr
    summary = run.summary()
    assert summary["status"] == "finished" and summary["loops_finished"] == 2
    assert [(loop["loop"], loop["verdict"]) for loop in summary["loops"]] == [(1, "partial"), (2, "pass")]
    assert summary["usage"]["input_tokens"] > 0 and summary["usage"]["output_tokens"] > 0
    for t, files in ((1, {"roman.py"}), (2, {"roman.py", "roman_parse.py"})):
        record, names = run.artifact(t)
        frozen = run.frozen(t)
        assert record["candidate_id"] == frozen["candidate_id"] and record["commit"] == frozen["commit"]
        assert names == files
    assert run.workdir_files() == {"roman.py", "roman_parse.py"}
    with tarfile.open(run.artifacts / "hoh" / "loop-0002" / "candidate.tar") as tar:
        assert tar.extractfile("roman.py").read() == (run.workdir / "roman.py").read_bytes()
    log = (run.logs / "hoh-run.log").read_text()
    assert "hoh loop 1/2: partial" in log and "hoh loop 2/2: pass" in log


def test_the_budget_ends_a_loop_and_the_workdir_goes_back_to_the_last_candidate(tmp_path):
    run = Run(tmp_path, with_sleep(roman_script(), 2, "developer", 120))
    result = run.taskrun(2, "--budget", "15")
    assert result.returncode == 0, result.stderr
    summary = run.summary()
    assert summary["status"] == "out_of_time" and summary["loops_finished"] == 1
    assert not (run.artifacts / "hoh" / "loop-0002").exists()
    # Loop 2's developer had started (the sleep runs before it writes); loop 1's tree is what stays.
    assert run.workdir_files() == {"roman.py"}
    record, names = run.artifact(1)
    assert names == {"roman.py"}
    assert not (run.workdir / ".git").exists()  # the task's workdir had none, and hoh adds none
    journal = [json.loads(line)["event"] for line in (run.logs / "hoh" / "state" / "journal.jsonl").open()]
    assert journal[-1] == "run_finished"  # hoh was stopped the way a user stops it, not killed


def test_sigterm_from_the_agent_stops_hoh_and_restores_the_last_candidate(tmp_path):
    """What HohAgent does when Harbor cancels it: SIGTERM to the driver, which stops like at the deadline."""
    run = Run(tmp_path, with_sleep(roman_script(), 2, "developer", 120))
    argv = [sys.executable, "-m", "hoh.taskrun", "--spec", run.root / "spec.md", "--project", run.workdir,
            "--config", run.root / "hoh.yaml", "--loops", "2", "--logs", run.logs, "--artifacts", run.artifacts]
    proc = subprocess.Popen(list(map(str, argv)), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while not (run.logs / "hoh" / "state" / "loops" / "0002" / "plan.json").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.2)
    time.sleep(1)  # loop 2's developer is sleeping now
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    summary = run.summary()
    assert summary["status"] == "interrupted" and summary["loops_finished"] == 1
    assert run.workdir_files() == {"roman.py"}
    assert "Harbor stopped the agent in loop 2" in (run.logs / "hoh-run.log").read_text()


def test_a_budget_shorter_than_the_first_role_is_an_error_that_says_so(tmp_path):
    run = Run(tmp_path, with_sleep(roman_script(), 1, "planner", 120))
    (run.workdir / "given.txt").write_text("the task's starting file\n")
    result = run.taskrun(2, "--budget", "6")
    assert result.returncode == 1
    summary = run.summary()
    assert summary["status"] == "out_of_time" and summary["loops_finished"] == 0
    assert "before hoh's first role (the planner of loop 1) finished" in summary["error"]
    assert not (run.artifacts / "hoh").exists()
    assert run.workdir_files() == {"given.txt"}  # the task's files as they were


def test_the_task_s_files_and_git_history_are_loop_1_s_starting_point(tmp_path):
    run = Run(tmp_path, roman_script())
    (run.workdir / "NOTES.md").write_text("given by the task\n")
    git = ["git", "-C", str(run.workdir), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "the task's own commit"], check=True)
    task_commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert run.taskrun(2).returncode == 0
    _, names = run.artifact(1)
    assert names == {"NOTES.md", "roman.py"}
    record, _ = run.artifact(2)
    assert record["workdir"] == str(run.workdir)
    assert run.workdir_files() == {"NOTES.md", "roman.py", "roman_parse.py"}
    log = subprocess.run([*git, "log", "--format=%H", "main"], capture_output=True, text=True).stdout.split()
    assert log[0] == record["commit"] and task_commit in log  # the task's history goes on under hoh's loops


def test_a_role_failure_stops_the_run_with_hoh_s_reason(tmp_path):
    script = roman_script()
    script["loops"][2]["developer"] = {"reply_text": "not json"}
    run = Run(tmp_path, script)
    result = run.taskrun(2)
    assert result.returncode == 1
    summary = run.summary()
    assert summary["status"] == "stopped" and summary["loops_finished"] == 1
    assert "developer failed in loop 2" in summary["error"]
    assert run.workdir_files() == {"roman.py"}


def test_a_harness_hoh_cannot_start_here_is_bad_input_in_one_line(tmp_path):
    run = Run(tmp_path, roman_script())
    (run.root / "hoh.yaml").write_text(yaml.safe_dump({"harness": {"name": "opencode",
                                                                   "command": str(tmp_path / "no-such-cli")}}))
    result = run.taskrun(1)
    assert result.returncode == 2
    summary = run.summary()
    assert summary["status"] == "failed" and summary["loops_finished"] == 0
    assert "is not installed or does not run" in summary["error"] and "\n" not in summary["error"]


# ---- the endpoint ------------------------------------------------------------------------------
ROUTES = ("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
          "eth0\t00000000\t010011AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
          "eth0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n")


def test_the_docker_host_alias_becomes_the_default_gateway_where_it_does_not_resolve(tmp_path, monkeypatch):
    routes = tmp_path / "route"
    routes.write_text(ROUTES)
    assert default_gateway(routes) == "172.17.0.1"

    def no_such_host(*a, **k):
        raise socket.gaierror("not found")
    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)
    assert resolve_base_url("http://host.docker.internal:8000/v1", routes) == "http://172.17.0.1:8000/v1"
    assert resolve_base_url("https://api.example.com/v1", routes) == "https://api.example.com/v1"
    routes.write_text(ROUTES.splitlines(keepends=True)[0])
    with pytest.raises(TaskEnvironmentError, match="no default gateway"):
        resolve_base_url("http://host.docker.internal:8000/v1", routes)


def test_an_unreachable_endpoint_is_one_line_naming_it():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(TaskEnvironmentError) as err:
        check_reachable(f"http://127.0.0.1:{port}/v1", timeout=2)
    message = str(err.value)
    assert f"http://127.0.0.1:{port}/v1 is not reachable from the task environment" in message
    assert "\n" not in message
    with pytest.raises(TaskEnvironmentError, match="not an http"):
        check_reachable("localhost:8000")


def test_an_unreachable_endpoint_stops_the_run_before_hoh_starts(tmp_path):
    run = Run(tmp_path, roman_script())
    (run.root / "hoh.yaml").write_text(yaml.safe_dump({"harness": {"name": "scripted", "script": str(run.root / "script.yaml"),
                                                                   "base_url": "http://127.0.0.1:9/v1"}}))
    result = run.taskrun(1)
    assert result.returncode == 2
    summary = run.summary()
    assert summary["status"] == "failed" and "is not reachable from the task environment" in summary["error"]
    assert not (run.logs / "hoh").exists()


def test_candidate_tar_of_an_empty_project_is_a_valid_empty_tar(tmp_path):
    script = roman_script()
    script["loops"][1]["developer"]["actions"] = []
    run = Run(tmp_path, script)
    assert run.taskrun(1).returncode == 0
    with tarfile.open(fileobj=io.BytesIO((run.artifacts / "hoh" / "loop-0001" / "candidate.tar").read_bytes())) as tar:
        assert tar.getmembers() == []
