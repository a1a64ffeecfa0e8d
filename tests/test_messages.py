"""What hoh says when it cannot do what was asked: one actionable line, the right exit code, nothing written."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
import unprivileged
from conftest import DEMO, REPO, run_hoh
from test_cli import _fails_cleanly, _nothing_created

from hoh.store.lock import WorkspaceLock


@pytest.fixture(scope="session")
def as_user() -> unprivileged.UserEnv:
    return unprivileged.setup(REPO)


def test_a_second_build_or_resume_of_a_live_run_says_it_is_live(project):
    project.build()
    journal = (project.ws / "state" / "journal.jsonl").read_bytes()
    with WorkspaceLock(project.ws / "hoh.lock"):  # this test process is the live run
        for argv in (("build", project.spec, "-w", project.ws), ("resume", "-w", project.ws, "-n", "1")):
            result = run_hoh(*argv)
            _fails_cleanly(result, f"hoh pid {os.getpid()}", "its run is live", f"hoh status -w {project.ws}",
                           f"hoh stop -w {project.ws}")
            assert "use resume" not in result.stderr and "continue it with" not in result.stderr
    assert (project.ws / "state" / "journal.jsonl").read_bytes() == journal


def test_resume_of_a_finished_run_says_so_and_how_to_add_loops(project):
    project.build()
    journal = (project.ws / "state" / "journal.jsonl").read_bytes()
    result = run_hoh("resume", "-w", project.ws)
    assert result.returncode == 0, result.stderr
    assert "already finished (1/1 loops); nothing to resume" in result.stdout
    assert f"hoh resume -w {project.ws} --loops N" in result.stdout
    assert (project.ws / "state" / "journal.jsonl").read_bytes() == journal  # no empty session journaled


def test_loops_must_be_at_least_one(tmp_path, project):
    ws = tmp_path / "ws-zero"
    _fails_cleanly(run_hoh("build", DEMO / "spec.md", "--loops", "0", "-w", ws), "--loops must be at least 1")
    _nothing_created(tmp_path, ws)
    project.build()
    journal = (project.ws / "state" / "journal.jsonl").read_bytes()
    result = run_hoh("resume", "-w", project.ws, "--loops", "0")
    _fails_cleanly(result, "--loops must be at least 1")
    assert "invalid key" not in result.stderr
    assert (project.ws / "state" / "journal.jsonl").read_bytes() == journal


def test_doctor_at_80_columns_never_breaks_a_command():
    result = subprocess.run([sys.executable, "-m", "hoh", "doctor"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "COLUMNS": "80"}, stdin=subprocess.DEVNULL)
    lines = result.stdout.splitlines()
    installs = [line for line in lines if "npm install" in line]
    for line in installs:  # each whole: the package and its pinned version on the command's own line
        assert re.fullmatch(r"\s*npm install -g \S+@\d[\w.\-]*\s*", line), line
    missing = [line for line in lines if "is not installed or does" in line]
    assert len(installs) == len(missing)
    assert all(len(line) <= 80 for line in lines if "│" in line)  # the table still fits


def test_a_read_only_workspace_reads_and_refuses_writes_as_a_user(demo_ws, as_user):
    tmpdir = as_user.tmpdir()
    ws = tmpdir / "ws"
    try:
        shutil.copytree(demo_ws, ws, symlinks=True)
        subprocess.run(["chmod", "-R", "a-w,a+rX", str(ws)], check=True)

        def hoh(*argv: str) -> subprocess.CompletedProcess:
            return subprocess.run(as_user.command(as_user.python, "-m", "hoh", *argv), env=as_user.environ(tmpdir),
                                  cwd=as_user.home, capture_output=True, text=True, timeout=120,
                                  stdin=subprocess.DEVNULL)

        for argv in (("status", "-w", str(ws)), ("status", "-w", str(ws), "--json"),
                     ("status", "-w", str(ws), "--verify"), ("show", "I-0001", "-w", str(ws))):
            result = hoh(*argv)
            assert result.returncode == 0, (argv, result.stderr)
            assert "internal error" not in result.stderr
        for argv in (("resume", "-w", str(ws), "--loops", "1"), ("note", "-w", str(ws), "look at I-0001")):
            _fails_cleanly(hoh(*argv), f"workspace {ws} is read-only", "chmod -R u+w")
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(tmpdir)])
        shutil.rmtree(tmpdir, ignore_errors=True)
