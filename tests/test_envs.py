"""Roles in Docker environments (`--env docker`): the same run as on this machine, the Runtime outside.

Each test drives the real CLI from Harbor's venv against the real Docker engine (`harbor` fixture), with the
scripted harness, and reads what the run persisted (journal, candidates) and what Docker still holds.
"""

from __future__ import annotations

import copy
import json
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import DEMO, mini_script, run_hoh, wait_for
from harbor_env import BASE_IMAGE, candidate_ids, harbor, journal, sessions  # noqa: F401 - harbor is a fixture

ENV = ("--env", "docker", "--env-image", BASE_IMAGE)
SECRET = "sk-hoh-envs-test-0123456789abcdef"


def containers() -> list[str]:
    listed = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True,
                            timeout=60, check=True)
    return listed.stdout.split()


def containers_of(ws: Path) -> list[str]:
    ids = sessions(ws)
    return [name for name in containers() if any(session in name for session in ids)]


def write_project(root: Path, script: dict[str, Any], spec: str = "# Greeter\n\nPrint a greeting.\n") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "spec.md").write_text(spec)
    (root / "script.yaml").write_text(yaml.safe_dump(script, sort_keys=False))
    return root / "spec.md"


@pytest.fixture(autouse=True)
def no_container_left(tmp_path):
    """A failed test kills its hoh; the containers of its runs go with the test, not with the machine."""
    yield
    for journal_file in tmp_path.rglob("journal.jsonl"):
        ids = {json.loads(line).get("session_id") for line in journal_file.read_text().splitlines()} - {None}
        names = [name for name in containers() if any(session in name for session in ids)]
        if names:
            subprocess.run(["docker", "rm", "-f", *names], capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def demo_local(tmp_path_factory) -> list[str]:
    ws = tmp_path_factory.mktemp("local") / "ws"
    built = run_hoh("build", DEMO / "spec.md", "--loops", "3", "-w", ws, "-q")
    assert built.returncode == 0, built.stderr
    return candidate_ids(ws)


def test_the_demo_in_docker_gives_the_local_candidates_and_leaves_no_container(harbor, tmp_path, demo_local):
    ws = tmp_path / "ws"
    built = harbor.hoh("build", DEMO / "spec.md", "--harness", "scripted", "--loops", "3", "-w", ws, "-q", *ENV)
    assert built.returncode == 0, built.stderr
    assert candidate_ids(ws) == demo_local and len(demo_local) == 3
    events = journal(ws)
    started = [e for e in events if e["event"] == "environment_started"]
    assert sorted(e["role"] for e in started) == ["developer", "planner", "qa"]
    stopped = {e["session_id"]: e for e in events if e["event"] == "environment_stopped"}
    assert set(stopped) == sessions(ws) and not any(e.get("error") for e in stopped.values())
    assert containers_of(ws) == []
    # Each attempt ran in its role's environment, not here: the record says where.
    command = json.loads(next((ws / "state" / "loops" / "0001" / "roles" / "developer").glob("attempt-*/command.json"))
                         .read_text())
    assert command["environment"] == "docker" and command["session_id"] in sessions(ws)
    # Nothing of a role writes the project here but hoh's copy-back, which the kernel's feed follows: neither the
    # freeze nor any guard scanned a whole tree.
    assert [e for e in events if e["event"] == "full_scan"] == []
    # The Developer's environment was readied while the Planner ran: its start is journaled before the Planner's
    # first attempt ended (the Runtime starts only the first role's before the run).
    seq = {(e["event"], e.get("role")): e["seq"] for e in reversed(events)}  # each one's first
    assert seq[("environment_started", "developer")] < seq[("attempt_finished", "planner")]


def slow_developer(seconds: float, loops: int = 2) -> dict[str, Any]:
    script = mini_script(loops)
    script["loops"][1]["developer"]["actions"].insert(0, {"sleep": seconds})
    return script


def running_role(ws: Path, role: str, loop: int = 1) -> str | None:
    """The role's container, once the CLI of one of its attempts in `loop` runs there."""
    try:
        events = journal(ws)
    except (OSError, ValueError):
        return None
    session = next((e["session_id"] for e in events if e["event"] == "environment_started" and e["role"] == role),
                   None)
    last = next((e for e in reversed(events) if e["event"] in ("attempt_started", "attempt_finished")), None)
    if session is None or last is None or last["event"] != "attempt_started" or last["role"] != role \
            or last["loop"] != loop:
        return None
    names = [n for n in containers() if session in n]
    attempt_dir = ws / "state" / "loops" / f"{last['loop']:04d}" / "roles" / role / f"attempt-{last['attempt']}"
    try:
        streams = json.loads((attempt_dir / "command.json").read_text())["streams"]
    except (OSError, ValueError, KeyError):
        return None
    if not names:
        return None
    probe = subprocess.run(["docker", "exec", names[0], "sh", "-c", f"test -s {streams}/pid && ! test -e {streams}/exit"],
                           capture_output=True, text=True, timeout=60)
    return names[0] if probe.returncode == 0 else None


def paused_role(ws: Path, role: str) -> str | None:
    """The role's container, once its engine holds it paused (while another role runs: hoh/envs/idle.py)."""
    session = next((e["session_id"] for e in journal(ws) if e["event"] == "environment_started" and e["role"] == role),
                   None)
    names = [n for n in containers() if session is not None and session in n]
    if not names:
        return None
    state = subprocess.run(["docker", "inspect", "-f", "{{.State.Paused}}", names[0]], capture_output=True, text=True,
                           timeout=60)
    return names[0] if state.stdout.strip() == "true" else None


def test_kill_9_during_a_docker_role_then_resume_gives_the_same_candidates_and_no_orphan(harbor, tmp_path):
    script = slow_developer(25)
    reference = write_project(tmp_path / "ref", script)
    local = run_hoh("build", reference, "--loops", "2", "-w", tmp_path / "ref" / "ws", "-q")
    assert local.returncode == 0, local.stderr
    spec = write_project(tmp_path / "p", copy.deepcopy(script))
    ws = tmp_path / "p" / "ws"
    proc = harbor.hoh_async("build", spec, "--harness", "scripted", "--loops", "2", "-w", ws, "-q", *ENV)
    try:
        container = wait_for(lambda: running_role(ws, "developer"), 180, "the developer's CLI in its container")
        # The Planner's environment is paused while the Developer runs: the resume stops it as it is.
        wait_for(lambda: paused_role(ws, "planner"), 60, "the planner's container paused")
        assert running_role(ws, "developer") == container
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert container in containers(), "the killed run's environment is still there before the resume"
    resumed = harbor.hoh("resume", "-w", ws, "-q")
    assert resumed.returncode == 0, resumed.stderr
    assert candidate_ids(ws) == candidate_ids(tmp_path / "ref" / "ws")
    orphans = [e for e in journal(ws) if e["event"] == "environment_stopped" and e.get("orphan")]
    assert len(orphans) >= 1 and all(not e.get("error") for e in orphans)
    assert containers_of(ws) == []


def inventory_in(container: str, ws: Path, forbidden: list[str]) -> dict[str, str]:
    """What the role's container holds of hoh's state, and its processes' environments, read from outside."""
    found = " ".join(f"{ws}/{rel}" for rel in forbidden)
    script = (f"for p in {found}; do [ -e \"$p\" ] && echo \"found $p\"; done; "
              "find / -xdev \\( -name journal.jsonl -o -name history.git -o -name hoh.lock \\) -print 2>/dev/null; "
              "echo ===; for d in /proc/[0-9]*; do tr '\\0' '\\n' < $d/environ 2>/dev/null; echo; done")
    result = subprocess.run(["docker", "exec", container, "sh", "-c", script], capture_output=True, text=True,
                            timeout=120)
    files, _, environ = result.stdout.partition("===")
    return {"files": files.strip(), "environ": environ}


EVERY_ROLE = ["state/journal.jsonl", "history.git", "hoh.yaml", "hoh.lock", "state/identity.json", "environments"]
FORBIDDEN = {"planner": EVERY_ROLE, "developer": [*EVERY_ROLE, "state/ledger.json", "state/INDEX.md"],
             "qa": [*EVERY_ROLE, "state/ledger.json", "state/INDEX.md", "project/.git"]}


def test_a_role_container_holds_no_journal_ledger_history_or_key(harbor, tmp_path):
    """Read each role's container from outside while its CLI runs: none of hoh's state, no key anywhere."""
    script = mini_script(2)
    for role in ("planner", "developer", "qa"):
        entry = script["loops"][2][role]
        entry["actions"] = [{"sleep": 8}, *entry.get("actions", [])]
    spec = write_project(tmp_path / "p", script)
    ws = tmp_path / "p" / "ws"
    proc = subprocess.Popen([str(harbor.exe.parent / "python"), "-m", "hoh", "build", str(spec), "--harness", "scripted",
                             "--loops", "2", "-w", str(ws), "-q", "--set", "harness.api_key_env=HOH_TEST_KEY", *ENV],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**harbor.env(), "HOH_TEST_KEY": SECRET}, stdin=subprocess.DEVNULL)
    try:
        for role in ("planner", "developer", "qa"):
            container = wait_for(lambda: running_role(ws, role, 2), 240, f"the {role}'s CLI in its container")
            seen = inventory_in(container, ws, FORBIDDEN[role])
            assert seen["files"] == "", f"{role}: {seen['files']}"
            assert "HOH_TEST_KEY=" in seen["environ"], f"{role}: the CLI's environment was not read"
            assert SECRET not in seen["environ"], f"{role}: the key is in its container"
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    for path in ws.rglob("*"):
        if path.is_file() and "state" in path.parts and path.name != "hoh.yaml":
            assert SECRET not in path.read_text(errors="replace"), path


