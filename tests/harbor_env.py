"""The real `harbor` CLI and Docker engine for the Harbor tests, and readers of what a job leaves.

Harbor needs Python >= 3.12, so it runs from its own venv (with `hoh[harbor]` installed) as a
subprocess: `$HOH_HARBOR` names its `harbor` executable, else `.venv-harbor/bin/harbor` in the
repository. The engine is the one `$DOCKER_HOST` points at, with the examples' base image built
(`.ci/docker-engine`). Missing either skips these tests, unless `HOH_REQUIRE_HARBOR=1` (CI).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, shared_once

from hoh.paths import AgentRunPaths

EXAMPLES = REPO / "benchmarks" / "examples"
BASE_IMAGE = "localhost/hoh-base:bookworm"
INTO_INIT = ("python3 -c \"import ctypes, os\n"
             "libc = ctypes.CDLL(None, use_errno=True)\n"
             "out = open('init.txt', 'w')\n"
             "out.write('attached ' if libc.ptrace(16, 1, 0, 0) == 0 else 'attach-denied ')\n"
             "try:\n    open('/proc/1/mem', 'r+b')\n    out.write('mem-opened ')\n"
             "except OSError:\n    out.write('mem-denied ')\n"
             "out.write(open('/proc/1/comm').read())\"")
"""A role's step that tries to attach to its container's init and open its memory: `init.txt` says how it went
and what the init is."""
VALIDITY_RULES = ("invalid-task-config", "unknown-config-field", "invalid-task-files")


# Readers of a workspace's journal for the environment tests (test_envs, test_envs_podman).
def journal(ws: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (ws / "state" / "journal.jsonl").read_text().splitlines()]


def candidate_ids(ws: Path) -> list[str]:
    return [e["candidate_id"] for e in journal(ws) if e["event"] == "loop_finished"]


def sessions(ws: Path) -> set[str]:
    return {e["session_id"] for e in journal(ws) if e["event"] == "environment_started"}


def find_harbor() -> Path | None:
    for candidate in (os.environ.get("HOH_HARBOR"), REPO / ".venv-harbor" / "bin" / "harbor"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def docker_problem() -> str | None:
    if shutil.which("docker") is None:
        return "no docker CLI"
    info = subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        return f"no Docker engine with {BASE_IMAGE} at DOCKER_HOST={os.environ.get('DOCKER_HOST', '(default)')} " \
               f"({(info.stderr.strip().splitlines() or ['?'])[-1]}); see .ci/docker-engine"
    return None


@dataclass
class Trial:
    """One trial dir of a finished Harbor job."""

    dir: Path

    @property
    def result(self) -> dict[str, Any]:
        return json.loads((self.dir / "result.json").read_text())

    @property
    def task(self) -> str:
        return self.result["task_name"]

    @property
    def reward(self) -> float | None:
        verifier = self.result.get("verifier_result") or {}
        return (verifier.get("rewards") or {}).get("reward")

    @property
    def exception(self) -> tuple[str, str] | None:
        info = self.result.get("exception_info")
        return (info["exception_type"], info["exception_message"]) if info else None

    @property
    def hoh(self) -> AgentRunPaths:
        """What hoh's agent kept of the trial (beside Harbor's agent/, never mounted into the environment)."""
        return AgentRunPaths.for_trial(self.dir)

    @property
    def ws(self) -> Path:
        return self.hoh.workspace

    def candidate_dir(self, t: int) -> Path:
        """Where hoh kept loop t's candidate."""
        return self.hoh.candidate_dir(t)

    def hoh_summary(self) -> dict[str, Any]:
        return json.loads(self.hoh.summary.read_text())


