"""A role's and a check's environment reach only what runs inside the jail; nothing a role wrote is ever in the
environment of a process hoh starts outside it (bwrap, a hook, git), and no such process gets the model's key.

The witness is a marker library (`marker`): built here with gcc, its constructor writes a file named
`PID-UID-host|jail` (which PID namespace loaded it) into a directory outside every jail. A marker named
`host` is code a role chose running as hoh's user before any jail exists. Runs as root and, through
test_as_user.py, as a user.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import GREET, Project, run_hoh, wait_for

from hoh.envs.base import Launch
from hoh.envs.local.executor import LOCAL
from hoh.evidence.checks import CheckRegister, CheckSpec, RunStatus
from hoh.harness.attempt import RoleRequest
from hoh.harness.sandbox import JailSpec, Limits, Network
from hoh.records import QaReport
from hoh.runtime.replay import CheckRunner, admit

MARKER_C = r"""
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void hoh_marker(void) {
    char ns[128] = "";
    ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    const char *where = n <= 0 ? "unknown" : (ns[n] = 0, strcmp(ns, HOST_PIDNS) == 0 ? "host" : "jail");
    char path[4096];
    snprintf(path, sizeof path, "%s/%d-%d-%s", MARKS, (int)getpid(), (int)getuid(), where);
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd >= 0) close(fd);
}
"""
SECRET = "sk-hoh-env-test-0123456789abcdef"
REFUSED = ("LD_PRELOAD", "PYTHONSTARTUP", "BASH_ENV", "NODE_OPTIONS")


class Marker:
    """The marker library and what it and the other payloads leave in `marks` (outside every jail)."""

    def __init__(self, root: Path):
        if shutil.which("gcc") is None:
            pytest.skip("gcc is not installed: the marker library cannot be built")
        self.lib_dir, self.marks = root / "lib", root / "marks"
        self.lib_dir.mkdir(parents=True)
        self.marks.mkdir()
        os.chmod(self.marks, 0o777)  # a process of any uid that ran outside may leave its mark
        source = self.lib_dir / "marker.c"
        source.write_text(MARKER_C)
        self.lib = self.lib_dir / "marker.so"
        host_ns = os.readlink("/proc/self/ns/pid")
        built = subprocess.run(["gcc", "-shared", "-fPIC", f'-DMARKS="{self.marks}"', f'-DHOST_PIDNS="{host_ns}"',
                                "-o", str(self.lib), str(source)], capture_output=True, text=True, timeout=120)
        assert built.returncode == 0, built.stderr
        # The witness works: loaded here, outside any jail, it leaves a `host` mark.
        subprocess.run(["true"], env={"PATH": os.defpath, "LD_PRELOAD": str(self.lib)}, check=True, timeout=60)
        assert [m.split("-")[-1] for m in self.left()] == ["host"], self.left()
        for mark in self.marks.iterdir():
            mark.unlink()
        # What each refused variable would run, if anything applied it: each leaves a mark outside the jail.
        (self.lib_dir / "startup.sh").write_text(f"touch {self.marks}/bash_env-$$\n")
        (self.lib_dir / "startup.py").write_text(f"open('{self.marks}/pythonstartup', 'w').close()\n")
        (self.lib_dir / "startup.js").write_text(f"require('fs').writeFileSync('{self.marks}/node_options', '')\n")

    def hostile_env(self) -> dict[str, str]:
        return {"LD_PRELOAD": str(self.lib), "PYTHONSTARTUP": str(self.lib_dir / "startup.py"),
                "BASH_ENV": str(self.lib_dir / "startup.sh"), "NODE_OPTIONS": f"--require {self.lib_dir}/startup.js"}

    def left(self) -> list[str]:
        return sorted(p.name for p in self.marks.iterdir())

    def outside(self) -> list[str]:
        """Marks of code that ran outside a jail."""
        return [m for m in self.left() if not m.endswith("-jail")]


@pytest.fixture
def marker(tmp_path) -> Marker:
    return Marker(tmp_path / "marker")


def greeter(checks: list[dict] | list[list[dict]], acceptance: tuple[str, ...] = ("A1",)) -> dict:
    """One loop: plan a greeter, write it, and QA's checks (a list of lists: one per QA attempt)."""
    qa = [{"checks": c} for c in checks] if checks and isinstance(checks[0], list) else {"checks": checks}
    return {"planner": {"reply": {
                "goal": "greeter", "preserve": [], "out_of_scope": [],
                "tasks": [{"id": "T1", "title": "Greet", "details": "print hello NAME", "issues": [],
                           "acceptance": [{"id": a, "condition": f"condition {a}", "method": "black-box"}
                                          for a in acceptance]}]}},
            "developer": {"actions": [{"write": {"path": "greet.py", "content": GREET}}],
                          "reply": {"summary": "greet.py", "tasks": [{"id": "T1", "status": "done", "notes": ""}],
                                    "self_tests": [], "known_gaps": []}},
            "qa": qa}


