"""The hostile corpus again as an unprivileged user, when the suite runs as root (as CI does).

As root a jailed role starts with every capability to drop; as a user bwrap builds the jail in a
user namespace instead, and the host paths a hostile role aims at (/root, /etc) behave otherwise.
Both must hold, and so must the environment cases (test_envs_trust.py), where hoh is the user and its roles
are root in their containers, and a run on rootless Podman. `unprivileged.py` makes the user, its copy of the
checkout and its venv, `unprivileged_harbor.py` its Harbor venv, its way to the Docker engine and its rootless
Podman; skipped when not root, failed instead of skipped when `HOH_CI` is set. `-k as_user` selects the tests;
the long ones (a few minutes each) are `-k corpus_is_held` and `-k environment_cases`.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Callable

import pytest
import unprivileged
import unprivileged_harbor
from conftest import DEMO, run_hoh
from harbor_env import BASE_IMAGE, candidate_ids, harbor, sessions  # noqa: F401 - a fixture
from podman_env import podman_harbor  # noqa: F401 - a fixture

from hoh.envs import enforced

REPO = Path(__file__).resolve().parents[1]
CORPUS_TIMEOUT = 1500
"""Only a hang should reach it: the corpus takes ~250 s on a quiet machine, and took over 720 s in CI, as the user,
sharing two cores with CI's four workers (108 of 148 tests done, each still moving)."""
MIN_PASSED = 40
MIN_ENV_PASSED = 11
TAIL_LINES = 60


@pytest.fixture(scope="session")
def as_user() -> unprivileged.UserEnv:
    return unprivileged.setup(REPO)