class Harbor:
    def __init__(self, exe: Path, cache: Path):
        self.exe, self.cache = exe, cache

    def env(self) -> dict[str, str]:
        # One dependency cache for the whole session (the tests isolate HOME), LiteLLM's bundled
        # cost map instead of retried fetches of a remote one, and no telemetry: offline, its
        # end-of-job event only costs every job ~8 s of CPU importing LiteLLM's provider list.
        return {**os.environ, "XDG_CACHE_HOME": str(self.cache), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "HARBOR_TELEMETRY": "0", "COLUMNS": "200"}

    def hoh(self, *args: Any, timeout: float = 900, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """`hoh ...` from Harbor's venv (where `hoh bench run` can drive Harbor)."""
        return subprocess.run([str(self.exe.parent / "python"), "-m", "hoh", *map(str, args)], capture_output=True,
                              text=True, timeout=timeout, env={**self.env(), **(env or {})}, stdin=subprocess.DEVNULL)

    def hoh_async(self, *args: Any, env: dict[str, str] | None = None) -> subprocess.Popen:
        return subprocess.Popen([str(self.exe.parent / "python"), "-m", "hoh", *map(str, args)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**self.env(), **(env or {})}, stdin=subprocess.DEVNULL)

    def cli(self, *args: Any, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.exe), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                              env=self.env(), stdin=subprocess.DEVNULL)

    def run(self, path: Path, jobs: Path, name: str, *args: Any, timeout: float = 900) -> list[Trial]:
        """`harbor run -p PATH --env docker ...`; the trials of the job, by task name."""
        result = self.cli("run", "-p", path, "--env", "docker", "-o", jobs, "--job-name", name, "-y", *args,
                          timeout=timeout)
        job = jobs / name
        assert job.is_dir(), f"harbor run made no job dir (exit {result.returncode}): {result.stderr[-2000:]}"
        trials = sorted((Trial(d) for d in job.iterdir() if (d / "result.json").is_file()), key=lambda t: t.task)
        assert trials, f"no trial finished (exit {result.returncode}): {result.stdout[-2000:]}{result.stderr[-2000:]}"
        return trials

    def python(self, code: str) -> subprocess.CompletedProcess:
        """Python code in Harbor's venv (hoh.harbor imports there)."""
        return subprocess.run([str(self.exe.parent / "python"), "-c", code], capture_output=True, text=True,
                              timeout=120, env=self.env(), stdin=subprocess.DEVNULL)

    def lint(self, *tasks: Path) -> list[dict[str, Any]]:
        rules = [a for rule in VALIDITY_RULES for a in ("--select", rule)]
        result = self.cli("lint", *rules, "--json", *tasks)
        return json.loads(result.stdout or "[]")


@pytest.fixture(scope="session")
def harbor(tmp_path_factory) -> Harbor:
    required = bool(os.environ.get("HOH_REQUIRE_HARBOR"))
    exe = find_harbor()
    problem = "no harbor CLI: python3.12 -m venv .venv-harbor && .venv-harbor/bin/pip install -e '.[harbor]'" \
        if exe is None else docker_problem()
    if problem:
        if required:
            pytest.fail(f"Harbor and Docker are required (HOH_REQUIRE_HARBOR) but: {problem}")
        pytest.skip(problem)
    return Harbor(exe, tmp_path_factory.mktemp("harbor-cache"))


def finish(procs: dict[str, subprocess.Popen], timeout: float = 900) -> dict[str, subprocess.CompletedProcess]:
    """Wait for concurrent `hoh bench run`s; each must succeed."""
    done = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=timeout)
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        assert proc.returncode == 0, (name, stdout[-3000:], stderr[-3000:])
    return done


@pytest.fixture(scope="session")
def bench_runs(harbor, tmp_path_factory) -> dict[str, Path]:
    """`hoh bench run benchmarks/examples` on Docker, once per session (whichever xdist workers ask) and
    concurrently: Harbor's oracle, and hoh with the scripted harness over three loops."""
    def make(root: Path) -> None:
        finish({"oracle": harbor.hoh_async("bench", "run", EXAMPLES, "--harness", "oracle", "--env", "docker",
                                           "-o", root / "oracle", "-j", "3", "-q"),
                # the oracle run is the examples' calibration (and the modes test calibrates kvstore)
                "scripted": harbor.hoh_async("bench", "run", EXAMPLES, "--harness", "scripted", "--loops", "3",
                                             "--env", "docker", "-o", root / "scripted", "-j", "4", "-q",
                                             "--no-calibrate")})

    root = shared_once(tmp_path_factory, "bench-runs", make)
    return {"oracle": root / "oracle", "scripted": root / "scripted"}


TRUST = REPO / "tests" / "data" / "bench_trust"


@pytest.fixture(scope="session")
def bench_trust(harbor, tmp_path_factory) -> dict[str, Path]:
    """`hoh bench run tests/data/bench_trust` on Docker, once per session, two runs at once: `stop` (three loops,
    a failed role stops the run, every task) and `one` (one loop, the bench's own policy of going on past a
    failed role, only no-model and twokeys). Each run's exit code and output are kept beside it (NAME.json)."""
    def make(root: Path) -> None:
        procs = {"stop": harbor.hoh_async("bench", "run", TRUST, "--harness", "scripted", "--loops", "3", "--env",
                                          "docker", "-o", root / "stop", "-j", "4", "-q",
                                          "--set", "policy.on_role_failure=stop"),
                 "one": harbor.hoh_async("bench", "run", TRUST, "--harness", "scripted", "--loops", "1", "--env",
                                         "docker", "-o", root / "one", "-j", "2", "-q", "-i", "no-model",
                                         "-i", "twokeys")}
        for name, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=900)
            (root / f"{name}.json").write_text(json.dumps({"exit": proc.returncode, "stdout": stdout,
                                                           "stderr": stderr}))

    root = shared_once(tmp_path_factory, "bench-trust", make)
    return {"stop": root / "stop", "one": root / "one"}