HONEST = {"id": "A1", "run": "python3 greet.py bob", "expect_stdout": "hello bob",
          "attach": {"command": 'python3 greet.py "$WHO"', "env": {"WHO": "bob"}}}
"""QA saw `hello bob`; its check says it again only if WHO reaches the command inside the jail."""


def test_a_check_env_that_would_run_code_is_refused_with_a_re_ask_and_an_allowed_one_reaches_the_jail(
        tmp_path, marker):
    hostile = {**HONEST, "attach": {**HONEST["attach"], "env": {"WHO": "bob", **marker.hostile_env()}}}
    project = Project(tmp_path, {"schema_version": 1, "loops": {1: greeter([[hostile], [HONEST]])}})
    assert project.build(loops=1).status == "finished"
    assert marker.left() == []
    first = project.attempt_result(1, "qa", 1)
    said = " ".join(first["violations"] + first.get("errors", []))
    for name in REFUSED:
        assert f"{name}" in said and "check env may not set" in said, said
    assert "WHO" not in said and "set it inside its command" in said
    # The re-ask's answer is kept: WHO reached the command in the jail (without it, `hello ` is not `hello bob`).
    [admitted] = project.loop_json(1, "checks")["checks"]
    assert admitted["admitted"] and admitted["check_id"] == "C-0001", admitted
    register = json.loads(project.state("checks.json").read_text())
    assert [c["spec"]["env"] for c in register["checks"]] == [{"WHO": "bob"}]
    assert marker.left() == []


def _plant(project: Project, env: dict[str, str]) -> None:
    """A hand edits the register: C-0002, C-0001's twin that sets `env` besides."""
    path = project.state("checks.json")
    register = json.loads(path.read_text())
    twin = json.loads(json.dumps(register["checks"][0]))
    twin["id"], twin["behaviour_id"] = "C-0002", None
    twin["spec"]["env"] = {**twin["spec"]["env"], **env}
    register["checks"].append(twin)
    path.write_text(json.dumps(register))


@pytest.mark.parametrize("mode", ["bwrap", "off"])
def test_a_refused_env_planted_in_the_register_is_never_applied_and_is_an_error_with_its_reason(
        tmp_path, marker, mode):
    """At the replay of every loop, in `hoh replay` and its bisection: an error naming the variables, never a
    pass and never a crash; with the jail and without it (`sandbox.mode: off`, where nothing else would stand
    between the variable and hoh's user)."""
    project = Project(tmp_path, {"schema_version": 1, "loops": {1: greeter([HONEST]), 2: greeter([HONEST])}})
    sets = {"sandbox.mode": mode}
    assert project.build(loops=1, sets=sets).status == "finished"
    _plant(project, marker.hostile_env())

    shown = run_hoh("replay", "-w", project.ws, "--json")
    assert marker.left() == []
    assert shown.returncode == 1, shown.stderr
    results = {r["id"]: r for r in json.loads(shown.stdout)["results"]}
    assert results["C-0001"]["status"] == RunStatus.passed.value  # WHO still reaches the command
    assert results["C-0002"]["status"] == RunStatus.error.value
    assert all(name in results["C-0002"]["reason"] for name in REFUSED), results["C-0002"]
    assert marker.left() == []

    bisect = run_hoh("replay", "-w", project.ws, "--bisect", "C-0002")
    lines = bisect.stderr.strip().splitlines()
    assert bisect.returncode != 0 and len(lines) == 1 and "Traceback" not in bisect.stderr, bisect.stderr
    assert "C-0002 could not run on loop 1's candidate" in lines[0] and "LD_PRELOAD" in lines[0]
    assert run_hoh("replay", "-w", project.ws, "--bisect", "C-0001").stdout.strip() == \
        "C-0001 passes on every loop from 1 to 1"
    assert marker.left() == []

    resumed = run_hoh("resume", "-w", project.ws, "--loops", "1", "-q")
    assert resumed.returncode == 0, resumed.stderr
    replay = {r["id"]: r for r in project.loop_json(2, "replay")["results"]}
    assert replay["C-0001"]["status"] == "passed"
    assert replay["C-0002"]["status"] == "error" and "LD_PRELOAD" in replay["C-0002"]["reason"]
    assert "check env may not set" in project.state(replay["C-0002"]["evidence"]).read_text()
    assert marker.left() == []


