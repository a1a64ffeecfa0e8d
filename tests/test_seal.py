"""The sealed loops' check: every kind of change a role can make to a finished loop is found, whether
the kernel's watch narrows the check (inotify) or every sealed file is stat-checked (no watch, or a
watch that lost track), and a restore puts the sealed bytes back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import mini_script, run_hoh

from hoh import api
from hoh.fsutil import prune_empty_dirs
from hoh.store.objects import LooseObjects
from hoh.store.seal import SealedState
from hoh.store.workspace import open_workspace

ATTEMPT = "loops/0001/roles/planner/attempt-1"


@pytest.fixture
def sealed(demo_ws, tmp_path):
    ws_dir = tmp_path / "ws"
    shutil.copytree(demo_ws, ws_dir, symlinks=True)
    ws = open_workspace(ws_dir)
    state = SealedState(ws.history, ws.paths.state)
    assert state.sealed_loops() == [1, 2, 3, 4]
    assert state.changes([]) == []  # the baseline, recorded at the first check
    return state


def tamper(state_dir, how: str) -> list[str]:
    """Make one change to sealed loop 1; return what the check must report."""
    target = state_dir / ATTEMPT / "prompt.md"
    if how == "modify":
        target.write_text("forged\n")
        return [f"modified {ATTEMPT}/prompt.md"]
    if how == "same size":
        data = target.read_bytes()
        target.write_bytes(data[:-1] + (b"x" if data[-1:] != b"x" else b"y"))
        return [f"modified {ATTEMPT}/prompt.md"]
    if how == "chmod":
        target.chmod(0o755)
        return [f"changed the mode of {ATTEMPT}/prompt.md"]
    if how == "delete":
        target.unlink()
        return [f"deleted {ATTEMPT}/prompt.md"]
    if how == "create":
        (state_dir / ATTEMPT / "planted.md").write_text("x")
        return [f"created {ATTEMPT}/planted.md"]
    if how == "move a parent away":  # only the moved directory's parent sees an event
        names = sorted(os.listdir(state_dir / ATTEMPT))
        shutil.move(state_dir / "loops/0001/roles", state_dir.parent / "moved")
        return sorted(f"deleted {ATTEMPT}/{name}" for name in names)
    raise AssertionError(how)


HOW = ["modify", "same size", "chmod", "delete", "create", "move a parent away"]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("watch", ["kernel watch", "stat only"])
def test_every_change_to_a_sealed_loop_is_found_and_restored(sealed, how, watch):
    if watch == "stat only":
        sealed._watch.close()
        sealed._watch = None
    elif not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux's")
    else:
        assert sealed._watch is not None and sealed._watch.usable
    state_dir = sealed.state_dir
    before = (state_dir / ATTEMPT / "prompt.md").read_bytes()
    expected = tamper(state_dir, how)
    found = sealed.changes([])
    if how == "move a parent away":
        assert sorted(c for c in found if c.startswith(f"deleted {ATTEMPT}/")) == expected
    else:
        assert found == expected
    sealed.restore(found)
    assert (state_dir / ATTEMPT / "prompt.md").read_bytes() == before
    assert not (state_dir / ATTEMPT / "planted.md").exists()
    assert sealed.changes([]) == [] and sealed.verify([]) == []


def test_a_watch_that_lost_track_falls_back_to_checking_everything(sealed):
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux's")
    sealed._watch.usable = False  # what a full kernel queue (IN_Q_OVERFLOW) does
    expected = tamper(sealed.state_dir, "modify")
    assert sealed.changes([]) == expected
    assert sealed._watch is None  # from now on every check is a full stat check
    sealed.restore(expected)
    assert sealed.changes([]) == []


def test_a_check_with_no_event_reads_nothing(sealed, monkeypatch):
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux's")
    calls = []
    real = os.lstat
    monkeypatch.setattr(os, "lstat", lambda path, *a, **k: calls.append(path) or real(path, *a, **k))
    (sealed.state_dir / ATTEMPT / "prompt.md").read_bytes()  # reading is not a change
    assert sealed.changes([]) == [] and calls == []


# ---- empty directories: git records none, so a sealed loop holds none -------------------------------------
def run_hoh_ok(*args):
    result = run_hoh(*args)
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.parametrize("left", ["evidence", "evidence/screens/raw"])
def test_an_empty_dir_qa_left_does_not_stop_the_next_loop(make_project, left):
    """A loop-1 QA that left an empty directory in its evidence (its whole evidence dir, or an empty subdir
    next to its files): the loop seals, `--verify` agrees, and the next loop starts."""
    script = mini_script(2)
    qa = script["loops"][1]["qa"]
    if left == "evidence":  # nothing written at all: a QA that could not check anything
        qa["checks"] = []
        qa["reply"] = {"criteria": [{"id": "T1.A1", "status": "insufficient_evidence", "evidence": [],
                                     "notes": "could not run it"}]}
    qa["actions"] = [{"run": f"mkdir -p ${{evidence_dir}}/{left.removeprefix('evidence')}"}]
    p = make_project(script)
    assert p.build(loops=1).status == "finished"
    run_hoh_ok("status", "-w", p.ws, "--verify")
    run_hoh_ok("resume", "-w", p.ws, "--loops", "1", "-q")
    assert api.status(p.ws)["loops_finished"] == 2
    sealed_dir = p.state("loops", "0001")
    assert not (sealed_dir / left).exists()  # no empty dir outlives the seal: the state is what was sealed
    assert (sealed_dir / "evidence" / "T1.A1.txt").is_file() == (left != "evidence")
    assert not [e for e in p.journal() if "violation" in e["event"]]
    results = list(p.ws.glob("state/loops/*/roles/*/attempt-*/result.json"))
    assert len(results) == 6 and not [r for r in results if json.loads(r.read_text())["violations"]]


@pytest.mark.parametrize("change", ["an empty dir", "a file in a dir that was empty"])
def test_a_dir_made_in_a_sealed_loop_after_sealing_is_found(make_project, change):
    script = mini_script(2)
    script["loops"][1]["qa"]["actions"] = [{"run": "mkdir -p ${evidence_dir}/screens"}]
    p = make_project(script)
    assert p.build(loops=1).status == "finished"
    planted = p.state("loops", "0001", "evidence", "screens")
    planted.mkdir()
    if change != "an empty dir":
        (planted / "shot.png").write_bytes(b"forged")
    verify = run_hoh("status", "-w", p.ws, "--verify")
    assert verify.returncode == 1 and "loops/0001/evidence/screens" in verify.stderr
    resumed = run_hoh("resume", "-w", p.ws, "--loops", "1", "-q")
    assert resumed.returncode == 2 and "changed after it was sealed (created" in resumed.stderr
    assert str(planted) in resumed.stderr and len(resumed.stderr.splitlines()) == 1
    run_hoh_ok("status", "-w", p.ws, "--verify", "--repair")
    assert not planted.exists()
    run_hoh_ok("resume", "-w", p.ws, "--loops", "1", "-q")
    assert api.status(p.ws)["loops_finished"] == 2


def test_sealing_keeps_what_only_looks_empty(tmp_path):
    """Pruning takes directories with nothing in them, deepest first; a link or a file keeps its directory."""
    root = tmp_path / "loops" / "0001"
    for d in ("a/b/c", "keep-link", "keep-file/x"):
        (root / d).mkdir(parents=True)
    (root / "keep-link" / "to").symlink_to(tmp_path / "nowhere")
    (root / "keep-file" / "x" / "f").write_text("y")
    prune_empty_dirs(root)
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == [
        "keep-file", "keep-file/x", "keep-file/x/f", "keep-link", "keep-link/to"]


def test_each_seal_joins_one_loops_tree_to_the_earlier_ones_and_gives_the_tree_of_them_all(demo_ws, tmp_path):
    """A seal writes only its loop (an index of that loop alone): the sealed tree is still the tree of every sealed
    loop's files, as one index of them all would give, and a new process seals on from it."""
    ws_dir = tmp_path / "ws"
    shutil.copytree(demo_ws, ws_dir, symlinks=True)
    ws = open_workspace(ws_dir)
    for t in (5, 6):  # two more finished loops' dirs, sealed by two processes' SealedState in turn
        shutil.copytree(ws.paths.state / "loops" / "0004", ws.paths.state / "loops" / f"{t:04d}", symlinks=True)
        (ws.paths.state / "loops" / f"{t:04d}" / "qa.json").write_text(f'{{"loop": {t}}}\n')
        SealedState(ws.history, ws.paths.state).seal(t)
    state = SealedState(ws.history, ws.paths.state)
    assert state.sealed_loops() == [1, 2, 3, 4, 5, 6]
    whole = tmp_path / "whole-index"
    ws.history.git("add", "--force", "--", "loops/0001", "loops/0002", "loops/0003", "loops/0004", "loops/0005",
                   "loops/0006", work_tree=ws.paths.state, index=whole)
    assert state.sealed_tree() == ws.history.git("write-tree", work_tree=ws.paths.state, index=whole)
    assert not (ws.paths.history / "seal-index").exists()
    assert state.changes([]) == [] and state.verify([]) == []
    (ws.paths.state / "loops" / "0006" / "qa.json").write_text("forged\n")
    assert state.changes([]) == ["modified loops/0006/qa.json"]
    state.restore(["modified loops/0006/qa.json"])
    assert (ws.paths.state / "loops" / "0006" / "qa.json").read_text() == '{"loop": 6}\n'


