"""Developers working at once, killed anywhere (issue 27, must show 3): while the packages' Developers run, during
the merge and its merge attempt; the resume gives the candidate an uninterrupted run gives, and every package's
attempt files and usage are kept."""

from __future__ import annotations

import json
from collections import Counter
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import Project, crash_copy, mini_loop, run_hoh
from test_parallel import RESOLVE, journal, two_packages

from hoh import api

STATE_FILES = ("plan.json", "developer.json", "candidate.json", "qa.json", "merge.json")


def snapshot(ws: Path) -> dict[str, bytes]:
    """The deterministic state: each loop's files, each package's result, the ledger, the index, the tags."""
    files = {}
    for path in sorted((ws / "state" / "loops").rglob("*.json")):
        rel = path.relative_to(ws).as_posix()
        if path.name in STATE_FILES or "/packages/" in rel:
            files[rel] = path.read_bytes()
    for name in ("ledger.json", "INDEX.md"):
        files[f"state/{name}"] = (ws / "state" / name).read_bytes()
    git = ["git", "--git-dir", str(ws / "history.git"), "show-ref", "--tags"]
    files["tags"] = subprocess.run(git, capture_output=True, check=True).stdout
    return {k: v.replace(str(ws).encode(), b"WS") for k, v in files.items()}


def script() -> dict:
    return {"schema_version": 1, "loops": {1: mini_loop(1), 2: two_packages(shared=True, merge=RESOLVE, sleep=0.3)}}


def attempts_kept(ws: Path) -> None:
    """Every package attempt the journal started has its directory (its own, or set aside on resume), and every
    finished one's usage is in the loop's figures."""
    loop = ws / "state" / "loops" / "0002" / "roles"
    started = [(e["package"], e["attempt"]) for e in journal(ws)
               if e["event"] == "attempt_started" and e.get("package") and e["loop"] == 2]
    dirs = [(d.name.split(".")[0].removeprefix("developer-"), int(a.name.removeprefix("attempt-")))
            for d in loop.iterdir() if d.name.startswith("developer-") for a in d.iterdir()]
    assert not Counter(started) - Counter(dirs)  # (a kill between an attempt's prompt and its journal line
    # leaves a dir the journal never started: more dirs than starts)
    finished = [e for e in journal(ws) if e["event"] == "attempt_finished" and e["loop"] == 2 and e["role"] == "developer"]
    tokens = sum(e["usage"]["input_tokens"] + e["usage"]["output_tokens"] for e in finished)
    assert api.status(ws)["loops"][1]["usage"]["developer"]["input_tokens"] + \
        api.status(ws)["loops"][1]["usage"]["developer"]["output_tokens"] == tokens


@pytest.fixture(scope="module")
def after_loop_one(tmp_path_factory):
    """Loop 1 (one Developer) done; the state an uninterrupted loop 2 (two packages, a conflict merged by a
    Developer) reaches; and how many journal appends and state writes that loop 2 makes."""
    root = tmp_path_factory.mktemp("parallel-resume")
    p = Project(root, script())
    assert p.build(loops=1, sets={"policy.developers": 2}).status == "finished"
    reference = root / "reference"
    shutil.copytree(p.ws, reference, symlinks=True)
    assert api.resume(reference, more_loops=1).status == "finished"
    assert json.loads((reference / "state/loops/0002/merge.json").read_text())["merged"][1]["how"] == "resolved"
    counts = {}
    for mode in ("journal", "write"):
        proc = crash_copy(p.ws, root / f"probe-{mode}", mode, 0)
        assert proc.returncode == 3, proc.stderr
        counts[mode] = int(proc.stdout)
    return p.ws, snapshot(reference), counts


POINTS = [("journal", k) for k in range(1, 41, 3)] + [("write", k) for k in range(1, 41, 3)]


@pytest.mark.parametrize("mode,point", POINTS, ids=[f"{m}-{k}" for m, k in POINTS])
def test_a_crash_at_a_step_of_a_parallel_loop_resumes_to_the_same_state(after_loop_one, tmp_path, mode, point):
    ws, expected, counts = after_loop_one
    assert counts[mode] < 41, "a parallel loop now has more crash points than this test covers; raise the range"
    if point > counts[mode]:
        pytest.skip(f"loop 2 makes only {counts[mode]} {mode} points")
    crashed = tmp_path / "ws"
    proc = crash_copy(ws, crashed, mode, point)
    assert proc.returncode == 137, proc.stderr
    report = api.resume(crashed)
    assert report.status == "finished" and report.loops_finished == 2
    assert snapshot(crashed) == expected
    attempts_kept(crashed)


def _kill_when(proc: subprocess.Popen, journal_path: Path, ready) -> None:
    while proc.poll() is None:
        if journal_path.exists() and ready([json.loads(line) for line in journal_path.read_text().splitlines()
                                            if line.endswith("}")]):
            break
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)  # hoh only: its Developers' processes are left running, as in a real crash
    proc.wait()


def _both_running(events) -> bool:
    return sum(e["event"] == "attempt_started" and e.get("package") in ("P1", "P2") and e["loop"] == 2
               for e in events) == 2


def _merging(events) -> bool:
    return any(e["event"] == "attempt_started" and e.get("package") == "merge-P2" for e in events)


def _merged_one(events) -> bool:
    return any(e["event"] == "package_merged" and e["loop"] == 2 for e in events)


def test_kill_9_while_developers_run_and_during_the_merge_then_resume_matches(tmp_path):
    spec_dir = tmp_path / "spec"
    spec_dir.mkdir()
    (spec_dir / "spec.md").write_text("# Two parts\n\nTwo programs, built at once.\n")
    (spec_dir / "script.yaml").write_text(yaml.safe_dump(script(), sort_keys=False))
    build = ["build", spec_dir / "spec.md", "--harness", "scripted", "--developers", "2", "--loops", "2", "-q"]
    reference = tmp_path / "reference"
    assert run_hoh(*build, "-w", reference).returncode == 0
    expected = snapshot(reference)
    total = len(journal(reference))
    rng = random.Random(int(os.environ.get("HOH_TEST_SEED", "0")) or None)
    at = rng.randrange(total // 2, total - 5)
    moments = {"both Developers running": _both_running, "the merge attempt running": _merging,
               "a package merged": _merged_one, f"journal line {at}": lambda events: len(events) >= at}
    for n, (what, ready) in enumerate(moments.items()):
        ws = tmp_path / f"killed-{n}"
        proc = subprocess.Popen([sys.executable, "-m", "hoh", *map(str, build), "-w", str(ws)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _kill_when(proc, ws / "state" / "journal.jsonl", ready)
        assert '"run_finished"' not in (ws / "state" / "journal.jsonl").read_text(), what
        result = run_hoh("resume", "-w", ws, "-q")
        assert result.returncode == 0, (what, result.stderr)
        assert snapshot(ws) == expected, what
        attempts_kept(ws)
