"""`hoh replay`: the register's checks on a past candidate and the bisection of one check, on a real demo
build (C-0002 fails at loop 2, C-0005 at loop 3, both fixed the loop after), read-only on the workspace."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from conftest import DEMO, run_hoh

from hoh.evidence.checks import RunStatus
from hoh.records import Candidate
from hoh.runtime.replay import ReplayResult
from hoh.runtime.replaying import PastReplay
from hoh.store.lock import WorkspaceLock


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    ws = tmp_path_factory.mktemp("replay") / "ws"
    result = run_hoh("build", DEMO / "spec.md", "--loops", "4", "-w", ws, "-q")
    assert result.returncode == 0, result.stderr
    return ws


def _one_line_error(result, *needles: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hoh: ") and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_help():
    result = run_hoh("replay", "--help")
    assert result.returncode == 0 and "--bisect" in result.stdout and "Exit 0" in result.stdout
    assert "replay" in run_hoh("--help").stdout


def test_the_last_loop_passes_every_check(ws):
    result = run_hoh("replay", "-w", ws)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert [line.split()[:3] for line in lines[:-1]] == [[f"C-000{n}", f"V-000{n}", "passed"] for n in range(1, 7)]
    assert lines[-1].startswith("loop 4 (loop-0004-") and "6 passed" in lines[-1]


def test_loop_2_shows_its_regression_as_json(ws):
    result = run_hoh("replay", "-w", ws, "--loop", "2", "--json")
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["loop"] == 2 and data["candidate_id"].startswith("loop-0002-") and data["passed"] is False
    by_id = {r["id"]: r for r in data["results"]}
    assert set(by_id) == {f"C-000{n}" for n in range(1, 7)}
    assert by_id["C-0002"]["status"] == "failed" and by_id["C-0002"]["behaviour_id"] == "V-0002"
    assert "expected '-3'" in by_id["C-0002"]["reason"]
    assert by_id["C-0001"]["status"] == "passed" and by_id["C-0001"]["reason"] is None
    assert all(r["seconds"] >= 0 for r in data["results"])


def test_bisect_names_the_loop_that_broke_a_check(ws):
    result = run_hoh("replay", "-w", ws, "--bisect", "C-0002")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("C-0002 first fails at loop 2 (loop-0002-") and "passes at loop 1" in result.stdout
    found = json.loads(run_hoh("replay", "-w", ws, "--bisect", "C-0005", "--json").stdout)
    assert (found["first_failing_loop"], found["passes_at_loop"], found["first"], found["last"]) == (3, 2, 2, 4)
    assert run_hoh("replay", "-w", ws, "--bisect", "C-0001").stdout.strip() == \
        "C-0001 passes on every loop from 1 to 4"


def test_bad_input_is_one_line_and_exit_2(ws, tmp_path):
    _one_line_error(run_hoh("replay", "-w", ws, "--bisect", "C-9999"), "C-9999", "C-0001")
    _one_line_error(run_hoh("replay", "-w", ws, "--loop", "99"), "loop 99 has no candidate", "1-4")
    _one_line_error(run_hoh("replay", "-w", ws, "--loop", "2", "--bisect", "C-0002"), "--bisect")
    _one_line_error(run_hoh("replay", "-w", tmp_path / "none"), "not a hoh workspace")


def _snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under the workspace: its kind, and a file's bytes and mtime, a dir's listing."""
    out = {}
    for path in sorted(root.rglob("*")):
        stat = path.lstat()
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = ("link", str(path.readlink()))
        elif path.is_dir():
            out[rel] = ("dir", stat.st_mtime_ns)
        else:
            out[rel] = ("file", hashlib.sha256(path.read_bytes()).hexdigest(), stat.st_mtime_ns)
    return out


def test_the_workspace_is_untouched_while_a_run_holds_it(ws):
    with WorkspaceLock(ws / "hoh.lock"):  # a live run: replay takes no lock, so it goes on
        before = _snapshot(ws)
        assert "state/checks.json" in before and "history.git/HEAD" in before
        assert any(rel.startswith("history.git/refs/tags/") or rel == "history.git/packed-refs" for rel in before)
        assert run_hoh("replay", "-w", ws).returncode == 0
        assert run_hoh("replay", "-w", ws, "--loop", "3", "--json").returncode == 1
        assert run_hoh("replay", "-w", ws, "--bisect", "C-0002").returncode == 0
        assert _snapshot(ws) == before


# ---- the search itself, on made-up loops --------------------------------------------------------------------
class FakeLoops(PastReplay):
    """Loops 1..last with candidates (but `missing`); the check fails on the loops in `failing`."""

    def __init__(self, last: int, failing: set[int], missing: set[int] = frozenset(), added: int = 1):
        self.last, self.failing, self.missing, self.added, self.ran = last, failing, missing, added, []

    def check(self, check_id):
        return {"id": check_id, "spec": {}, "added": {"loop": self.added}}

    def last_finished(self):
        return self.last

    def candidate(self, t):
        return None if t in self.missing else Candidate.frozen(t, "c" * 40, f"{t:040d}", "p" * 40, f"loop-{t:04d}")

    def run(self, check, candidate):
        self.ran.append(candidate.loop)
        status = RunStatus.failed if candidate.loop in self.failing else RunStatus.passed
        return ReplayResult(check["id"], None, status, 0.0, False, "broken" if status is RunStatus.failed else None)


def test_a_lasting_regression_is_found_by_binary_search():
    loops = FakeLoops(40, set(range(23, 41)), missing={22})
    found = loops.bisect("C-0001")
    assert (found.failing.loop, found.passing, found.reason) == (23, 21, "broken")
    assert len(loops.ran) <= 8 and 21 in loops.ran  # log2(39) runs, and the boundary's passing side was run


def test_a_fixed_regression_and_a_check_broken_from_its_own_loop():
    fixed = FakeLoops(10, {4, 5}, added=2)
    found = fixed.bisect("C-0001")
    assert (found.failing.loop, found.passing, found.first, found.last) == (4, 3, 2, 10)
    always = FakeLoops(6, set(range(1, 7)), added=3)
    found = always.bisect("C-0001")
    assert (found.failing.loop, found.passing) == (3, None) and 3 in always.ran
    clean = FakeLoops(5, set())
    assert clean.bisect("C-0001").failing is None and sorted(clean.ran) == [1, 2, 3, 4, 5]