# ---- hoh's own trees: what git would record, or git asked ---------------------------------------------------

def _git_tree(git_dir, work, index) -> str:
    env = {**os.environ, "GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(work), "GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", "add", "--force", "."], env=env, check=True, capture_output=True)
    return subprocess.run(["git", "write-tree"], env=env, check=True, capture_output=True, text=True).stdout.strip()


def test_a_tree_hoh_writes_is_the_one_git_writes(tmp_path):
    """Names git orders unlike a plain sort ("a" as a directory sorts as "a/", after "a.b" and "a-b"), an
    executable, an empty file, an empty directory (no entry), a name that is not UTF-8; fsck finds no fault."""
    work, git_dir = tmp_path / "d", tmp_path / "h.git"
    for rel, data in {"a/x": b"1", "a.b/y": b"2", "a-b": b"3", "a0": b"", "run": b"#!/bin/sh\n",
                      "deep/er/est/f": b"4" * 70_000}.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_bytes(data)
    (work / "run").chmod(0o744)
    (work / "a0").chmod(0o600)
    (work / "nothing" / "here").mkdir(parents=True)
    (work / os.fsdecode(b"caf\xe9")).write_bytes(b"5")
    subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True)
    made = LooseObjects(git_dir).tree_of(work)
    assert made is not None
    tree, blobs = made
    assert tree == _git_tree(git_dir, work, tmp_path / "index")
    assert blobs["deep/er/est/f"] == subprocess.run(["git", "hash-object", str(work / "deep/er/est/f")],
                                                    capture_output=True, text=True).stdout.strip()
    subprocess.run(["git", "--git-dir", str(git_dir), "fsck", "--strict", "--no-dangling"], check=True,
                   capture_output=True)


@pytest.mark.parametrize("odd", ["link", "fifo", "nested .git"])
def test_a_tree_git_must_judge_is_left_to_git(tmp_path, odd):
    work = tmp_path / "d"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "f").write_text("x")
    if odd == "link":
        (work / "sub" / "l").symlink_to("f")
    elif odd == "fifo":
        os.mkfifo(work / "sub" / "p")
    else:
        (work / "sub" / ".git").mkdir()
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "h.git")], check=True)
    assert LooseObjects(tmp_path / "h.git").tree_of(work) is None
