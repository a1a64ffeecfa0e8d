"""Crash anywhere, resume, and end in exactly the state an uninterrupted run reaches."""

from __future__ import annotations

import os
import random
import select
import json
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import DEMO, crash_copy, mini_script, run_hoh

from hoh import api
from hoh.errors import WorkspaceBusy
from hoh.store.lock import WorkspaceLock

STATE_FILES = ("plan.json", "plan.md", "developer.json", "candidate.json", "qa.json", "replay.json", "checks.json")
TIMED = ("replay.json", "checks.json")
"""State files that record how long each check ran: compared without their seconds."""


def untimed(value):
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k != "seconds"}
    return [untimed(v) for v in value] if isinstance(value, list) else value


def snapshot(ws: Path) -> dict[str, bytes]:
    """Every deterministic state file, plus the project's tags → commits; the workspace's own path
    (which appears in captured tracebacks) is written as WS so copies compare equal."""
    files = {}
    for path in sorted((ws / "state" / "loops").rglob("*")):
        rel = path.relative_to(ws).as_posix()
        if path.is_file() and (path.name in STATE_FILES or "/evidence/" in rel or "/replay/" in rel):
            files[rel] = path.read_bytes()
            if path.name in TIMED:
                files[rel] = json.dumps(untimed(json.loads(files[rel]))).encode()
    for name in ("ledger.json", "INDEX.md", "checks.json"):
        files[f"state/{name}"] = (ws / "state" / name).read_bytes()
    tags = subprocess.run(["git", "show-ref", "--tags"], cwd=ws / "project", capture_output=True, text=True).stdout
    files["tags"] = tags.encode()
    return {k: v.replace(str(ws).encode(), b"WS") for k, v in files.items()}


@pytest.fixture(scope="module")
def after_loop_one(tmp_path_factory):
    """A workspace with loop 1 finished, and the state an uninterrupted loop 2 reaches from it."""
    root = tmp_path_factory.mktemp("resume")
    from conftest import Project
    script = mini_script(2)
    for loop in script["loops"].values():  # QA's check is kept and replayed: those steps have crash points too
        for check in loop["qa"]["checks"]:
            check["attach"] = {"paths": ["greet.py"]}
    p = Project(root, script)
    assert p.build(loops=1).status == "finished"
    reference = root / "reference"
    shutil.copytree(p.ws, reference, symlinks=True)
    assert api.resume(reference, more_loops=1).status == "finished"
    replayed = json.loads((reference / "state" / "loops" / "0002" / "replay.json").read_text())
    assert [r["status"] for r in replayed["results"]] == ["passed"]
    return p.ws, snapshot(reference), count_points(p.ws, root)


def count_points(ws: Path, root: Path) -> dict[str, int]:
    """How many journal appends and state writes an uninterrupted loop 2 makes."""
    counts = {}
    for mode in ("journal", "write"):
        proc = crash_copy(ws, root / f"probe-{mode}", mode, 0)
        assert proc.returncode == 3, proc.stderr
        counts[mode] = int(proc.stdout)
    return counts


CRASH_POINTS = [("journal", k) for k in range(1, 31)] + [("write", k) for k in range(1, 31)]


@pytest.mark.parametrize("mode,point", CRASH_POINTS, ids=[f"{m}-{k}" for m, k in CRASH_POINTS])
def test_interruption_at_every_step_resumes_to_the_same_state(after_loop_one, tmp_path, mode, point):
    ws, expected, counts = after_loop_one
    assert counts[mode] < 31, "a loop now has more crash points than this test covers; raise the range"
    if point > counts[mode]:
        pytest.skip(f"loop 2 makes only {counts[mode]} {mode} points")
    crashed = tmp_path / "ws"
    proc = crash_copy(ws, crashed, mode, point)
    assert proc.returncode == 137, proc.stderr
    report = api.resume(crashed)
    assert report.status == "finished" and report.loops_finished == 2
    assert snapshot(crashed) == expected


