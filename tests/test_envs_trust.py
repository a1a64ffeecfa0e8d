"""A role in a container tries to reach past its environment: what comes back must never touch hoh's side.

Each case runs the same hostile script with local roles and with `--env docker`, and compares what hoh
persisted: the violation recorded for the attempt, the workspace, and any directory outside it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import mini_script, run_hoh, wait_for
from harbor_env import BASE_IMAGE, INTO_INIT, harbor, journal, sessions  # noqa: F401 - harbor is a fixture
from test_envs import no_container_left, running_role, write_project  # noqa: F401 - an autouse fixture

from hoh.envs.egress.policy import Decision, Kind, read_log
from hoh.envs.verify import expected

ENV = ("--env", "docker", "--env-image", BASE_IMAGE)


def tree(root: Path) -> dict[str, bytes | str]:
    """Every entry under `root`: a file's bytes, a link's target, a directory's mark."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        found[rel] = f"-> {path.readlink()}" if path.is_symlink() else path.read_bytes() if path.is_file() else "dir"
    return found


def state_of_loop_one(ws: Path) -> dict[str, bytes | str]:
    """What loop 1 left in the workspace, which loop 2 may add to but never change."""
    return {rel: v for rel, v in tree(ws / "state").items()
            if rel in ("workspace.json", "spec.sha256") or rel.startswith("loops/0001/")}


@pytest.mark.parametrize("where", ["relative", "absolute"])
def test_a_developer_that_links_the_project_git_elsewhere_changes_nothing_there(harbor, tmp_path, where):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("the user's file\n")
    (outside / "sub").mkdir()
    (outside / "sub" / "deep.txt").write_text("deep\n")
    before_outside = tree(outside)
    target = "../state" if where == "relative" else str(outside)
    script = mini_script(2)
    dev = script["loops"][2]["developer"]  # the first attempt links, the second behaves
    script["loops"][2]["developer"] = [{**dev, "actions": [{"run": f"rm -rf .git && ln -s {target} .git"},
                                                           *dev.get("actions", [])]}, dev]

    violations, loop_one = {}, {}
    for mode, extra in (("local", ()), ("docker", ENV)):
        spec = write_project(tmp_path / mode, script)
        ws = tmp_path / mode / "ws"
        built = harbor.hoh("build", spec, "--harness", "scripted", "--loops", "1", "-w", ws, "-q", *extra)
        assert built.returncode == 0, built.stderr
        loop_one[mode] = state_of_loop_one(ws)
        resumed = harbor.hoh("resume", "-w", ws, "--loops", "1", "-q")
        assert resumed.returncode == 0, resumed.stderr
        assert state_of_loop_one(ws) == loop_one[mode], f"{mode}: the Developer's link changed loop 1's state"
        for name in ("workspace.json", "ledger.json", "INDEX.md", "journal.jsonl"):
            assert (ws / "state" / name).is_file(), f"{mode}: state/{name} is gone"
        assert (ws / "project" / ".git").is_dir() and not (ws / "project" / ".git").is_symlink()
        status = run_hoh("status", "-w", ws)
        assert status.returncode == 0, status.stderr
        result = json.loads((ws / "state/loops/0002/roles/developer/attempt-1/result.json").read_text())
        violations[mode] = result["violations"]
        assert tree(outside) == before_outside, f"{mode}: the directory outside the workspace changed"
    # Locally .git is a mount point the role cannot replace (it empties it); in a container it is a plain
    # directory, replaced by the link. Either way the attempt is a violation of the same area.
    assert [v["area"] for v in violations["local"]] == ["project .git"], violations["local"]
    assert violations["docker"] == [{"area": "project .git", "changes": ["replaced .git with a link or a file"]}]


