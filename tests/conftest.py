"""Shared fixtures: an isolated home per test, and a tiny one-task project the scripted agent builds."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from hoh import api
from hoh.config import HohConfig, apply_overrides

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "examples" / "demo"

GREET = 'import sys\nprint("hello " + (sys.argv[1] if len(sys.argv) > 1 else "world"))\n'


def mini_loop(loop: int) -> dict[str, Any]:
    """One well-behaved loop: plan a greeter, write it, check it for real."""
    return {
        "planner": {"reply": {
            "goal": f"greeter, loop {loop}",
            "tasks": [{"id": "T1", "title": "Greet", "details": "print hello NAME", "issues": [],
                       "acceptance": [{"id": "T1.A1", "condition": "`python greet.py bob` prints hello bob",
                                       "method": "black-box"}]}],
            "preserve": [], "out_of_scope": []}},
        "developer": {
            "actions": [{"write": {"path": "greet.py", "content": GREET + f"# loop {loop}\n"}}],
            "reply": {"summary": "wrote greet.py", "tasks": [{"id": "T1", "status": "done", "notes": ""}],
                      "self_tests": [], "known_gaps": []}},
        "qa": {"checks": [{"id": "T1.A1", "run": "python3 greet.py bob", "expect_stdout": "hello bob"}]},
    }


def mini_script(loops: int = 1) -> dict[str, Any]:
    return {"schema_version": 1, "loops": {t: mini_loop(t) for t in range(1, loops + 1)}}


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "CODEX_HOME", "PI_CODING_AGENT_DIR",
                "CLAUDE_CONFIG_DIR"):
        monkeypatch.delenv(var, raising=False)
    return home


class Project:
    """A spec + script pair on disk, and helpers to build it and read the resulting state."""

    def __init__(self, root: Path, script: dict[str, Any], spec: str = "# Greeter\n\nPrint a greeting.\n"):
        self.root = root
        self.spec = root / "spec.md"
        self.spec.write_text(spec)
        self.script_path = root / "script.yaml"
        self.script = script
        self.write_script()
        self.ws = root / "ws"

    def write_script(self) -> None:
        self.script_path.write_text(yaml.safe_dump(self.script, sort_keys=False))

    def config(self, loops: int = 1, sets: dict[str, Any] | None = None) -> HohConfig:
        sets = {"harness.name": "scripted", **(sets or {})}
        return apply_overrides(HohConfig(loops=loops), [f"{k}={json.dumps(v)}" for k, v in sets.items()])

    def build(self, loops: int = 1, sets: dict[str, Any] | None = None):
        return api.build(self.spec, self.ws, self.config(loops, sets))

    def state(self, *parts: str) -> Path:
        return self.ws.joinpath("state", *parts)

    def loop_json(self, loop: int, name: str) -> dict[str, Any]:
        return json.loads(self.state("loops", f"{loop:04d}", f"{name}.json").read_text())

    def attempt_result(self, loop: int, role: str, attempt: int) -> dict[str, Any]:
        return json.loads(self.state("loops", f"{loop:04d}", "roles", role, f"attempt-{attempt}", "result.json").read_text())

    def journal(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.state("journal.jsonl").read_text().splitlines()]


def find_harness_bin() -> Path | None:
    """Where the pinned harness CLIs are installed (.ci/run puts them in .hoh-tools)."""
    for candidate in (os.environ.get("HOH_HARNESS_BIN"), REPO / ".hoh-tools" / "node_modules" / ".bin"):
        if candidate and (Path(candidate) / "codex").exists():
            return Path(candidate)
    return None


@pytest.fixture(scope="session")
def harness_bin() -> Path:
    found = find_harness_bin()
    if found is None:
        if os.environ.get("HOH_REQUIRE_HARNESSES"):
            pytest.fail("the harness CLIs are required (HOH_REQUIRE_HARNESSES) but not installed in .hoh-tools")
        pytest.skip("harness CLIs not installed: npm install --prefix .hoh-tools (see .ci/run)")
    return found


@pytest.fixture
def project(tmp_path) -> Project:
    return Project(tmp_path, mini_script(1))


@pytest.fixture
def make_project(tmp_path):
    def make(script: dict[str, Any], name: str = "p") -> Project:
        root = tmp_path / name
        root.mkdir()
        return Project(root, copy.deepcopy(script))
    return make


def names_harness(args: tuple[str, ...]) -> bool:
    """Whether a `hoh build` command line chooses its harness itself (a flag, a setting or a config file)."""
    return any(a in ("--harness", "-H", "--config") or a.startswith("harness.name=") for a in args)


def wait_for(predicate, timeout: float, what: str, every: float = 0.2) -> Any:
    """Poll `predicate` until it returns something truthy (returned), or fail naming `what`."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := predicate():
            return found
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def crash_copy(ws: Path, dest: Path, mode: str, point: int) -> subprocess.CompletedProcess:
    """A copy of workspace `ws` at `dest`, resumed by `crash_driver.py` until its `point`-th `mode` write point
    (0: none; it then prints how many the loop made)."""
    shutil.copytree(ws, dest, symlinks=True)
    return subprocess.run([sys.executable, str(REPO / "tests" / "crash_driver.py"), mode, str(point), str(dest)],
                          capture_output=True, text=True)


