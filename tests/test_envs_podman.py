"""A second engine: the roles in Podman containers (`--env podman`), through Harbor's own PodmanEnvironment.

The README's demo built with `--env podman` must freeze the same candidates as the same build on this machine,
each role really in a container of its own with no network, and nothing of the run may stay in podman's store:
no container, no network, and the base image itself (podman-compose counts every `localhost/` image as the
project's own and `down --rmi local` force-removes it, with every container of it). What a role writes outside
its area stays in its container. The runs are made once, at the same time (`shared_once`).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import DEMO, GREET, mini_script, shared_once
from harbor_env import BASE_IMAGE, INTO_INIT, candidate_ids, finish, journal, sessions
from podman_env import containers, networks, podman, podman_harbor  # noqa: F401 - podman_harbor is a fixture

ENV = ("--env", "podman", "--env-image", BASE_IMAGE)
ROLES = ["developer", "planner", "qa"]
ESCAPE = Path("/tmp") / f"hoh-podman-escape-{uuid.uuid4().hex[:12]}"
"""A host path a role writes to from its container: it must not appear here."""


def of_sessions(names: list[str], ids: set[str]) -> list[str]:
    return [n for n in names if any(session in n for session in ids)]


def hostile_script() -> dict[str, Any]:
    """One loop whose Developer and QA write outside their areas, make a FIFO and a setuid file, and look at
    their network; the greeter is still built and checked."""
    script = mini_script(1)
    loop = script["loops"][1]
    loop["developer"]["actions"] = [
        {"write": {"path": "greet.py", "content": GREET}},
        {"run": "mkdir -p ${workspace}/state && echo forged > ${workspace}/state/pwned-by-developer; "
                f"echo forged > {ESCAPE}; echo forged > ${{workspace}}/hoh.yaml; "
                "mkfifo fifo && cp /bin/sh suid-sh && chmod 4755 suid-sh"},
        {"run": INTO_INIT},
        {"run": "cat /proc/net/route; python3 -c \"import socket; s = socket.socket(); s.settimeout(3); "
                "print('connect', s.connect_ex(('1.1.1.1', 80)))\"", "save": "network.txt"},
    ]
    loop["planner"]["reply"]["tasks"][0]["acceptance"].append(
        {"id": "T1.A2", "condition": "greet.py greets from a read-only candidate", "method": "black-box"})
    loop["qa"]["checks"].append({"id": "T1.A2", "run": f"echo forged > pwned-by-qa; echo forged > {ESCAPE}; "
                                                       "echo forged > ${project_dir}/pwned-by-qa; python3 greet.py bob",
                                 "expect_stdout": "hello bob"})
    return script


class Watch:
    """`podman ps -a` every second while the runs go: what containers they had, and how each was made."""

    def __init__(self) -> None:
        self.seen: dict[str, dict[str, Any]] = {}
        self.network: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for container in containers():
                name = container["name"]
                if name.startswith("hoh-") and name not in self.seen:
                    self.seen[name] = container
                    shown = podman("inspect", "--format", "{{.HostConfig.NetworkMode}}", name)
                    self.network[name] = shown.stdout.strip() if shown.returncode == 0 else "?"
            self._stop.wait(1.0)

    def __enter__(self) -> "Watch":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


@pytest.fixture(scope="session")
def podman_runs(podman_harbor, tmp_path_factory) -> dict[str, Any]:
    """The demo in Podman and here, and the hostile loop in Podman, all at once; a bystander container of the
    same image runs throughout."""
    record: dict[str, Any] = {}

    def make(root: Path) -> None:
        hostile = root / "hostile"
        hostile.mkdir()
        (hostile / "spec.md").write_text("# Greeter\n\nPrint a greeting.\n")
        (hostile / "script.yaml").write_text(yaml.safe_dump(hostile_script(), sort_keys=False))
        bystander = f"hoh-test-bystander-{uuid.uuid4().hex[:8]}"
        started = podman("run", "-d", "--name", bystander, "--network", "none", BASE_IMAGE, "sleep", "900")
        assert started.returncode == 0, started.stderr
        try:
            begun = time.monotonic()
            with Watch() as watch:
                finish({
                    "podman": podman_harbor.hoh_async("build", DEMO / "spec.md", "--harness", "scripted", "--loops", "3",
                                                      "-w", root / "podman", "-q", *ENV),
                    "local": podman_harbor.hoh_async("build", DEMO / "spec.md", "--harness", "scripted", "--loops",
                                                     "3", "-w", root / "local", "-q"),
                    "hostile": podman_harbor.hoh_async("build", hostile / "spec.md", "--harness", "scripted",
                                                       "--loops", "1", "-w", hostile / "ws", "-q", *ENV)},
                    timeout=600)
            seconds = time.monotonic() - begun
            bystander_state = next((c["state"] for c in containers() if c["name"] == bystander), "gone")
        finally:
            podman("rm", "-f", "-t", "0", bystander)
        (root / "record.json").write_text(json.dumps({
            "seen": watch.seen, "network": watch.network, "bystander": bystander_state, "seconds": seconds}))

    root = shared_once(tmp_path_factory, "podman-runs", make)
    record.update(json.loads((root / "record.json").read_text()))
    return {"root": root, "podman": root / "podman", "local": root / "local", "hostile": root / "hostile" / "ws",
            **record}


def test_the_demo_on_podman_gives_the_local_candidates_each_role_in_its_own_container(podman_runs):
    ws = podman_runs["podman"]
    assert candidate_ids(ws) == candidate_ids(podman_runs["local"]) and len(candidate_ids(ws)) == 3
    for t in (1, 2, 3):
        frozen = json.loads((ws / "state" / "loops" / f"{t:04d}" / "candidate.json").read_text())
        local = json.loads((podman_runs["local"] / "state" / "loops" / f"{t:04d}" / "candidate.json").read_text())
        assert frozen["candidate_id"] == local["candidate_id"] and frozen["tree"] == local["tree"]
    started = [e for e in journal(ws) if e["event"] == "environment_started"]
    assert sorted(e["role"] for e in started) == ROLES and {e["environment"] for e in started} == {"podman"}
    # Really in Podman: one container per role, named by its session, of the base image, with no network.
    seen = of_sessions(list(podman_runs["seen"]), sessions(ws))
    assert len(seen) == 3, podman_runs["seen"]
    for name in seen:
        assert podman_runs["seen"][name]["image"].endswith("hoh-base:bookworm"), podman_runs["seen"][name]
        assert podman_runs["network"][name] == "none", (name, podman_runs["network"][name])
    for attempt in (ws / "state" / "loops").glob("*/roles/*/attempt-*/command.json"):
        command = json.loads(attempt.read_text())
        assert command["environment"] == "podman" and command["session_id"] in sessions(ws), attempt


def test_a_podman_run_leaves_no_container_no_network_and_the_image_and_other_containers_alive(podman_runs):
    ws = podman_runs["podman"]
    ids = sessions(ws) | sessions(podman_runs["hostile"])
    stopped = {e["session_id"]: e for run in ("podman", "hostile") for e in journal(podman_runs[run])
               if e["event"] == "environment_stopped"}
    assert set(stopped) == ids and not any(e.get("error") or e.get("orphan") for e in stopped.values()), stopped
    assert of_sessions([c["name"] for c in containers()], ids) == []
    assert of_sessions(networks(), ids) == []
    # Harbor stops with `down --rmi local`: neither the image nor a container of it that is not the run's goes.
    assert podman("image", "exists", BASE_IMAGE).returncode == 0, f"{BASE_IMAGE} was removed from podman's store"
    assert podman_runs["bystander"] == "running", podman_runs["bystander"]
    # hoh's own files for the environments go too.
    assert not any((ws / "environments").iterdir()) if (ws / "environments").exists() else True


def test_what_a_role_writes_outside_its_area_in_podman_stays_in_its_container(podman_runs):
    ws = podman_runs["hostile"]
    assert [e["status"] for e in journal(ws) if e["event"] == "loop_finished"] == ["pass"]
    assert not ESCAPE.exists(), "a role wrote to this machine's /tmp"
    assert not (ws / "state" / "pwned-by-developer").exists()
    assert not list(ws.rglob("pwned-by-qa")), "QA's writes into the candidate came back"
    assert "forged" not in (ws / "hoh.yaml").read_text()
    project = ws / "project"
    assert (project / "greet.py").read_text() == GREET
    assert not (project / "fifo").exists() and not (project / "fifo").is_symlink(), "a FIFO came back"
    assert (project / "suid-sh").stat().st_mode & 0o6000 == 0, "a setuid bit came back"
    # Its container's init was out of its reach (the engine's own init would outlive every attempt).
    assert (project / "init.txt").read_text().split() == ["attach-denied", "mem-denied", "python3"]
    # The Developer's container had no network: no default route, no connection.
    network = (project / "network.txt").read_text()
    routes = [line for line in network.splitlines()[1:] if line.strip() and not line.startswith("connect")]
    assert routes == [] and "connect 0" not in network, network


def running_role(ws: Path, role: str) -> str | None:
    """The role's container, once the CLI of its attempt in loop 1 runs there."""
    try:
        events = journal(ws)
    except (OSError, ValueError):
        return None
    session = next((e["session_id"] for e in events if e["event"] == "environment_started" and e["role"] == role),
                   None)
    last = next((e for e in reversed(events) if e["event"] in ("attempt_started", "attempt_finished")), None)
    if session is None or last is None or (last["event"], last["role"], last["loop"]) != ("attempt_started", role, 1):
        return None
    try:
        streams = json.loads((ws / "state/loops/0001/roles" / role / f"attempt-{last['attempt']}" / "command.json")
                             .read_text())["streams"]
    except (OSError, ValueError, KeyError):
        return None
    names = of_sessions([c["name"] for c in containers()], {session})
    if not names:
        return None
    probe = podman("exec", names[0], "sh", "-c", f"test -s {streams}/pid && ! test -e {streams}/exit")
    return names[0] if probe.returncode == 0 else None