# ---- a networked role's container reaches hoh's proxy and nothing else -----------------------------------
NET_CLIENT = r'''
import http.client, json, os, socket, sys, time
from urllib.parse import urlsplit

def direct(host, port):
    try:
        with socket.create_connection((host, int(port)), timeout=5) as conn:
            conn.sendall(b"GET /from-the-role HTTP/1.0\r\n\r\n")
        return "connected"
    except OSError as err:
        return type(err).__name__

def through_proxy(host, port):
    proxy = urlsplit(os.environ["HTTPS_PROXY"])
    conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=30)
    import base64
    auth = base64.b64encode(f"{proxy.username}:{proxy.password}".encode()).decode()
    conn.request("CONNECT", f"{host}:{port}", headers={"Host": f"{host}:{port}", "Proxy-Authorization": f"Basic {auth}"})
    return conn.getresponse().status

model = urlsplit(os.environ["HOH_MODEL_URL"])
conn = http.client.HTTPConnection(model.hostname, model.port, timeout=30)
conn.request("POST", model.path.rstrip("/") + "/chat", body=b"{}",
             headers={"Authorization": "Bearer " + os.environ["HOH_NET_TEST_KEY"], "Content-Type": "application/json"})
found = {"model": conn.getresponse().status}
for name, address in (("host", sys.argv[1]), ("peer", sys.argv[2])):
    host, port = address.rsplit(":", 1)
    found[f"direct-{name}"] = direct(host, port)
    found[f"proxy-{name}"] = through_proxy(host, port)
found["interfaces"] = sorted(os.listdir("/sys/class/net"))
found["routes"] = open("/proc/net/route").read().splitlines()[1:]
with open("net.json", "w") as out:
    json.dump(found, out)
if os.path.isdir("/opt/hoh"):  # in its container: held until the test has read the engine's settings
    for _ in range(3000):
        if os.path.exists("/tmp/hoh-go"):
            break
        time.sleep(0.1)
'''

COUNTER = r'''
import socket, sys, threading
server = socket.create_server(("0.0.0.0", int(sys.argv[1])))
while True:
    conn, _ = server.accept()
    with open("/tmp/accepted", "a") as out:
        out.write("one\n")
    conn.close()
'''


class Counter:
    """A TCP listener on every address of this machine's (its bridges' among them), counting who connects."""

    def __init__(self) -> None:
        self.server = socket.create_server(("0.0.0.0", 0))
        self.port = self.server.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


class Model(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        pass


def docker(*args: str, check: bool = True) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120)
    assert not check or done.returncode == 0, done.stderr
    return done.stdout.strip()


def reaches(host: str, port: int) -> str:
    """Whether a container on the engine's plain bridge connects to HOST:PORT (the control)."""
    return docker("run", "--rm", BASE_IMAGE, "python3", "-c",
                  f"import socket; socket.create_connection(({host!r}, {port}), timeout=10); print('connected')",
                  check=False)


@pytest.fixture
def peer():
    """A container of the test's own on the engine's bridge, counting connections to its port 8080."""
    name = f"hoh-test-peer-{uuid.uuid4().hex[:8]}"
    docker("run", "-d", "--name", name, BASE_IMAGE, "python3", "-c", COUNTER, "8080")
    try:
        yield name
    finally:
        docker("rm", "-f", name, check=False)