def test_the_checks_runner_refuses_what_no_check_may_set_wherever_it_runs(tmp_path, marker):
    """The one place every check runs through (admission, each loop's replay, `hoh replay`): each refused name
    alone is an error, and nothing ran; a malformed env from the register is an error too, not a crash."""
    view = tmp_path / "view"
    view.mkdir()
    runner = CheckRunner(LOCAL, JailSpec(), Limits(), tmp_path / "scratch")
    runs = {name: runner.run(CheckSpec("true", env={name: value}), view, "none", tmp_path / f"{name}.txt", tmp_path)
            for name, value in marker.hostile_env().items()}
    assert marker.left() == []
    for name, run in runs.items():
        assert run.status is RunStatus.error and name in run.reason, run
    for env in ({"A": "nul\0byte"}, ["LD_PRELOAD", str(marker.lib)], {"ld_preload": str(marker.lib)}):
        run = runner.run(CheckSpec.from_json({"command": "true", "env": env}), view, "none", tmp_path / "bad.txt",
                         tmp_path)
        assert run.status is RunStatus.error and run.reason, run
    assert marker.left() == []


def test_at_admission_a_qa_report_that_skipped_the_re_ask_gets_no_check_with_a_refused_env(tmp_path, marker):
    """A report that reached admission without its schema check (a hand's `qa.json` on a resume): the check is
    run by the one runner, which refuses it; it is not admitted, with its reason, and nothing ran."""
    view, state = tmp_path / "view", tmp_path / "state"
    view.mkdir()
    (state / "evidence").mkdir(parents=True)
    check = {"command": "true", "env": marker.hostile_env(), "expect": {"exit_code": 0}}
    qa = QaReport.from_json({"loop": 1, "candidate_id": "loop-0001-x", "verdict": "pass",
                             "criteria": [{"id": "A1", "status": "verified", "evidence": [], "check": check}]})
    runner = CheckRunner(LOCAL, JailSpec(), Limits(), tmp_path / "scratch")
    [admission] = admit(runner, CheckRegister(), qa, view, state / "evidence", state, state / "admit", "none")
    assert marker.left() == []
    assert not admission.admitted and admission.check_id is None
    assert "check env may not set" in admission.reason and "LD_PRELOAD" in admission.reason


def test_bwrap_gets_no_environment_and_no_value_on_its_command_line_and_the_jail_gets_all_of_it(tmp_path, marker):
    """A launch's environment, the loader's variable included, is applied inside the jail: bwrap runs with an
    empty environment and none of the values on its command line, and the library loads only in the jail."""
    work = tmp_path / "work"
    work.mkdir()
    jail = JailSpec(network=Network.none, writable=(marker.marks, work), read_only=(marker.lib_dir,))
    env = {"PATH": os.environ["PATH"], "HOH_ENV_SENTINEL": SECRET, "LD_PRELOAD": str(marker.lib)}
    go = work / "go"
    argv = ["sh", "-c", f'until [ -e {go} ]; do sleep 0.01; done; printf %s "$HOH_ENV_SENTINEL"']
    request = RoleRequest(role="qa", loop=1, attempt=1, prompt="", workdir=work, access="read-only", jail=jail,
                          wall_timeout=60, idle_timeout=60)
    seen: dict[str, bytes] = {}

    def spawned(pid: int) -> None:  # bwrap, waiting on its child until `go` exists
        # Popen returns once exec has begun; the new program's command line (and environment) are laid out just
        # after: until its command line shows, an empty environment would prove nothing.
        seen["cmdline"] = wait_for(lambda: Path(f"/proc/{pid}/cmdline").read_bytes(), 30, "bwrap's command line")
        seen["environ"] = Path(f"/proc/{pid}/environ").read_bytes()
        go.touch()

    attempt = tmp_path / "attempt"
    attempt.mkdir()
    done = LOCAL.execute(Launch(argv, work, env, None, jail), request, attempt, spawned)
    assert done.setup_error is None and done.process.exit_code == 0, done
    assert (attempt / "events.jsonl").read_text() == SECRET  # the jail got it
    assert seen["environ"] == b"" and b"bwrap" in seen["cmdline"]
    assert SECRET.encode() not in seen["cmdline"] and str(marker.lib).encode() not in seen["cmdline"]
    assert SECRET not in (attempt / "command.json").read_text()
    assert marker.left() and marker.outside() == [], marker.left()  # loaded in the jail, never in bwrap


