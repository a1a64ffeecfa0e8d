"""Developers working at once, as people watch them (issue 27): live progress and `hoh view` show the packages'
Developers side by side, each attempt's transcript is found, and the next Planner reads which package did what."""

from __future__ import annotations

import html
import io
import json

from conftest import mini_loop
from rich.console import Console
from starlette.testclient import TestClient
from test_parallel import LEAVE_MARKERS, two_packages

from hoh.cli.options import ProgressMode
from hoh.cli.progress import LiveProgress
from hoh.transcript import attempts_of, read_transcript
from hoh.usage import Usage
from hoh.view.app import create_app


def test_live_progress_shows_the_running_developers_side_by_side(tmp_path):
    console = Console(file=io.StringIO(), force_terminal=False, width=240)
    progress = LiveProgress(console, ProgressMode.LIVE)
    progress("loop", loop=1, target=1)
    for package in ("P1", "P2"):
        progress("role", role="developer", loop=1, package=package)
        progress("attempt", role="developer", loop=1, attempt=1, events=tmp_path / f"{package}.jsonl",
                 package=package)
    line = progress.status_line().plain
    assert line.startswith("loop 1/1 · developer P1 ") and " | developer P2 " in line
    progress("attempt_done", role="developer", loop=1, attempt=1, ok=True, outcome="ok", seconds=1.0,
             usage=Usage(10, 0, 5), package="P1")
    assert "P1" not in progress.status_line().plain and "developer P2" in progress.status_line().plain
    assert "loop 1/1 · developer P1 · attempt 1 · ok" in console.file.getvalue()


def test_lines_and_json_progress_name_the_package(make_project):
    p = make_project({"schema_version": 1, "loops": {1: two_packages(shared=False, sleep=0.2)}})
    from conftest import run_hoh
    lines = run_hoh("build", p.spec, "-w", p.ws, "--developers", "2", "--loops", "1", "--progress", "lines")
    assert lines.returncode == 0, lines.stderr
    for package in ("P1", "P2"):
        assert f"loop 1/1 · developer {package} · attempt 1 · started" in lines.stderr
        assert f"loop 1/1 · developer {package} · attempt 1 · ok" in lines.stderr
    q = make_project({"schema_version": 1, "loops": {1: two_packages(shared=False, sleep=0.2)}}, name="q")
    as_json = run_hoh("build", q.spec, "-w", q.ws, "--developers", "2", "--loops", "1", "--progress", "json")
    starts = [json.loads(line) for line in as_json.stderr.splitlines() if '"role_start"' in line]
    assert sorted(s.get("package") or s["role"] for s in starts) == ["P1", "P2", "planner", "qa"]


def test_the_view_and_the_transcripts_show_each_package_s_developer(make_project):
    p = make_project({"schema_version": 1, "loops": {1: two_packages(shared=True, merge=LEAVE_MARKERS)}})
    assert p.build(sets={"policy.developers": 2}).status == "finished"
    loop_dir = p.ws / "state" / "loops" / "0001"
    refs = attempts_of(loop_dir)
    assert [(r.role, r.package) for r in refs] == [("planner", None), ("developer", "P1"), ("developer", "P2"),
                                                   ("developer", "merge-P2"), ("qa", None)]
    transcript = read_transcript(refs[1].path)
    assert transcript.role == "developer" and any("a.py" in e.text for e in transcript.entries)
    page = TestClient(create_app([p.ws]), base_url="http://127.0.0.1").get("/w/0/loop/1")
    assert page.status_code == 200
    text = html.unescape(page.text)
    for ref in ("developer-P1/attempt-1", "developer-P2/attempt-1", "developer-merge-P2/attempt-1"):
        assert ref in text
        assert TestClient(create_app([p.ws]), base_url="http://127.0.0.1").get(
            f"/w/0/loop/1/attempt/{ref}").status_code == 200


def test_the_next_planner_reads_which_package_did_what(make_project):
    p = make_project({"schema_version": 1, "loops": {1: two_packages(shared=True, merge=LEAVE_MARKERS),
                                                     2: mini_loop(2)}})
    assert p.build(loops=2, sets={"policy.developers": 2}).status == "finished"
    index = (p.ws / "state/loops/0002/roles/planner/attempt-1/prompt.md").read_text()
    assert "P1: merged (clean)" in index and "P2: dropped" in index and "conflict markers left" in index


def test_the_ledger_says_which_package_fixed_what(make_project):
    first = mini_loop(1)
    first["qa"]["probes"] = [{"id": "X1", "run": "test -f a.py", "finding": {"title": "no part 1", "severity": "major"}}]
    second = two_packages(shared=False)
    second["planner"]["reply"]["tasks"][0]["issues"] = ["I-0001"]
    p = make_project({"schema_version": 1, "loops": {1: first, 2: second}})
    assert p.build(loops=2, sets={"policy.developers": 2}).status == "finished"
    ledger = json.loads(p.state("ledger.json").read_text())
    issue = next(i for i in ledger["issues"] if i["id"] == "I-0001")
    assert issue["status"] == "closed"
    assert issue["history"][-1]["notes"] == "developer claims task T1 done (package P1); verified by QA (package P1)"


def test_the_loop_report_names_each_package_and_what_became_of_it(make_project):
    p = make_project({"schema_version": 1, "loops": {1: two_packages(shared=True, merge=LEAVE_MARKERS)}})
    assert p.build(sets={"policy.developers": 2}).status == "finished"
    out = p.root / "report.html"
    from conftest import run_hoh
    made = run_hoh("report", "-w", p.ws, "-o", out)
    assert made.returncode == 0, made.stderr
    pages = "".join(f.read_text() for f in p.root.rglob("*.html"))
    text = html.unescape(pages)
    assert "<b>P1</b> tasks T1 — merged (clean) — criteria 1/1 verified" in text
    assert "<b>P2</b> tasks T2 — dropped: conflicts in shared.txt; conflict markers left in shared.txt" in text
    assert "roles/developer-P1/attempt-1/" in text and "roles/developer-merge-P2/attempt-1/" in text