DOCKER_SHIM = """#!/bin/sh
# Each docker client Harbor starts for hoh: its environment and its command line, then the real docker.
env > "{log}/$$.env"
printf '%s\\n' "$@" > "{log}/$$.argv"
exec {docker} "$@"
"""


def test_an_attempts_variables_reach_its_process_in_the_container_and_never_the_docker_client(harbor, tmp_path):
    """A check's env (and every variable of a role's attempt) travels in the copy and is set for the process in
    the container alone: no docker client Harbor starts on this machine has it in its environment or on its
    command line, which every user of the machine can read. Nor the model's key: Harbor starts its clients with a
    copy of hoh's environment, which holds no key while a run goes on (`keys.withheld`)."""
    value = "zq7-env-sentinel"
    script = mini_script(1)
    script["loops"][1]["qa"]["checks"] = [{"id": "T1.A1", "run": f"python3 greet.py {value}",
                                           "expect_stdout": f"hello {value}",
                                           "attach": {"command": 'python3 greet.py "$WHO"', "env": {"WHO": value}}}]
    spec = write_project(tmp_path / "p", script)
    ws = tmp_path / "p" / "ws"
    shim, log = tmp_path / "shim", tmp_path / "docker-calls"
    shim.mkdir()
    log.mkdir()
    (shim / "docker").write_text(DOCKER_SHIM.format(log=log, docker=shutil.which("docker")))
    (shim / "docker").chmod(0o755)
    env = harbor.env()
    built = harbor.hoh("build", spec, "--harness", "scripted", "--loops", "1", "-w", ws, "-q", *ENV,
                       "--set", "harness.api_key_env=HOH_TEST_KEY",
                       env={"PATH": f"{shim}:{env['PATH']}", "HOH_TEST_KEY": SECRET})
    assert built.returncode == 0, built.stderr
    [admitted] = json.loads((ws / "state/loops/0001/checks.json").read_text())["checks"]
    assert admitted["admitted"], admitted  # WHO reached the check's command in the container
    calls = sorted(log.iterdir())
    argvs = [c.read_text(errors="replace").splitlines() for c in calls if c.suffix == ".argv"]
    assert any("exec" in argv for argv in argvs), "no docker exec was seen"
    assert [c.name for c in calls if value in c.read_text(errors="replace")] == []
    assert [c.name for c in calls if SECRET in c.read_text(errors="replace")] == []
    # Neither does hoh set a variable per exec: each attempt's are in its copied-in file.
    assert not any("-e" in argv or "--env" in argv for argv in argvs)