def test_a_networked_role_s_container_reaches_hoh_s_proxy_and_nothing_else(harbor, tmp_path, peer):
    counter = Counter()
    model = ThreadingHTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=model.serve_forever, daemon=True).start()
    try:
        gateway = docker("inspect", "-f", "{{.NetworkSettings.Gateway}}", peer)
        peer_ip = docker("inspect", "-f", "{{.NetworkSettings.IPAddress}}", peer)
        wait_for(lambda: reaches(peer_ip, 8080) == "connected" or None, 120, "the peer container's listener")
        # The controls: from a plain bridge container, both listeners answer.
        assert reaches(gateway, counter.port) == "connected"
        assert counter.accepted == 1
        docker("exec", peer, "rm", "-f", "/tmp/accepted")

        script = mini_script(1)
        dev = script["loops"][1]["developer"]
        dev["actions"] = [{"write": {"path": "net.py", "content": NET_CLIENT}},
                          {"run": f"python3 net.py {gateway}:{counter.port} {peer_ip}:8080 2> net.err"},
                          *dev.get("actions", [])]
        spec = write_project(tmp_path / "p", script)
        ws = tmp_path / "p" / "ws"
        sets = ["--set", f"harness.base_url=http://127.0.0.1:{model.server_port}/v1",
                "--set", "harness.api_key_env=HOH_NET_TEST_KEY", "--set", "sandbox.limits.processes=512",
                "--set", "sandbox.limits.memory_mb=1024"]
        hoh = subprocess.Popen([str(harbor.exe.parent / "python"), "-m", "hoh", "build", str(spec), "--harness",
                                "scripted", "--loops", "1", "-w", str(ws), "-q", *sets, *ENV],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**harbor.env(), "HOH_NET_TEST_KEY": "sk-net-test"}, stdin=subprocess.DEVNULL)
        try:
            def developer_running() -> str | None:
                if hoh.poll() is not None:
                    pytest.fail(f"hoh ended first: {hoh.communicate()[1]}")
                return running_role(ws, "developer", 1)

            container = wait_for(developer_running, 300, "the Developer in its container")
            settings = json.loads(docker("inspect", container))[0]["HostConfig"]
            docker("exec", container, "touch", "/tmp/hoh-go")
            _, stderr = hoh.communicate(timeout=300)
        finally:
            if hoh.poll() is None:
                hoh.kill()
        assert hoh.returncode == 0, stderr
        assert "does not apply" not in stderr  # the engine applies both limits (enforced.py reads them inside)
    finally:
        model.shutdown()
        counter.server.close()

    # The engine's settings: no network but loopback; the limits hoh was given.
    assert settings["NetworkMode"] == "none"
    assert settings["PidsLimit"] == 512 and settings["Memory"] == 1024 * 2**20
    project = ws / "project"
    assert (project / "net.err").read_text() == ""
    found = json.loads((project / "net.json").read_text())
    assert found["model"] == 200  # the proxy answers, through the forwarder on the role's own loopback
    assert found["interfaces"] == ["lo"] and found["routes"] == []  # no route leaves the container
    assert found["direct-host"] != "connected" and found["direct-peer"] != "connected", found
    assert counter.accepted == 1 and docker("exec", peer, "cat", "/tmp/accepted", check=False) == ""
    # What it asked of the proxy is refused by the same allow-list as a jailed role's, and logged.
    assert found["proxy-host"] == found["proxy-peer"] == 403
    [attempt] = ws.glob("state/loops/0001/roles/developer/attempt-*/egress.jsonl")
    refused = {(r.target, r.decision) for r in read_log(attempt) if r.kind is Kind.CONNECT}
    assert refused == {(f"{gateway}:{counter.port}", Decision.DENIED), (f"{peer_ip}:8080", Decision.DENIED)}
    assert [r.status for r in read_log(attempt) if r.target.endswith("/chat")] == [200]


# ---- a role tampers with its environment between attempts --------------------------------------------------
WRAPPER = "#!/bin/sh\\necho hello bob\\n"
QA_TAMPERS = [
    # A python3 that passes every greeting check, on the image's PATH and on the one hoh gives attempts first.
    {"run": f"(mv /usr/bin/python3 /usr/bin/python3.real && printf '{WRAPPER}' > /usr/bin/python3 && "
            f"chmod 755 /usr/bin/python3 && printf '{WRAPPER}' > /opt/hoh/bin/python3 && "
            "chmod 755 /opt/hoh/bin/python3) 2>/dev/null || true"},
    {"run": "echo planted > /etc/planted 2>/dev/null || true"},  # outside anything a role may write
    {"run": "echo planted > planted.txt 2>/dev/null || true"},  # in its view (the candidate's copy)
    {"run": "find / -xdev -path '*/state/loops/*' -name '*.md' -exec sh -c 'echo tampered >> \"$1\"' _ {} \\; "
            "2>/dev/null || true"},  # its frozen inputs
    {"run": "(setsid sh -c 'while :; do sleep 1; done' >/dev/null 2>&1 &) || true"},  # a daemon
]