def test_kill_9_during_a_podman_role_then_resume_stops_the_orphan_and_gives_the_same_candidates(podman_harbor,
                                                                                                 tmp_path):
    script = mini_script(2)
    script["loops"][1]["developer"]["actions"].insert(0, {"sleep": 25})
    for name in ("ref", "p"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "spec.md").write_text("# Greeter\n\nPrint a greeting.\n")
        (tmp_path / name / "script.yaml").write_text(yaml.safe_dump(script, sort_keys=False))
    ws = tmp_path / "p" / "ws"
    local = podman_harbor.hoh_async("build", tmp_path / "ref" / "spec.md", "--harness", "scripted", "--loops", "2",
                                    "-w", tmp_path / "ref" / "ws", "-q")
    proc = podman_harbor.hoh_async("build", tmp_path / "p" / "spec.md", "--harness", "scripted", "--loops", "2",
                                   "-w", ws, "-q", *ENV)
    try:
        deadline, container = time.monotonic() + 400, None
        while container is None and time.monotonic() < deadline and proc.poll() is None:
            container = running_role(ws, "developer")
            time.sleep(0.3)
        assert container, "the developer's CLI never ran in its container"
        # The Planner's container is paused while the Developer runs (a paused one is what podman-compose's down
        # refuses: the resume must thaw it to stop it).
        planner = next(e["session_id"] for e in journal(ws) if e["event"] == "environment_started"
                       and e["role"] == "planner")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not [c for c in containers()
                                                   if planner in c["name"] and c["state"] == "paused"]:
            time.sleep(0.3)
        assert [c for c in containers() if planner in c["name"] and c["state"] == "paused"], containers()
        assert running_role(ws, "developer") == container
        proc.kill()
        proc.wait(timeout=30)
        assert container in [c["name"] for c in containers()], "the killed run's container is there before the resume"
        resumed = podman_harbor.hoh("resume", "-w", ws, "-q", timeout=600)
        assert resumed.returncode == 0, resumed.stderr
        finish({"local": local}, timeout=300)
        assert candidate_ids(ws) == candidate_ids(tmp_path / "ref" / "ws") and len(candidate_ids(ws)) == 2
        orphans = [e for e in journal(ws) if e["event"] == "environment_stopped" and e.get("orphan")]
        assert len(orphans) >= 1 and not any(e.get("error") for e in orphans), orphans
        assert of_sessions([c["name"] for c in containers()], sessions(ws)) == []
        assert of_sessions(networks(), sessions(ws)) == []
        assert podman("image", "exists", BASE_IMAGE).returncode == 0, f"the stops removed {BASE_IMAGE}"
    finally:
        for p in (proc, local):
            if p.poll() is None:
                p.kill()
        left = of_sessions([c["name"] for c in containers()], sessions(ws)) if (ws / "state").exists() else []
        if left:
            podman("rm", "-f", "-t", "0", *left)