def test_an_unknown_environment_is_one_line_and_makes_no_workspace(harbor, tmp_path):
    spec = write_project(tmp_path / "p", mini_script(1))
    result = harbor.hoh("build", spec, "--harness", "scripted", "-w", tmp_path / "ws", "--env", "nosuch", timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no such environment" in lines[0] and "docker" in lines[0], result.stderr
    assert not (tmp_path / "ws").exists()


def test_an_image_that_cannot_start_is_one_line_with_its_cause_and_makes_no_workspace(harbor, tmp_path):
    spec = write_project(tmp_path / "p", mini_script(1))
    result = harbor.hoh("build", spec, "--harness", "scripted", "-w", tmp_path / "ws", "--env", "docker",
                        "--env-image", "localhost/hoh-no-such-image:1", timeout=300)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "did not start" in lines[0], result.stderr
    assert not (tmp_path / "ws").exists()


def test_without_harbor_an_environment_says_how_to_get_it(tmp_path):
    """hoh's core (Python 3.11, no Harbor) asked for a Docker environment."""
    spec = write_project(tmp_path / "p", mini_script(1))
    try:
        import harbor  # noqa: F401
        pytest.skip("Harbor is importable here; this checks an installation without it")
    except ImportError:
        pass
    result = run_hoh("build", spec, "-w", tmp_path / "ws", "--env", "docker")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "hoh[harbor]" in lines[0], result.stderr
    assert not (tmp_path / "ws").exists()


def test_timeouts_output_cap_and_the_re_ask_hold_in_a_docker_environment(harbor, tmp_path):
    script = mini_script(1)
    loop = script["loops"][1]
    loop["planner"] = [{"reply_text": "not json"}, loop["planner"]]
    loop["developer"] = [{"actions": [{"hang": True}]}, {"actions": [{"print": "x" * 3_000_000}, {"hang": True}]},
                         loop["developer"]]
    spec = write_project(tmp_path / "p", script)
    ws = tmp_path / "p" / "ws"
    built = harbor.hoh("build", spec, "--harness", "scripted", "--loops", "1", "-w", ws, "-q", *ENV,
                       "--set", "timeouts.idle_seconds=8", "--set", "timeouts.max_output_mb=2",
                       "--set", "policy.max_retries=2")
    assert built.returncode == 0, built.stderr
    finished = [e for e in journal(ws) if e["event"] == "attempt_finished"]
    outcomes = [(e["role"], e["attempt"], e["outcome"]) for e in finished]
    assert outcomes[:2] == [("planner", 1, "ok"), ("planner", 2, "ok")]  # ok from the CLI, refused by the schema
    assert not finished[0]["ok"] and finished[1]["ok"]
    assert [o for o in outcomes if o[0] == "developer"] == [
        ("developer", 1, "idle_timeout"), ("developer", 2, "crashed"), ("developer", 3, "ok")]
    flooded = json.loads((ws / "state/loops/0001/roles/developer/attempt-2/result.json").read_text())
    assert "output flood" in flooded["harness"]["error"]
    assert (ws / "state/loops/0001/roles/developer/attempt-2/events.jsonl").stat().st_size <= 2 * 2**20
    hung = next(e for e in finished if e["role"] == "developer" and e["attempt"] == 1)
    assert 8 <= hung["seconds"] < 40
    assert [e["status"] for e in journal(ws) if e["event"] == "loop_finished"] == ["pass"]


def test_the_environments_benchmark_runs(harbor):
    """benchmarks/perf/environments.py, tiny: one and two builds at once in Docker."""
    result = subprocess.run([str(harbor.exe.parent / "python"), str(Path(__file__).parents[1] / "benchmarks" / "perf" /
                             "environments.py"), "--smoke"], capture_output=True, text=True, timeout=900,
                            env=harbor.env(), stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "1 at once" in result.stdout and "ratio 2/1" in result.stdout


def test_env_dockerfile_is_frozen_and_the_roles_run_in_its_image(harbor, tmp_path):
    script = mini_script(1)
    script["loops"][1]["developer"]["actions"].append({"run": "cat /etc/hoh-built > built.txt"})
    spec = write_project(tmp_path / "p", script)
    dockerfile = tmp_path / "p" / "Dockerfile"
    dockerfile.write_text(f"FROM {BASE_IMAGE}\nRUN echo built-by-hoh > /etc/hoh-built\n")
    ws = tmp_path / "p" / "ws"
    built = harbor.hoh("build", spec, "--harness", "scripted", "--loops", "1", "-w", ws, "-q", "--env", "docker",
                       "--env-dockerfile", dockerfile)
    assert built.returncode == 0, built.stderr
    dockerfile.write_text("FROM nothing-at-all\n")  # the workspace has its own copy
    assert (ws / "environment.Dockerfile").read_text().startswith(f"FROM {BASE_IMAGE}")
    assert yaml.safe_load((ws / "hoh.yaml").read_text())["environment"]["dockerfile"] == "environment.Dockerfile"
    assert (ws / "project" / "built.txt").read_text().strip() == "built-by-hoh"
    assert containers_of(ws) == []


def test_a_third_party_environment_gets_the_key_as_harbor_passes_it_and_what_comes_back_is_scrubbed(harbor, tmp_path):
    """`--env module:Class`: a provider hoh's proxy cannot serve (as a cloud sandbox) gets the key in its
    environment; the role's home that comes back is scrubbed of it."""
    script = mini_script(1)
    leak = "${workspace}/scratch/homes/scripted/developer/leak.txt"
    script["loops"][1]["developer"]["actions"].append({"run": "echo key=$HOH_TEST_KEY", "save": leak})
    spec = write_project(tmp_path / "p", script)
    ws = tmp_path / "p" / "ws"
    third_party = Path(__file__).parent / "data" / "thirdparty"
    built = harbor.hoh("build", spec, "--harness", "scripted", "--loops", "1", "-w", ws, "-q",
                       "--env", "acme_env:AcmeDocker", "--env-image", BASE_IMAGE, "--set", "sandbox.network=shared",
                       "--set", "harness.api_key_env=HOH_TEST_KEY",
                       env={"HOH_TEST_KEY": SECRET, "PYTHONPATH": str(third_party)})
    assert built.returncode == 0, built.stderr
    assert [e["environment"] for e in journal(ws) if e["event"] == "environment_started"] == ["acme_env:AcmeDocker"] * 3
    came_back = (ws / "scratch" / "homes" / "scripted" / "developer" / "leak.txt").read_text()
    assert came_back.startswith("key=") and SECRET not in came_back and len(came_back.strip()) > len("key=")
    assert containers_of(ws) == []


def test_the_transfer_benchmark_runs(harbor):
    """benchmarks/perf/env_transfer.py, tiny: local roles and the simulated remote sandbox (Docker behind a latency and a
    bandwidth cap) side by side; only what changed crosses after a session's first loop."""
    result = subprocess.run([str(harbor.exe.parent / "python"), str(Path(__file__).parents[1] / "benchmarks" / "perf" /
                             "env_transfer.py"), "--smoke", "--envs", "local,remote"], capture_output=True, text=True,
                            timeout=900, env=harbor.env(), stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["loop_s"]["remote-200"] > 0 and figures["remote_10n_over_n"] > 0
    # 200 files of 20 KB are 4 MB: an attempt after the first moves a few KB (the plan, a changed file, the streams)
    assert 0 < figures["max_bytes_per_attempt"]["remote-200"] < 200_000


def test_the_checks_benchmark_runs(harbor):
    """benchmarks/perf/env_checks.py, tiny: five checks admitted and replayed in QA's Docker environment and in its
    local jail, side by side."""
    result = subprocess.run([str(harbor.exe.parent / "python"), str(Path(__file__).parents[1] / "benchmarks" / "perf" /
                             "env_checks.py"), "--smoke"], capture_output=True, text=True, timeout=900,
                            env=harbor.env(), stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["checks"] == 5 and figures["replay_docker_over_local"] > 0
    assert figures["seconds"]["docker"]["replay"] > 0 and figures["seconds"]["local"]["replay"] > 0


def test_hoh_replay_runs_the_checks_in_the_workspace_s_environment_unless_told_local(harbor, tmp_path):
    """A check that holds only in a container (`/.dockerenv`), admitted in a docker run, passes when `hoh replay`
    runs it where QA ran it, and fails with `--env local`; the workspace is only read, no container is left."""
    script = mini_script(1)
    script["loops"][1]["qa"]["checks"] = [{"id": "T1.A1", "run": "test -f /.dockerenv",
                                           "attach": {"command": "test -f /.dockerenv"}}]
    spec = write_project(tmp_path, script)
    ws = tmp_path / "ws"
    built = harbor.hoh("build", spec, "--harness", "scripted", "--loops", "1", "-w", ws, "-q", *ENV)
    assert built.returncode == 0, built.stderr
    assert [e["added"] for e in journal(ws) if e["event"] == "checks_admitted"] == [1]
    before = sorted((p.relative_to(ws).as_posix(), p.stat().st_mtime_ns) for p in ws.rglob("*") if p.is_file())
    tmp = tmp_path / "tmp"  # the replays' temporary directories: their containers are told apart by them
    tmp.mkdir()
    there = harbor.hoh("replay", "-w", ws, "--json", env={"TMPDIR": str(tmp)})
    assert there.returncode == 0, there.stderr
    assert json.loads(there.stdout)["environment"] == "docker"
    assert [r["status"] for r in json.loads(there.stdout)["results"]] == ["passed"]
    here = harbor.hoh("replay", "-w", ws, "--json", "--env", "local", env={"TMPDIR": str(tmp)})
    assert here.returncode == 1, here.stderr
    assert [r["status"] for r in json.loads(here.stdout)["results"]] == ["failed"]
    after = sorted((p.relative_to(ws).as_posix(), p.stat().st_mtime_ns) for p in ws.rglob("*") if p.is_file())
    assert after == before
    assert replay_containers(tmp) == []


def replay_containers(under: Path) -> list[str]:
    """The containers (running or not) of the replays whose temporary directories are under `under`."""
    out = subprocess.run(["docker", "ps", "-a", "--format",
                          '{{.Names}} {{.Label "com.docker.compose.project.working_dir"}}'],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if f" {under}/" in line]


def test_a_killed_replay_s_container_is_stopped_by_the_next_replay(harbor, tmp_path):
    """`hoh replay` journals nothing in the workspace it only reads: its QA environment's record is in its own
    temporary directory, so after a kill -9 the next replay finds it and stops it."""
    script = mini_script(1)
    script["loops"][1]["qa"]["checks"] = [{"id": "T1.A1", "run": "sleep 5", "attach": {"command": "sleep 5"}}]
    spec = write_project(tmp_path, script)
    ws, tmp = tmp_path / "ws", tmp_path / "tmp"
    tmp.mkdir()
    built = harbor.hoh("build", spec, "--harness", "scripted", "--loops", "1", "-w", ws, "-q", *ENV)
    assert built.returncode == 0, built.stderr
    proc = harbor.hoh_async("replay", "-w", ws, "--json", env={"TMPDIR": str(tmp)})
    try:
        left = wait_for(lambda: replay_containers(tmp), 300, "the replay's QA container")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    abandoned = list(tmp.glob("hoh-past-replay-*"))
    assert len(abandoned) == 1 and (abandoned[0] / "owner.json").is_file()
    assert wait_for(lambda: set(left) <= set(replay_containers(tmp)) or None, 60, "the container after the kill")
    again = harbor.hoh("replay", "-w", ws, "--json", env={"TMPDIR": str(tmp)})
    assert again.returncode == 0, again.stderr
    assert [r["status"] for r in json.loads(again.stdout)["results"]] == ["passed"]
    assert replay_containers(tmp) == [] and list(tmp.glob("hoh-past-replay-*")) == []