def copy_task(name: str, dest: Path, *, timeout_sec: float | None = None) -> Path:
    """A copy of an example task, optionally with another `[agent] timeout_sec`."""
    task = shutil.copytree(EXAMPLES / name, dest)
    if timeout_sec is not None:
        toml = (task / "task.toml").read_text()
        toml = toml.replace("[agent]\ntimeout_sec = 600.0", f"[agent]\ntimeout_sec = {timeout_sec}")
        assert f"timeout_sec = {timeout_sec}" in toml
        (task / "task.toml").write_text(toml)
    return task


NO_PYTHON_NO_GIT = "RUN rm -rf /usr/bin/python3* /usr/lib/python3* /usr/bin/git /usr/lib/git-core /usr/share/git-core\n"


def bare_task(dest: Path) -> Path:
    """kvstore on a plain Debian image without Python and git (as real suites' `FROM ubuntu:24.04` images are),
    a file of its own in the workdir (A_0), a shell-only verifier, and a scripted build whose every step is
    shell (loop 2 rewrites kv.sh whole instead of patching it with python3)."""
    task = shutil.copytree(EXAMPLES / "kvstore", dest)
    toml = (task / "task.toml").read_text().replace('name = "hoh-examples/kvstore"', 'name = "hoh-tests/kvbare"')
    (task / "task.toml").write_text(toml)
    dockerfile = task / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + NO_PYTHON_NO_GIT +
                          "RUN printf 'given by the task\\n' > /workspace/NOTES.md\n")
    test_sh = task / "tests" / "test.sh"
    text = test_sh.read_text()
    python_line = next(line for line in text.splitlines() if "python3" in line)
    test_sh.write_text(text.replace(python_line, "printf '{\"reward\": %s}\\n' \"$(awk -v p=$passed -v t=$total "
                                                 "'BEGIN {print p / t}')\" > /logs/verifier/reward.json"))
    script_path = task / "scripted" / "script.yaml"
    script = yaml.safe_load(script_path.read_text())
    solution = (task / "solution" / "solve.sh").read_text()
    kv = solution.split("<<'SH'\n", 1)[1].split("\nSH\n", 1)[0] + "\n"
    script["loops"][2]["developer"]["actions"][0] = {"write": {"path": "kv.sh", "executable": True, "content": kv}}
    del script["loops"][3]
    script_path.write_text(yaml.safe_dump(script, sort_keys=False))
    return task


def image_has(context: Path, tag: str, *programs: str) -> list[str]:
    """Build the task's image (Docker's cache makes it the one Harbor built) and list which programs it has."""
    build = subprocess.run(["docker", "build", "-q", "-t", tag, str(context)], capture_output=True, text=True,
                           timeout=600)
    assert build.returncode == 0, build.stderr
    found = subprocess.run(["docker", "run", "--rm", tag, "sh", "-c",
                            " ; ".join(f"command -v {p}" for p in programs) + "; true"],
                           capture_output=True, text=True, timeout=120)
    return found.stdout.split()


def compose_containers() -> list[tuple[str, str]]:
    """(id, compose project) of every compose container on the engine, running or not."""
    listed = subprocess.run(["docker", "ps", "-a", "--filter", "label=com.docker.compose.project", "--format",
                             '{{.ID}} {{.Label "com.docker.compose.project"}}'], capture_output=True, text=True,
                            timeout=60, check=True)
    return [(line.split()[0], line.split()[1]) for line in listed.stdout.splitlines() if len(line.split()) == 2]


def containers_of_job(job: Path, kind: str = "ps -a") -> list[str]:
    """The containers (or with kind="network ls", the networks) of a Harbor job's trials: their compose
    projects are TRIAL__env (TRIAL: the trial dir)."""
    trials = tuple(d.name.lower() + "__" for d in job.iterdir() if d.is_dir()) if job.is_dir() else ()
    listed = subprocess.run(["docker", *kind.split(), "--filter", "label=com.docker.compose.project", "--format",
                             '{{.ID}} {{.Label "com.docker.compose.project"}}'], capture_output=True, text=True,
                            timeout=60, check=True)
    return [line.split()[0] for line in listed.stdout.splitlines()
            if len(line.split()) == 2 and line.split()[1].startswith(trials)]


def remove_compose_projects(job: Path) -> None:
    """Remove what a job's trials left on the engine (a test that kept it): containers, then networks (the
    engine has room for ~30 networks only)."""
    for kind, remove in (("ps -a", "rm -f"), ("network ls", "network rm")):
        found = containers_of_job(job, kind)
        if found:
            subprocess.run(["docker", *remove.split(), *found], capture_output=True, timeout=120)