def test_a_hook_gets_the_users_environment_without_the_models_key(tmp_path, monkeypatch):
    monkeypatch.setenv("HOH_TEST_KEY", SECRET)
    monkeypatch.setenv("HOH_TEST_QA_KEY", SECRET + "-qa")
    monkeypatch.setenv("HOH_TEST_SAME_KEY", SECRET)  # the same key under a name hoh was not told
    monkeypatch.setenv("HOH_TEST_SETTING", "kept")
    seen = tmp_path / "hook-env.txt"
    project = Project(tmp_path, {"schema_version": 1, "loops": {1: greeter([HONEST])}})
    built = project.build(loops=1, sets={
        "harness.api_key_env": "HOH_TEST_KEY", "harness.base_url": "http://127.0.0.1:9/v1",
        "roles.qa.api_key_env": "HOH_TEST_QA_KEY", "hooks.on_loop_end": ["sh", "-c", f"env > {seen}"]})
    assert built.status == "finished"
    hook_env = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    assert hook_env["HOH_TEST_SETTING"] == "kept" and hook_env["HOH_HOOK"] == "on_loop_end"
    assert not {"HOH_TEST_KEY", "HOH_TEST_QA_KEY", "HOH_TEST_SAME_KEY"} & set(hook_env)
    assert SECRET not in seen.read_text()


def test_the_programs_hoh_runs_on_this_machine_get_only_what_they_need_of_its_environment(tmp_path, monkeypatch):
    """A CLI's `--version`, this machine's npm (its registry, a CLI installed for an environment) and docker
    (the bench's leftovers), each a fake here that writes down its environment: their own settings reach them,
    the model's key and anything else of hoh's process do not."""
    from hoh.bench.jobs import _docker
    from hoh.envs.node import npm_install
    from hoh.harness import registries
    from hoh.harness.capabilities import installed_version
    from hoh.harness.registries import npm_hosts

    bin_dir, seen = tmp_path / "bin", tmp_path / "seen"
    bin_dir.mkdir()
    seen.mkdir()
    for name, prints in (("fakecli", "fakecli 1.2.3"), ("npm", "registry=https://registry.example.test/"),
                         ("docker", "")):
        (bin_dir / name).write_text(f'#!/bin/sh\nenv > {seen}/{name}.$$\necho "{prints}"\n')
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("HOH_TEST_KEY", SECRET)
    monkeypatch.setenv("npm_config_registry", "https://registry.example.test/")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")

    assert installed_version("fakecli") == "1.2.3"
    # npm's settings are read once a process: this test's npm (the fake) gets a cache of its own.
    monkeypatch.setattr(registries, "_npm_config", functools.cache(registries._npm_config.__wrapped__))
    assert npm_hosts() == {"registry.example.test"}
    npm_install("nothing@1", cache=tmp_path / "cache")  # the fake npm installs nothing, and exits 0
    _docker("ps")
    runs = {p.name.split(".")[0]: p.read_text() for p in seen.iterdir()}
    assert sorted(runs) == ["docker", "fakecli", "npm"]
    assert len(list(seen.glob("npm.*"))) == 2
    for name, text in ((p.name, p.read_text()) for p in seen.iterdir()):
        assert SECRET not in text and "HOH_TEST_KEY" not in text, name
        assert f"PATH={bin_dir}:" in text, name
    assert all("npm_config_registry=https://registry.example.test/" in p.read_text() for p in seen.glob("npm.*"))
    assert "DOCKER_HOST=unix:///nonexistent/docker.sock" in runs["docker"]
