"""The persisted fold (`state/fold.json`): `hoh status` with it says exactly what it says without it, whatever
happened to the journal or the checkpoint since, and reading it writes nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import unprivileged
from conftest import REPO, mini_script, run_hoh
from long_run import make_long_workspace
from test_budgets import new_project
from test_long_runs import start_build, started, wait_for

from hoh import api
from hoh.paths import WorkspacePaths
from hoh.store import events as ev
from hoh.store import fold
from hoh.store.journal import Journal, RunHistory
from hoh.store.notes import NoteBook


def without_checkpoint(ws: Path) -> dict:
    """`hoh status --json`'s data as the full fold gives it (the checkpoint moved aside meanwhile)."""
    cp, aside = ws / "state" / "fold.json", ws / "fold.json.aside"
    moved = cp.exists()
    if moved:
        os.rename(cp, aside)
    try:
        return api.status(ws)
    finally:
        if moved:
            os.rename(aside, cp)


def binds(ws: Path) -> bool:
    paths = WorkspacePaths(ws)
    return fold._checkpoint(paths, paths.journal.read_bytes()) is not None


def same_fold(ws: Path) -> None:
    paths = WorkspacePaths(ws)
    records = list(Journal(paths.journal).records())
    got = fold.read_fold(paths)
    assert got.history == RunHistory.fold(records) and got.notes == NoteBook.fold(records)


def assert_same_status(ws: Path) -> dict:
    with_it = api.status(ws)
    assert with_it == without_checkpoint(ws)
    return with_it


@pytest.fixture
def demo(demo_ws, tmp_path) -> Path:
    ws = tmp_path / "demo"
    shutil.copytree(demo_ws, ws, symlinks=True)
    return ws


@pytest.fixture(scope="module")
def long_source(tmp_path_factory) -> Path:
    ws = make_long_workspace(tmp_path_factory.mktemp("long") / "ws", loops=80)
    assert fold.save(WorkspacePaths(ws))  # as the Runtime leaves it when a loop ends
    return ws


@pytest.fixture
def long(long_source, tmp_path) -> Path:
    ws = tmp_path / "long"
    shutil.copytree(long_source, ws, symlinks=True)
    return ws


def test_the_runtime_leaves_a_checkpoint_and_status_is_the_same_with_it(demo):
    assert binds(demo)  # written by the Runtime at the end of the demo's last session
    header = json.loads((demo / "state" / "fold.json").read_text().splitlines()[0])
    assert header["offset"] == (demo / "state" / "journal.jsonl").stat().st_size
    assert header["config"]["settings"]["harness"] == "scripted"
    same_fold(demo)
    assert_same_status(demo)
    for argv in (("status",), ("status", "--json"), ("status", "--all"), ("show", "I-0001")):
        fast = run_hoh(*argv, "-w", demo)
        os.rename(demo / "state" / "fold.json", demo / "fold.aside")
        slow = run_hoh(*argv, "-w", demo)
        os.rename(demo / "fold.aside", demo / "state" / "fold.json")
        assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr), argv