def _status(text: str) -> dict[str, str]:
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def test_as_user_a_jailed_role_has_no_privileges(as_user):
    """The environment the long run stands on: the user's bwrap works, and what it jails is no root."""
    tmpdir = as_user.tmpdir()
    try:
        jailed = subprocess.run(
            as_user.command("bwrap", "--die-with-parent", "--unshare-pid", "--cap-drop", "ALL", "--ro-bind", "/", "/",
                            "--dev", "/dev", "--proc", "/proc", "--", "cat", "/proc/self/status"),
            env=as_user.environ(tmpdir), cwd=as_user.home, capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    assert jailed.returncode == 0, f"bwrap as {as_user.user} failed: {jailed.stderr}"
    status = _status(jailed.stdout)
    assert int(status["CapEff"].strip(), 16) == 0, status["CapEff"]
    assert int(status["CapPrm"].strip(), 16) == 0, status["CapPrm"]
    assert all(int(uid) != 0 for uid in status["Uid"].split()), status["Uid"]
    assert status["Uid"].split()[0] == str(as_user.uid)
    assert status["Groups"].split() == [], status["Groups"]  # no group of root's power (docker's) either


def _summary(output: str) -> dict[str, int]:
    """pytest's last line, `3 failed, 70 passed, 1 skipped in 95.1s`, as counts."""
    lines = [line for line in output.splitlines() if re.search(r"\bin [\d.]+s\b", line)]
    found = re.findall(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)", lines[-1] if lines else "")
    return {kind.rstrip("s") if kind.startswith("error") else kind: int(n) for n, kind in found}


def _pytest_as_user(as_user: unprivileged.UserEnv, files: list[str], min_passed: int,
                    environ: Callable[[Path], dict[str, str]] | None = None) -> None:
    """The copy's pytest on `files`, as the user: it exits 0, nothing failed or erred, `min_passed` passed."""
    tmpdir = as_user.tmpdir()
    # A short --basetemp: test paths plus a socket's name must fit in a unix socket address (108 bytes).
    argv = [as_user.python, "-m", "pytest", *files, "-q", "-x", "-p", "no:cacheprovider", "--basetemp", tmpdir / "t",
            "-n", "2"]
    log = tmpdir / "pytest-output.txt"
    with log.open("w") as out:
        proc = subprocess.Popen(as_user.command(*argv), env=(environ or as_user.environ)(tmpdir), cwd=as_user.checkout,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            code = proc.wait(timeout=CORPUS_TIMEOUT)
        except subprocess.TimeoutExpired:
            code = None
        finally:  # its own session: a timeout or a Ctrl-C here must not leave it running
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    output = log.read_text(errors="replace")
    tail = "\n".join(line[:500] for line in output.splitlines()[-TAIL_LINES:])
    where = f"as {as_user.user} in {as_user.checkout}: {' '.join(map(str, argv))}\n(full output: {log})\n{tail}"
    assert code is not None, f"the run took over {CORPUS_TIMEOUT}s {where}"
    counts = _summary(output)
    assert code == 0, f"pytest exited {code} {where}"
    assert counts.get("failed", 0) == 0 and counts.get("error", 0) == 0, f"{counts} {where}"
    assert counts.get("passed", 0) >= min_passed, f"only {counts} {where}"
    shutil.rmtree(tmpdir, ignore_errors=True)


def test_as_user_the_hostile_corpus_is_held(as_user):
    """The copy's pytest, as the user, on test_hostile.py and every test_trust_*.py: all held."""
    files = ["tests/test_hostile.py", *sorted(str(p.relative_to(as_user.checkout))
                                              for p in (as_user.checkout / "tests").glob("test_trust_*.py"))]
    _pytest_as_user(as_user, files, MIN_PASSED)


def test_as_user_the_hostile_environment_cases_are_held(as_user, harbor):
    """test_envs_trust.py and the hostile check of test_envs_checks.py as the user, with its own Harbor venv and the
    engine's socket as a member of its group: hoh is the user and its roles are root in their containers."""
    try:
        engine = unprivileged_harbor.setup(as_user, harbor.exe)
    except (unprivileged.Unavailable, OSError) as err:
        unprivileged.give_up(f"the environment cases cannot run as {as_user.user} here: {err}")
    files = ["tests/test_envs_trust.py",
             "tests/test_envs_checks.py::test_a_hostile_check_in_qa_s_container_changes_no_other_check_s_result"]
    _pytest_as_user(engine.user, files, MIN_ENV_PASSED, environ=engine.environ)


def test_as_user_rootless_podman_gives_the_local_candidate_and_says_which_limits_it_cannot_apply(as_user,
                                                                                                podman_harbor,
                                                                                                tmp_path):
    """The demo's first loop with `--env podman` as the user (rootless Podman, its own store): the candidate of a
    local run, nothing left running, and the limits the engine takes but does not apply said once, exactly when a
    container of its own with those limits shows them missing."""
    try:
        harbor_exe = unprivileged_harbor.harbor_venv(as_user, podman_harbor.exe)
        podman = unprivileged_harbor.rootless_podman(as_user, BASE_IMAGE)
    except (unprivileged.Unavailable, OSError) as err:
        unprivileged.give_up(f"rootless Podman cannot run as {as_user.user} here: {err}")
    local = tmp_path / "local"
    assert run_hoh("build", DEMO / "spec.md", "--loops", "1", "-w", local, "-q").returncode == 0
    tmpdir = as_user.tmpdir()
    env = as_user.environ(tmpdir, HOH_HARBOR=str(harbor_exe), HOH_REQUIRE_HARBOR="1", **podman)

    def podman_as_user(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(as_user.command("podman", *args), env=env, cwd=tmpdir, capture_output=True, text=True,
                              timeout=300, stdin=subprocess.DEVNULL)

    probe = podman_as_user("run", "--rm", "--network", "none", "--pids-limit", "512", "--memory", "1024m", BASE_IMAGE,
                           "sh", "-c", enforced.PROBE)
    assert probe.returncode == 0, probe.stderr
    applies = not enforced.unenforced(probe.stdout, 512, 1024)
    spec = as_user.checkout / DEMO.relative_to(REPO) / "spec.md"
    ws = tmpdir / "ws"
    argv = [harbor_exe.parent / "python", "-m", "hoh", "build", spec, "--harness", "scripted", "--loops", "1",
            "-w", ws, "-q", "--env", "podman", "--env-image", BASE_IMAGE, "--set", "sandbox.limits.processes=512",
            "--set", "sandbox.limits.memory_mb=1024"]
    built = subprocess.run(as_user.command(*argv), env=env, cwd=tmpdir, capture_output=True, text=True,
                           timeout=CORPUS_TIMEOUT, stdin=subprocess.DEVNULL)
    assert built.returncode == 0, built.stderr
    assert candidate_ids(ws) == candidate_ids(local)
    assert sessions(ws), "no environment was journaled"
    left = podman_as_user("ps", "-a", "--format", "{{.Names}}")
    assert left.returncode == 0, left.stderr
    assert not [name for name in left.stdout.split() if any(s in name for s in sessions(ws))], left.stdout
    assert built.stderr.count("does not apply") == (0 if applies else 1), built.stderr
    shutil.rmtree(tmpdir, ignore_errors=True)