def run_hoh(*args: Any, cwd: Path | None = None, timeout: float = 120,
            harness: str | None = "scripted") -> subprocess.CompletedProcess:
    """The real CLI in a subprocess. hoh has no default harness; a `build` that names none here gets
    `--harness scripted` (the tests' fake), unless `harness=None` asks for the command exactly as given."""
    args = tuple(map(str, args))
    if harness and args[:1] == ("build",) and not names_harness(args):
        args = (*args, "--harness", harness)
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "hoh", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def demo_ws(tmp_path_factory) -> Path:
    """The README's demo, built and resumed through the real CLI: three loops, then one more."""
    root = tmp_path_factory.mktemp("demo")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(root))
        ws = root / "ws"
        built = run_hoh("build", DEMO / "spec.md", "--harness", "scripted", "--loops", "3", "-w", ws, "-q")
        assert built.returncode == 0, built.stderr
        resumed = run_hoh("resume", "-w", ws, "--loops", "1", "-q")
        assert resumed.returncode == 0, resumed.stderr
    return ws


# The tiers: each test is marked by what it needs, read from the fixtures it uses, so a marker cannot drift
# from the need. tests/README.md has the inner-loop command.
TIER_BY_FIXTURE = {"harbor": "docker", "podman_harbor": "docker", "harness_bin": "real_cli", "browser": "browser",
                   "as_user": "slow", "fresh_bin": "slow", "long_ws": "slow", "after_loop_one": "slow"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        for fixture, tier in TIER_BY_FIXTURE.items():
            if fixture in fixtures:
                item.add_marker(getattr(pytest.mark, tier))


# Modules whose module-scoped fixture takes minutes (a Docker run, fresh venvs, a built image): xdist hands
# each to one worker whole, so the fixture is made once. Every other test is its own unit, as `--dist load`.
# (xdist's own `loadgroup` cannot do it on pytest >= 9.2: it renames node ids, which pytest no longer allows.)
# A session fixture several modules share (`bench_runs`) is made once through `shared_once` instead.
WHOLE_MODULES = {"test_bench_shapes.py", "test_bench_modes.py", "test_bench_programbench.py", "test_install.py",
                 "test_as_user.py"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "load":
        return None  # the user chose another mode
    from xdist.scheduler import LoadScopeScheduling

    class ByFixtureCost(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if Path(module).name in WHOLE_MODULES else nodeid

    return ByFixtureCost(config, log)


def shared_once(tmp_path_factory, name: str, make) -> Path:
    """`make(dir)` run once for the whole session, however many xdist workers ask: the first builds `dir`
    under a lock in the directory the workers share, the others wait and get the same `dir`. A build that
    failed fails the others at once with its message, instead of each trying again for minutes."""
    import fcntl
    import traceback
    shared = tmp_path_factory.getbasetemp()
    shared = shared.parent if os.environ.get("PYTEST_XDIST_WORKER") else shared
    target, done, failed = shared / name, shared / f"{name}.done", shared / f"{name}.failed"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if failed.exists():
            pytest.fail(f"{name} could not be made (by another worker):\n{failed.read_text()}")
        if not done.exists():
            target.mkdir(exist_ok=True)
            try:
                make(target)
            except BaseException:
                failed.write_text(traceback.format_exc()[-5000:])
                raise
            done.touch()
    return target