def test_a_long_run_and_the_loops_after_its_checkpoint(long):
    assert binds(long)
    same_fold(long)
    before = assert_same_status(long)
    assert len(before["loops"]) == 80
    journal = Journal(WorkspacePaths(long).journal)  # more loops than the checkpoint has: only they are folded
    journal.append(ev.RunStarted(target_loops=82, resumed=True, harness="pi"))
    for t in (81, 82):
        journal.append(ev.LoopStarted(loop=t, base_commit="0" * 40))
        journal.append(ev.AttemptFinished(loop=t, role="planner", attempt=1, ok=True, outcome="ok", errors=[],
                                          usage={"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.5},
                                          violations=0, seconds=3.0, harness="pi", model="m"))
    journal.append(ev.LoopFinished(loop=81, status="pass", candidate_id="c81", verified=1, criteria=1,
                                   issues=None, progress={"behaviours_added": 1}))
    assert binds(long)  # the prefix is as it was: the checkpoint still holds
    same_fold(long)
    after = assert_same_status(long)
    assert [loop["status"] for loop in after["loops"][-2:]] == ["pass", "running"]
    assert after["loops"][-1]["ended"] == "interrupted" and after["roles"]["planner"]["model"] == "m"
    assert fold.save(WorkspacePaths(long))  # and a newer checkpoint gives the same again
    assert binds(long) and api.status(long) == after


def _corrupt_header(ws: Path, **changes) -> None:
    path = ws / "state" / "fold.json"
    lines = path.read_bytes().split(b"\n")
    header = {**json.loads(lines[0]), **changes}
    path.write_bytes(b"\n".join([json.dumps(header).encode(), *lines[1:]]))


CORRUPTIONS = {
    "garbage": lambda ws: (ws / "state" / "fold.json").write_bytes(b"\x00not json\n{}\n"),
    "empty": lambda ws: (ws / "state" / "fold.json").write_bytes(b""),
    "cut short": lambda ws: (ws / "state" / "fold.json").write_bytes((ws / "state" / "fold.json").read_bytes()[:-900]),
    "a flipped byte in the body": lambda ws: _flip(ws / "state" / "fold.json", line=1),
    "a flipped byte in the steps": lambda ws: _flip(ws / "state" / "fold.json", line=2),
    "another schema": lambda ws: _corrupt_header(ws, schema_version=fold.FOLD_SCHEMA_VERSION + 1),
    "another hoh": lambda ws: _corrupt_header(ws, hoh="0.0.1"),
    "an offset past the journal": lambda ws: _corrupt_header(ws, offset=10**9),
    "an offset inside a line": lambda ws: _corrupt_header(ws, offset=json.loads(
        (ws / "state" / "fold.json").read_text().splitlines()[0])["offset"] - 7),
    "a forged prefix hash": lambda ws: _corrupt_header(ws, sha256="0" * 64),
    "other loop fields": lambda ws: _corrupt_header(ws, loop_fields=["loop"]),
}


def _flip(path: Path, line: int) -> None:
    lines = path.read_bytes().split(b"\n")
    body = bytearray(lines[line])
    at = body.index(b'"pass"') + 1  # still JSON, another status: a body the hash must catch
    body[at:at + 4] = b"fail"
    lines[line] = bytes(body)
    path.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("how", list(CORRUPTIONS))
def test_a_broken_or_foreign_checkpoint_is_not_used(long, how):
    expected = without_checkpoint(long)
    CORRUPTIONS[how](long)
    assert not binds(long)
    assert api.status(long) == expected
    same_fold(long)


def test_settings_in_a_changed_header_are_not_used(demo):
    path = demo / "state" / "fold.json"
    header, rest = path.read_bytes().split(b"\n", 1)
    changed = json.loads(header)
    changed["config"]["settings"]["sandbox"] = "off"  # hoh.yaml unchanged: only the hash of the settings tells
    path.write_bytes(json.dumps(changed).encode() + b"\n" + rest)
    assert fold.cached_settings(WorkspacePaths(demo)) is None
    assert api.status(demo)["sandbox"] == "bwrap"


def test_another_workspace_s_checkpoint_is_not_used(long, demo):
    shutil.copyfile(demo / "state" / "fold.json", long / "state" / "fold.json")
    assert not binds(long)
    assert api.status(long)["loops"] == without_checkpoint(long)["loops"]


def test_a_truncated_or_rewritten_journal_is_folded_whole(long):
    journal = long / "state" / "journal.jsonl"
    data = journal.read_bytes()
    cut = data.rindex(b"\n", 0, len(data) // 2) + 1
    journal.write_bytes(data[:cut])  # a journal restored from an older backup
    assert not binds(long)
    assert api.status(long) == without_checkpoint(long)
    journal.write_bytes(data[:cut + 40])  # ... and one cut inside a line (a torn last write)
    assert api.status(long) == without_checkpoint(long)
    same_fold(long)
    rewritten = data.replace(b'"status": "pass"', b'"status": "fail"', 1)  # same length, other content
    assert len(rewritten) == len(data) and rewritten != data
    journal.write_bytes(rewritten)
    assert not binds(long)
    assert api.status(long) == without_checkpoint(long)


def test_a_torn_tail_and_a_broken_line_after_the_checkpoint(long):
    journal = long / "state" / "journal.jsonl"
    with open(journal, "ab") as fh:
        fh.write(b'{"v": 1, "seq": 99999, "time": 1.0, "event": "loop_st')  # kill -9 mid-append
    assert binds(long)
    assert api.status(long) == without_checkpoint(long)
    with open(journal, "ab") as fh:
        fh.write(b'\n{"v": 1, "seq": 100000, "time": 2.0, "event": "run_started"}\n')
    with pytest.raises(Exception) as fast:  # a corrupt line inside the journal: the same error as ever
        api.status(long)
    with pytest.raises(Exception) as slow:
        without_checkpoint(long)
    assert str(fast.value) == str(slow.value) and "is corrupt" in str(fast.value)
    assert not fold.save(WorkspacePaths(long))  # and no checkpoint goes past it


def test_hoh_yaml_edited_or_broken_after_the_checkpoint(demo):
    config = demo / "hoh.yaml"
    config.write_text(config.read_text().replace("  cost_usd: null", "  cost_usd: 12.5"))
    data = assert_same_status(demo)
    assert data["budget"]["cost_usd"]["limit"] == 12.5  # the new hoh.yaml, not the header's settings
    config.write_text(config.read_text() + "\nnot_a_key: 1\n")
    fast = run_hoh("status", "-w", demo)
    os.rename(demo / "state" / "fold.json", demo / "fold.aside")
    slow = run_hoh("status", "-w", demo)
    assert fast.returncode == slow.returncode == 2 and fast.stderr == slow.stderr
    assert "not_a_key" in fast.stderr


def test_a_save_that_goes_on_from_the_last_writes_what_a_save_from_nothing_writes(long, tmp_path):
    """The Runtime's saves fold only what was appended since the last (`fold._Writer`): the checkpoint is
    byte for byte the one a save from the journal alone writes, loop after loop and across sessions."""
    paths, cold = WorkspacePaths(long), WorkspacePaths(tmp_path / "cold")
    shutil.copytree(long, cold.root, symlinks=True)
    data = paths.journal.read_bytes()
    ends = [at + 1 for at, byte in enumerate(data) if byte == ord("\n")]
    cuts = [*ends[:40:7], *ends[len(ends) // 2::41], len(data)]
    paths.journal.write_bytes(b"")
    written = 0
    for cut in cuts:
        with open(paths.journal, "ab") as fh:  # appended as the Runtime appends
            fh.write(data[written:cut])
        written = cut
        assert fold.save(paths)
        cold.journal.write_bytes(data[:cut])
        cold.fold.unlink(missing_ok=True)
        fold._WRITERS.pop(cold.journal, None)
        assert fold.save(cold)
        assert paths.fold.read_bytes() == cold.fold.read_bytes(), cut
    assert binds(long) and api.status(long) == without_checkpoint(long)


def test_a_loop_s_end_writes_the_checkpoint_again_only_once_the_journal_grew_past_it(long):
    """The checkpoint grows with the run: at a loop's end it is written only once the tail a reader must fold
    after it reaches `LOOP_END_TAIL`, and status is the full fold's meanwhile."""
    paths = WorkspacePaths(long)
    data = paths.journal.read_bytes()
    ends = [at + 1 for at, byte in enumerate(data) if byte == ord("\n")]
    half = ends[len(ends) // 2]
    paths.journal.write_bytes(data[:half])
    assert fold.save(paths)  # a session's first save always writes
    before = paths.fold.read_bytes()
    small = next(end for end in ends if end - half >= 2000)
    with open(paths.journal, "ab") as fh:
        fh.write(data[half:small])
    assert not fold.save(paths, unless_tail_under=4096) and paths.fold.read_bytes() == before
    assert api.status(long) == without_checkpoint(long)
    big = next(end for end in ends if end - half >= 4096)
    with open(paths.journal, "ab") as fh:
        fh.write(data[small:big])
    assert fold.save(paths, unless_tail_under=4096) and binds(long)
    assert json.loads(paths.fold.read_bytes().split(b"\n")[0])["offset"] == big
    same_fold(long)


def test_a_journal_rewritten_under_the_writer_never_gives_a_checkpoint_that_binds_to_other_bytes(long):
    paths = WorkspacePaths(long)
    assert fold.save(paths)
    data = paths.journal.read_bytes()
    first = data.index(b'"status": "pass"')
    paths.journal.write_bytes(data[:first] + b'"status": "fail"' + data[first + 16:])  # same size, far before the end
    with open(paths.journal, "ab") as fh:
        fh.write(b'{"v": 1, "seq": 99999, "time": 9.0, "event": "stop_requested", "source": "file"}\n')
    fold.save(paths)  # the writer cannot tell: what it writes must not bind
    assert not binds(long)
    assert api.status(long) == without_checkpoint(long)
    paths.journal.write_bytes(data[: len(data) // 2])  # shorter: read whole again, and binds
    assert fold.save(paths) and binds(long)
    same_fold(long)


def test_status_writes_nothing_and_reads_a_read_only_workspace(demo, tmp_path):
    os.remove(demo / "state" / "fold.json")
    before = {p: p.stat().st_mtime_ns for p in demo.rglob("*") if p.is_file()}
    for argv in (("status",), ("status", "--json"), ("show", "I-0001")):
        assert run_hoh(*argv, "-w", demo).returncode == 0
    assert not (demo / "state" / "fold.json").exists()  # status never writes the checkpoint
    assert {p: p.stat().st_mtime_ns for p in demo.rglob("*") if p.is_file()} == before
    assert fold.save(WorkspacePaths(demo))
    expected = without_checkpoint(demo)
    subprocess.run(["chmod", "-R", "a-w", str(demo)], check=True)
    try:
        assert binds(demo) and api.status(demo) == expected
        assert run_hoh("status", "-w", demo).returncode == 0
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(demo)], check=True)


@pytest.fixture(scope="module")
def as_user() -> unprivileged.UserEnv:
    return unprivileged.setup(REPO)


def test_a_read_only_copy_as_another_user_reads_the_same(demo_ws, as_user):
    tmpdir = as_user.tmpdir()
    ws = tmpdir / "ws"
    try:
        shutil.copytree(demo_ws, ws, symlinks=True)
        subprocess.run(["chmod", "-R", "a-w,a+rX", str(ws)], check=True)
        expected = run_hoh("status", "-w", ws, "--json")
        for readable in (True, False):
            if not readable:  # a checkpoint this user cannot read: the full fold, the same answer
                subprocess.run(["chmod", "go-r", str(ws / "state" / "fold.json")], check=True)
            result = subprocess.run(as_user.command(as_user.python, "-m", "hoh", "status", "-w", str(ws), "--json"),
                                    env=as_user.environ(tmpdir), cwd=as_user.home, capture_output=True, text=True,
                                    timeout=120, stdin=subprocess.DEVNULL)
            assert result.returncode == 0, result.stderr
            assert json.loads(result.stdout) == json.loads(expected.stdout)
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(tmpdir)])
        shutil.rmtree(tmpdir, ignore_errors=True)


def test_status_of_a_live_run_folds_the_same(tmp_path):
    script = mini_script(3)
    script["loops"][2]["developer"]["actions"].insert(0, {"sleep": 4})
    p = new_project(tmp_path, script)
    build = start_build(p, "--loops", "3")
    try:
        wait_for(p, started("developer", loop=2))
        paths = WorkspacePaths(p.ws)
        assert binds(p.ws)  # loop 1's checkpoint, with loop 2's events after it
        for _ in range(20):  # the journal may grow between the two reads; compare once it did not
            size = paths.journal.stat().st_size
            got, records = fold.read_fold(paths), list(Journal(paths.journal).records())
            if paths.journal.stat().st_size == size:
                break
        assert got.history == RunHistory.fold(records) and got.notes == NoteBook.fold(records)
        live = api.status(p.ws)
        assert live["state"] == "running" and live["loops"][1]["status"] == "running"
    finally:
        build.communicate(timeout=120)
    assert build.returncode == 0
    assert binds(p.ws) and assert_same_status(p.ws)["loops_finished"] == 3


def test_the_benchmark_prints_its_figures_at_tiny_size(tmp_path):
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "perf" / "status_speed.py"), "--tiny"],
                            capture_output=True, text=True, timeout=600, env={**os.environ, "HOH_BENCH_TMP": str(tmp_path)})
    assert result.returncode in (0, 1), result.stderr  # 1: a target missed on a loaded machine, still figures
    assert "hoh status at" in result.stdout and "ms CPU" in result.stdout and "hoh --help" in result.stdout
    last = json.loads(result.stdout.strip().splitlines()[-1])
    assert isinstance(last["missed"], list)


def test_one_loop_s_checkpoint_write_is_a_crash_point_like_any_state_write(tmp_path):
    """kill -9 right after each state write of a loop (the checkpoint's among them): status is the full fold's."""
    p = new_project(tmp_path, mini_script(2))
    assert p.build(loops=1).status == "finished"
    probe = tmp_path / "probe"
    shutil.copytree(p.ws, probe, symlinks=True)
    driver = [sys.executable, str(REPO / "tests" / "crash_driver.py"), "write"]
    count = subprocess.run([*driver, "0", str(probe)], capture_output=True, text=True)
    assert count.returncode == 3, count.stderr
    points = int(count.stdout)
    for point in sorted({points, points - 1, points - 2, points // 2}):
        crashed = tmp_path / f"crash-{point}"
        shutil.copytree(p.ws, crashed, symlinks=True)
        assert subprocess.run([*driver, str(point), str(crashed)], capture_output=True).returncode == 137
        assert_same_status(crashed)
        same_fold(crashed)