def test_what_a_role_leaves_in_its_environment_never_reaches_a_later_attempt_or_a_replayed_check(harbor, tmp_path):
    """QA in loop 1 wraps python3 (twice), plants files and leaves a daemon; the Developer leaves a daemon. In loop
    2 the Developer breaks the greeter: the Runtime's replay of loop 1's check must fail in docker as it does
    locally (a wrapper would pass it), the candidates are the same, and the tampering is journaled."""
    script = mini_script(2)
    script["loops"][1]["qa"]["actions"] = QA_TAMPERS
    script["loops"][1]["qa"]["checks"][0]["attach"] = {"command": "python3 greet.py bob"}  # replayed in loop 2
    script["loops"][1]["developer"]["actions"].append(QA_TAMPERS[-1])
    script["loops"][2]["developer"]["actions"] = [{"write": {"path": "greet.py", "content": "print('broken')\n"}}]
    script["loops"][2]["planner"]["reply"]["preserve"] = [{"id": "V-0001", "behaviour": "hello bob"}]
    runs = {}
    for mode, extra in (("local", ()), ("docker", ENV)):
        spec = write_project(tmp_path / mode, script)
        ws = tmp_path / mode / "ws"
        built = harbor.hoh("build", spec, "--harness", "scripted", "--loops", "2", "-w", ws, "-q", *extra)
        assert built.returncode in (0, 1), built.stderr
        runs[mode] = [json.loads(line) for line in (ws / "state" / "journal.jsonl").read_text().splitlines()]
    for mode, events in runs.items():
        [replay] = [e for e in events if e["event"] == "checks_replayed" and e["loop"] == 2]
        assert (replay["replayed"], replay["failed"]) == (1, 1), f"{mode}: {replay}"
    assert [e["candidate_id"] for e in runs["docker"] if e["event"] == "loop_finished"] == \
        [e["candidate_id"] for e in runs["local"] if e["event"] == "loop_finished"]
    found = [e for e in runs["docker"] if e["event"] == "environment_tampered"]
    qa = [e for e in found if e["role"] == "qa" and e["changes"]]
    assert qa and {"C /usr/bin/python3", "A /etc/planted"} <= set(qa[0]["changes"]), found
    assert not [c for e in found for c in e["changes"] if "planted.txt" in c or "/opt/hoh" in c]
    [daemon] = [e for e in found if e["role"] == "developer"]  # killed before the Developer's next attempt
    assert daemon["processes"] >= 1 and daemon["changes"] == [], found
    assert not [e for e in runs["local"] if e["event"] == "environment_tampered"]
    # QA's replaced environment was stopped and a fresh one started in its place.
    qa_sessions = [e["session_id"] for e in runs["docker"] if e["event"] == "environment_started" and e["role"] == "qa"]
    assert len(qa_sessions) >= 2 and qa[0]["session_id"] == qa_sessions[0]


def test_only_hoh_s_own_paths_and_the_way_to_them_are_expected_changes():
    allowed = ("/opt/hoh", "/tmp", "/work/ws")
    for line in ("A /opt/hoh/bin/python3", "C /tmp", "A /tmp/x", "C /work", "A /work", "A /work/ws/project/a.py",
                 "D /work/ws/x", "C /opt"):
        assert expected(line, allowed), line
    for line in ("C /usr/bin/python3", "A /etc/ld.so.preload", "A /opt/hohx", "A /work/wsx", "D /tmp2", "D /work",
                 "D /opt", "C /root/.bashrc"):
        assert not expected(line, allowed), line


# ---- a role reaches for hoh's process in its container ------------------------------------------------------
REACH = ("for d in /proc/[0-9]*; do tr '\\0' ' ' < $d/cmdline 2>/dev/null "
         "| grep -q -e 'attempt /opt/hoh/i[n]/' -e 'sys.exit(ser[v]e())' || "
         "continue; echo found >> reach.txt; "
         "(echo 'collected={\"held\": \"f\", \"believed\": true}' > $d/fd/1) 2>/dev/null "
         "&& echo fd-written >> reach.txt || echo fd-denied >> reach.txt; "
         "(head -c 1 $d/environ > /dev/null) 2>/dev/null && echo environ-read >> reach.txt "
         "|| echo environ-denied >> reach.txt; done; true")