def test_a_second_process_on_the_same_workspace_is_refused(project):
    project.build()
    with WorkspaceLock(project.ws / "hoh.lock"):
        with pytest.raises(WorkspaceBusy, match="in use by hoh pid"):
            api.resume(project.ws, more_loops=1)
        result = run_hoh("resume", "-w", project.ws, "--loops", "1", "-q")
    assert result.returncode == 2 and "in use" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_resume_right_after_a_kill_waits_for_a_child_still_holding_the_dead_run_s_lock(tmp_path, monkeypatch):
    """A run killed while a thread forked a role leaves that child holding the flock until it execs."""
    root = tmp_path / "ws"
    root.mkdir()
    release_r, release_w = os.pipe()
    # The dead run: it took the lock, forked a child that shares it, and was killed.
    run = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, subprocess, sys
        fd = os.open({str(root)!r}, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(fd, fcntl.LOCK_EX)
        open({str(root / "hoh.lock")!r}, "w").write(str(os.getpid()))
        child = subprocess.Popen([sys.executable, "-c", "import os; os.read({release_r}, 1)"], pass_fds=(fd, {release_r}))
        print(child.pid, flush=True)
        os._exit(137)
    """)], stdout=subprocess.PIPE, text=True, pass_fds=(release_r,))
    child = int(run.stdout.readline())
    assert run.wait() == 137
    os.close(release_r)

    def let_go(_seconds):  # the first wait: the child execs (here: ends) and lets go
        try:
            pidfd = os.pidfd_open(child)
        except ProcessLookupError:
            pidfd = None
        os.close(release_w)
        if pidfd is not None:
            select.select([pidfd], [], [], 60)
            os.close(pidfd)
    monkeypatch.setattr("hoh.store.lock.time.sleep", let_go)
    with WorkspaceLock(root / "hoh.lock") as lock:
        assert (root / "hoh.lock").read_text() == str(os.getpid())
    assert lock._fd is None


def _candidate_ids(ws: Path) -> list[str]:
    return [api.status(ws)["loops"][i]["candidate_id"] for i in range(3)]


def test_kill_9_of_hoh_build_then_resume_matches_an_uninterrupted_run(tmp_path):
    reference = tmp_path / "reference"
    assert run_hoh("build", DEMO / "spec.md", "--harness", "scripted", "--loops", "3", "-w", reference, "-q").returncode == 0
    expected = _candidate_ids(reference)

    total = len((reference / "state" / "journal.jsonl").read_text().splitlines())
    rng = random.Random(int(os.environ.get("HOH_TEST_SEED", "0")) or None)
    interrupted = 0
    for trial in range(3):
        ws = tmp_path / f"killed-{trial}"
        journal = ws / "state" / "journal.jsonl"
        kill_at = rng.randrange(2, total - 5)  # an arbitrary moment, measured in journal events
        proc = subprocess.Popen([sys.executable, "-m", "hoh", "build", str(DEMO / "spec.md"), "--harness", "scripted",
                                 "--loops", "3", "-w", str(ws), "-q"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while proc.poll() is None and not (journal.exists() and journal.read_text().count("\n") >= kill_at):
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)  # hoh only: its agent child is left running, as in a real crash
        proc.wait()
        interrupted += '"run_finished"' not in journal.read_text()
        result = run_hoh("resume", "-w", ws, "-q")
        assert result.returncode == 0, result.stderr
        assert _candidate_ids(ws) == expected
        assert snapshot(ws) == snapshot(reference)
    assert interrupted == 3


def test_a_stale_packed_refs_lock_from_a_kill_does_not_stop_the_resume(make_project):
    # hoh packs its refs after every loop's tag; a kill -9 inside `git pack-refs` leaves its lock behind.
    p = make_project(mini_script(2))
    assert p.build(loops=1).status == "finished"
    (p.ws / "history.git" / "packed-refs.lock").write_text("")
    result = run_hoh("resume", "-w", p.ws, "--loops", "1", "-q")
    assert result.returncode == 0, result.stderr
    assert not (p.ws / "history.git" / "packed-refs.lock").exists()


def test_temp_files_a_kill_left_mid_write_are_gone_after_the_resume(make_project):
    # A kill -9 between mkstemp and rename leaves `.NAME.XXXXXXXX.tmp` beside the file, here in loop 2's dir
    # (sealed once loop 2 ends) and in state/; a kill inside a commit leaves its message file in history.git.
    p = make_project(mini_script(2))
    assert p.build(loops=1).status == "finished"
    strays = [p.state(".ledger.json.k3j2h1x0.tmp"), p.state("loops", "0002", ".plan.json.a8b7c6d5.tmp"),
              p.ws / ".hoh.stop.q1w2e3r4.tmp", p.ws / "history.git" / "tmpab12cd34.msg"]
    for stray in strays:
        stray.parent.mkdir(parents=True, exist_ok=True)
        stray.write_text("half")
    result = run_hoh("resume", "-w", p.ws, "--loops", "1", "-q")
    assert result.returncode == 0, result.stderr
    assert [s for s in strays if s.exists()] == []
    assert run_hoh("status", "-w", p.ws, "--verify").returncode == 0


def test_a_session_starts_by_packing_history_git_once_it_holds_many_loose_objects(make_project, monkeypatch):
    from hoh.runtime import setup

    p = make_project(mini_script(3))
    assert p.build(loops=1).status == "finished"
    git = ["git", "--git-dir", str(p.ws / "history.git")]

    def counts() -> dict[str, int]:
        out = subprocess.run([*git, "count-objects", "-v"], capture_output=True, text=True, check=True).stdout
        return {key: int(value) for key, value in (line.split(": ") for line in out.splitlines()) if value.isdigit()}

    def reachable() -> set[str]:
        out = subprocess.run([*git, "rev-list", "--objects", "--all"], capture_output=True, text=True, check=True)
        return {line.split()[0] for line in out.stdout.splitlines()}

    loose = counts()["count"]
    monkeypatch.setattr(setup, "PACK_LOOSE_AFTER", loose + 1)  # not yet: left loose
    assert api.resume(p.ws, more_loops=1).status == "finished"
    assert counts()["in-pack"] == 0 and counts()["count"] > loose
    objects, before = reachable(), counts()["count"]
    monkeypatch.setattr(setup, "PACK_LOOSE_AFTER", before)  # reached at the next session's start
    assert api.resume(p.ws, more_loops=1).status == "finished"
    after = counts()  # packed, then one more loop's objects written loose
    assert after["packs"] == 1 and after["in-pack"] >= len(objects) and after["count"] < before
    check = subprocess.run([*git, "cat-file", "--batch-check"], input="\n".join(sorted(objects)) + "\n",
                           capture_output=True, text=True, check=True).stdout
    assert "missing" not in check and len(check.splitlines()) == len(objects)  # nothing lost
    subprocess.run([*git, "fsck", "--strict", "--no-dangling"], capture_output=True, check=True)
    assert run_hoh("status", "-w", p.ws, "--verify").returncode == 0


def test_a_pack_that_fails_leaves_history_git_loose_and_the_run_goes_on(make_project, monkeypatch):
    from hoh.runtime import setup
    from hoh.store.git import History
    from hoh.store.gitrun import GitError

    p = make_project(mini_script(2))
    assert p.build(loops=1).status == "finished"
    real = History.git

    def no_room(self, *args, **kwargs):
        if "repack" in args:
            raise GitError("git repack: No space left on device", code=128)
        return real(self, *args, **kwargs)
    monkeypatch.setattr(History, "git", no_room)
    monkeypatch.setattr(setup, "PACK_LOOSE_AFTER", 1)
    assert api.resume(p.ws, more_loops=1).status == "finished"
    assert not list((p.ws / "history.git" / "objects" / "pack").glob("*.pack"))
    assert run_hoh("status", "-w", p.ws, "--verify").returncode == 0