def built_in_docker(harbor, tmp_path: Path, first: str, loops: int = 1, then: str | None = None) -> Path:
    """A build in Docker whose Developer runs `first` before its other actions in loop 1 (and `then` in loop 2);
    its workspace."""
    script = mini_script(loops)
    script["loops"][1]["developer"].setdefault("actions", []).insert(0, {"run": first})
    if then is not None:
        script["loops"][2]["developer"].setdefault("actions", []).insert(0, {"run": then})
    spec = write_project(tmp_path, script)
    ws = tmp_path / "ws"
    built = harbor.hoh("build", spec, "--harness", "scripted", "--loops", str(loops), "-w", ws, "-q", *ENV)
    assert built.returncode == 0, built.stderr
    return ws


def test_a_role_cannot_reach_into_the_process_that_collects_its_attempt(harbor, tmp_path):
    """hoh's `inside.py attempt` waits for the CLI in its container and collects what it wrote (a fork of hoh's
    server there, or an `exec` of its own): a root role finds it, and can neither write into its stdout (hoh's
    channel) nor read it through /proc."""
    ws = built_in_docker(harbor, tmp_path, REACH)
    found = (ws / "project" / "reach.txt").read_text().split()
    assert found and found == ["found", "fd-denied", "environ-denied"] * (len(found) // 3)
    [developer] = ws.glob("state/loops/0001/roles/developer/attempt-*/result.json")
    assert json.loads(developer.read_text())["violations"] == []


def test_a_role_cannot_reach_into_its_container_s_init(harbor, tmp_path):
    """An environment's own processes are never killed between attempts: a root role that could trace its
    container's init (Harbor's `sleep infinity`, dumpable) would put code there that outlives every attempt. hoh's
    containers run an undumpable init: the role can neither attach to it nor open its memory."""
    ws = built_in_docker(harbor, tmp_path, INTO_INIT)
    assert (ws / "project" / "init.txt").read_text().split() == ["attach-denied", "mem-denied", "python3"]


INTO_SERVER = ("python3 -c \"import ctypes, os\n"
               "libc = ctypes.CDLL(None, use_errno=True)\n"
               "out = open('server.txt', 'w')\n"
               "for pid in sorted(int(p) for p in os.listdir('/proc') if p.isdigit()):\n"
               "    try:\n        line = open('/proc/%d/cmdline' % pid, 'rb').read()\n"
               "    except OSError:\n        continue\n"
               "    if b'sys.exit(' + b'serve())' not in line:\n        continue\n"
               "    out.write('found ')\n"
               "    out.write('attached ' if libc.ptrace(16, pid, 0, 0) == 0 else 'attach-denied ')\n"
               "    for name in ('fd/1', 'fd/0', 'mem'):\n"
               "        try:\n            open('/proc/%d/%s' % (pid, name), 'wb')\n"
               "            out.write(name + '-opened ')\n"
               "        except OSError:\n            out.write(name + '-denied ')\n"
               "out.close()\"")
"""A role's step that finds hoh's server in its container (`envs/serve.py`) and tries to attach to it and to open
its stdout, its stdin and its memory: `server.txt` says how it went."""
KILL_SERVER = ("nohup sh -c 'i=$(stat -c %i \"$0\"); "
               "until [ -e \"$0/next.txt\" ] || [ \"$(stat -c %i \"$0\" 2>/dev/null)\" != \"$i\" ]; "
               "do sleep 0.1; done; "
               "until echo planted > \"$0/planted.txt\"; do sleep 0.1; done' \"$PWD\" >/dev/null 2>&1 & "
               "for d in /proc/[0-9]*; do tr '\\0' ' ' < $d/cmdline 2>/dev/null | grep -q 'sys.exit(ser[v]e())' "
               "&& kill -9 ${d#/proc/}; done; true")
"""A role's step that leaves a daemon and kills hoh's server. The daemon writes into the project once a later
attempt is there: once hoh has placed the project afresh (a new directory) or a later attempt wrote `next.txt`
(`NEXT`). So only a daemon that outlived its own attempt ever writes, whatever the timing (a clock would race
hoh's end-of-attempt kill on a loaded machine, where the attempt itself may take longer)."""
NEXT = "touch next.txt; sleep 1"


def test_a_role_cannot_reach_into_hoh_s_server(harbor, tmp_path):
    """hoh's server runs hoh's steps in a container, so it is there while a role runs: a root role finds it and
    can neither trace it nor open its stdout and stdin (hoh's channel) or its memory."""
    ws = built_in_docker(harbor, tmp_path, INTO_SERVER)
    found = (ws / "project" / "server.txt").read_text().split()
    # The server, and the fork of it that runs the attempt.
    assert found == ["found", "attach-denied", "fd/1-denied", "fd/0-denied", "mem-denied"] * 2


def test_a_role_that_kills_hoh_s_server_loses_only_its_own_attempt(harbor, tmp_path):
    """Killing hoh's server fails the step it served (the Developer's attempt, as an `exec` that died would): the
    attempt runs again by an `exec` per step, the daemon the role left is killed first, the kill is journaled as
    tampering, and the run goes on."""
    ws = built_in_docker(harbor, tmp_path, KILL_SERVER, loops=2, then=NEXT)
    events = journal(ws)
    [failed] = [e for e in events if e["event"] == "transient_failure"]
    assert (failed["loop"], failed["role"]) == (1, "developer")
    assert "hoh's server in the container ended" in failed["error"]
    [killed] = [e for e in events if e["event"] == "environment_tampered" and e.get("server")]
    assert killed["role"] == "developer" and killed["seq"] < failed["seq"]
    assert [e["status"] for e in events if e["event"] == "loop_finished"] == ["pass", "pass"]
    assert (ws / "project" / "next.txt").exists() and not (ws / "project" / "planted.txt").exists()
    assert len(sessions(ws)) == 3  # no environment was replaced: what hoh held there was never in doubt


class _DockerCompose:
    """Stands for one of Harbor's Compose environments where verify.py looks: its runtime's engine is `docker`."""

    @staticmethod
    def runtime() -> SimpleNamespace:
        return SimpleNamespace(engine=["docker"])


def test_a_container_s_own_layer_read_here_lists_what_its_engine_lists(harbor):
    """hoh reads a container's overlay layer on this machine, where it may, instead of asking `docker diff` each
    time: the same added, changed and removed paths, hoh's own paths left out (never looked into). Where it may
    not (hoh not root: the engine's data dir is closed to it), the watch asks the engine, with the same answer."""
    import asyncio

    from hoh.envs.verify import Layers, Watch

    name = f"hoh-test-layer-{uuid.uuid4().hex[:8]}"
    docker("run", "-d", "--name", name, "--network", "none", BASE_IMAGE, "sleep", "infinity")
    try:
        allowed = ("/opt/hoh", "/tmp")
        watch = Watch(_DockerCompose(), name, allowed)
        asyncio.run(watch.begin())
        docker("exec", name, "sh", "-c", "echo x > /etc/planted && rm /etc/issue && chmod 700 /usr/bin/mawk && "
               "mkdir -p /opt/hoh/bin /tmp/t && touch /opt/hoh/bin/python3 && ln -s /etc /root/link && "
               "rm -rf /usr/share/doc && mkdir /usr/share/doc")
        engine = {line for line in docker("diff", name).splitlines()
                  if not any(line[2:] == a or line[2:].startswith(a + "/") for a in allowed)}
        assert set(asyncio.run(watch.unexpected())) == {c for c in engine - watch.baseline if not expected(c, allowed)}
        assert {"A /etc/planted", "D /etc/issue", "C /usr/bin/mawk", "A /root/link", "C /usr/share/doc"} <= engine
        driver = json.loads(docker("inspect", "--format", "{{json .GraphDriver}}", name))
        if os.geteuid() != 0:
            assert watch.layers is None, "a user read the engine's layer"
            return
        if driver["Name"] not in ("overlay2", "overlay"):
            pytest.skip(f"the engine's storage driver is {driver['Name']}, not overlay")
        assert watch.layers is not None, "root did not read the layer"
        layers = Layers(Path(driver["Data"]["UpperDir"]), tuple(map(Path, driver["Data"]["LowerDir"].split(":"))))
        assert asyncio.run(asyncio.to_thread(layers.changes, allowed)) == engine
    finally:
        docker("rm", "-f", name, check=False)
