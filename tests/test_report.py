"""`hoh report`: the HTML report of a workspace, checked from the HTML against the state it came from.

The demo (built and resumed through the real CLI), a 200-loop generated workspace (size budget),
a live run mid-loop, and every bad input: one line, exit 2, nothing written.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import DEMO, REPO, mini_script, run_hoh
from long_run import failed_loop, make_long_workspace
from report_html import Page
from test_cli import _fails_cleanly

from hoh.report import data as report_data
from hoh.report import pages as pages_mod
from hoh.report import write_workspace_report
from hoh.resources import schema_errors

MAIN_BYTES = 800_000
"""The main page of a 200-loop report (the plots are most of it)."""
PAGE_BYTES = 300_000


@pytest.fixture(scope="module")
def long_ws(tmp_path_factory) -> Path:
    return make_long_workspace(tmp_path_factory.mktemp("long") / "ws", loops=200)


def _status(ws: Path) -> dict:
    result = run_hoh("status", "-w", ws, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _loop_json(ws: Path, t: int, name: str) -> dict:
    return json.loads((ws / "state" / "loops" / f"{t:04d}" / f"{name}.json").read_text())


def _numstat(ws: Path, parent: str, commit: str) -> tuple[int, int, int]:
    out = subprocess.run(["git", "diff", "--numstat", parent, commit], cwd=ws / "project", capture_output=True,
                         text=True, check=True).stdout.splitlines()
    rows = [line.split("\t") for line in out]
    return len(rows), sum(int(r[0]) for r in rows), sum(int(r[1]) for r in rows)


def _issue_counts_from_ledger(ledger: dict, t: int) -> dict[str, int]:
    """Each issue's status after loop t, rebuilt from its history: independent of the journal."""
    counts = {"open": 0, "fixed_pending_verify": 0, "closed": 0, "reopened": 0}
    for issue in ledger["issues"]:
        past = [h for h in issue["history"] if h["loop"] <= t]
        if past:
            counts[past[-1]["status"]] += 1
    return counts


def test_demo_report_shows_every_loop_issue_and_plot(demo_ws):
    result = run_hoh("report", "-w", demo_ws)
    assert result.returncode == 0, result.stderr
    out = demo_ws / "report.html"
    assert result.stdout.strip() == f"report: {out} (4/4 loops, finished)"
    page = Page(out)
    page.assert_self_contained()
    status = _status(demo_ws)
    ledger = json.loads((demo_ws / "state" / "ledger.json").read_text())

    # header: spec title, harness per role, state, tokens
    assert "<h1>calc — command-line integer arithmetic</h1>" in page.text
    assert page.text.count("<td>scripted</td>") == 3
    assert f"{status['usage']['input_tokens'] + status['usage']['output_tokens']:,}" in page.text

    # one section per loop with its plan, Developer report, QA criteria, candidate and diff stat
    sections = page.loop_sections()
    assert sorted(sections) == [1, 2, 3, 4]
    for t, section in sections.items():
        text = html.unescape(section)
        plan, dev, cand, qa = (_loop_json(demo_ws, t, n) for n in ("plan", "developer", "candidate", "qa"))
        assert plan["goal"] in text
        assert all(f"<b>{task['id']}</b>" in section for task in plan["tasks"])
        assert dev["summary"] in text
        assert cand["candidate_id"] in section and qa["verdict"] in section
        for criterion in qa["criteria"] + qa["preserved"]:
            assert f"{criterion['id']}" in section
            for e in criterion["evidence"]:
                if e["kind"] == "file":  # the evidence file's text is inline, and linked
                    evidence = demo_ws / "state" / "loops" / f"{t:04d}" / "evidence" / e["ref"]
                    assert evidence.read_text() in text
                    assert f'href="../state/loops/{t:04d}/evidence/{e["ref"]}"' in section
        changed, added, deleted = _numstat(demo_ws, cand["parent"], cand["commit"])
        assert f"{changed} file{'s' if changed != 1 else ''}, +{added} −{deleted}" in section
    page.assert_links_resolve()

    # the ledger and the behaviour register, each item with its row and history
    for issue in ledger["issues"]:
        assert page.ids[issue["id"]] == "tr"
    for behaviour in ledger["behaviours"]:
        assert page.ids[behaviour["id"]] == "tr"
    i1 = page.text[page.text.index('<tr id="I-0001"'):page.text.index('<tr id="I-0002"')]
    # its status now, then its history
    assert re.findall(r'<em class="s-(\w+)">', i1) == ["closed", "open", "closed", "reopened", "closed"]

    # the plot data equals the state, and the SVG has a bar per loop and series
    data = page.plot_data()
    loops = status["loops"]
    assert data["verdicts"] == {"loop": [1, 2, 3, 4], "status": [lp["status"] for lp in loops],
                                "criteria_verified": [lp["criteria_verified"] for lp in loops],
                                "criteria_total": [lp["criteria_total"] for lp in loops]}
    for s in ("open", "closed", "reopened", "fixed_pending_verify"):
        assert data["issues"][s] == [lp["issues"][s] for lp in loops]
        assert data["issues"][s] == [_issue_counts_from_ledger(ledger, t)[s] for t in range(1, 5)]
    for role in ("planner", "developer", "qa"):
        assert data["tokens"][role] == [lp["usage"][role]["input_tokens"] + lp["usage"][role]["output_tokens"]
                                        for lp in loops]
    assert data["tokens"]["cost_usd"] == [None] * 4  # the scripted harness reports no cost: shown as such
    assert data["cumulative"]["tokens"][-1] == status["usage"]["input_tokens"] + status["usage"]["output_tokens"]
    journal = [json.loads(line) for line in (demo_ws / "state" / "journal.jsonl").read_text().splitlines()]
    qa_seconds = [sum(e["seconds"] for e in journal if e["event"] == "attempt_finished" and e["loop"] == t
                      and e["role"] == "qa") for t in range(1, 5)]
    assert data["time"]["qa"] == pytest.approx(qa_seconds)
    for plot, series in (("verdicts", "verified"), ("issues", "closed"), ("tokens", "qa"), ("time", "developer")):
        svg = page.svg(plot)
        assert all(f'id="{plot}-{series}-{t}"' in svg for t in range(1, 5)), plot


def test_report_elsewhere_links_back_into_the_workspace(demo_ws, tmp_path):
    out = tmp_path / "reports" / "demo.html"
    out.parent.mkdir()
    result = run_hoh("report", "-w", demo_ws, "-o", out)
    assert result.returncode == 0, result.stderr
    page = Page(out)
    evidence = [f for f in page.local_files() if "evidence" in f.parts]
    assert evidence and all(f.is_file() and demo_ws in f.parents for f in evidence)
    assert oct(out.stat().st_mode & 0o777) != oct(0o600)  # a report is for sharing


def test_long_run_report_stays_within_budget(long_ws, tmp_path, monkeypatch):
    ledger = json.loads((long_ws / "state" / "ledger.json").read_text())
    assert schema_errors("ledger", ledger) == []
    for t in range(1, 201):  # the generated history is in the Runtime's own format
        names = ("plan",) if failed_loop(t) else ("plan", "developer", "candidate", "qa")
        for name in names:
            assert schema_errors(name, _loop_json(long_ws, t, name)) == [], (t, name)

    start = time.monotonic()
    out, run = write_workspace_report(long_ws, tmp_path / "long.html")
    elapsed = time.monotonic() - start
    size = out.stat().st_size
    pages = Page(out).pages()
    print(f"200-loop report: main page {size:,} bytes, {len(pages)} pages beside it, in {elapsed:.1f}s")
    assert size <= MAIN_BYTES and all(p.path.stat().st_size <= PAGE_BYTES for p in pages.values())
    page = Page(out)
    page.assert_self_contained()
    assert all(p.assert_self_contained() is None for p in pages.values())
    page.assert_links_resolve()
    assert sorted(page.loop_sections()) == list(range(1, 201))
    ids = page.all_ids()
    assert len(ledger["issues"]) > 200 and all(ids[i["id"]] == {"tr"} for i in ledger["issues"])
    assert all(ids[b["id"]] == {"tr"} for b in ledger["behaviours"])
    assert "2 (resumed 1×)" in page.text
    # the main page: the issues not closed (then the latest closed), the newest loops, links to the rest
    shown = [m for m in re.findall(r'<tr id="(I-\d+)"', page.text)]
    active = [i["id"] for i in ledger["issues"] if i["status"] != "closed"]
    assert len(shown) == min(len(ledger["issues"]), pages_mod.ITEMS_SHOWN) and set(active[-len(shown):]) <= set(shown)
    rows = re.findall(r'<tr id="row-(\d+)"', page.text)
    assert [int(r) for r in rows] == list(range(200, 200 - pages_mod.LOOPS_SHOWN, -1))
    assert {f"loops-{k}.html" for k in range(1, 5)} <= set(pages) and "issues-3.html" in pages

    data = page.plot_data()
    assert data["verdicts"]["loop"] == list(range(1, 201))
    for t in (1, 67, 100, 134, 200):
        assert {s: data["issues"][s][t - 1] for s in ("open", "fixed_pending_verify", "closed", "reopened")} \
            == _issue_counts_from_ledger(ledger, t)
    costs = [c for c in data["tokens"]["cost_usd"]]
    assert all(c is not None and c > 0 for c in costs)
    assert data["cumulative"]["cost_usd"][-1] == pytest.approx(sum(costs), rel=1e-6)
    for plot, series in (("issues", "closed"), ("tokens", "developer"), ("time", "qa")):
        assert f'id="{plot}-{series}"' in page.svg(plot)  # past 60 loops: one stacked area per series

    sections = page.loop_sections()
    assert "developer failed after 3 attempts" in sections[67] and "s-developer_failed" in sections[67]
    assert "(cut; the whole file is linked above)" in sections[200]
    assert all(lp.evidence == {} and lp.qa is None for lp in report_data.read_run(long_ws).loops)  # no state file read

    # made again: a sealed loop's page is not rewritten (nor read); a missing one is made again
    stamps = {name: p.path.stat().st_mtime_ns for name, p in pages.items()}
    (out.parent / "long-pages" / "loop-0150.html").unlink()
    write_workspace_report(long_ws, out)
    again = {name: p.path.stat().st_mtime_ns for name, p in Page(out).pages().items()}
    assert sorted(name for name in again if again[name] != stamps.get(name)) == ["loop-0150.html"]
    assert Page(out).loop_sections()[150] == sections[150].replace(_stamp(sections[150]), _stamp(Page(out).loop_sections()[150]))


def _stamp(page: str) -> str:
    return re.search(r'<meta name="generator" content="([^"]+)">', page)[1]


def _started(ws: Path, loop: int, role: str) -> bool:
    journal = ws / "state" / "journal.jsonl"
    if not journal.exists():
        return False
    for line in journal.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:  # a line being written
            continue
        if event["event"] == "attempt_started" and event["loop"] == loop and event["role"] == role:
            return True
    return False


def test_a_live_run_is_reported_as_far_as_it_got(make_project, tmp_path):
    script = mini_script(2)
    script["loops"][2]["developer"]["actions"].insert(0, {"sleep": 60})
    proj = make_project(script)
    build = subprocess.Popen([sys.executable, "-m", "hoh", "build", str(proj.spec), "-H", "scripted", "-w", str(proj.ws), "-q",
                              "--loops", "2"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not _started(proj.ws, loop=2, role="developer"):
            assert time.monotonic() < deadline, "the build never reached loop 2's Developer"
            time.sleep(0.2)
        result = run_hoh("report", "-w", proj.ws)
        assert result.returncode == 0, result.stderr
        assert "the run is live" in result.stdout and "(1/2 loops, running)" in result.stdout
        page = Page(proj.ws / "report.html")
        assert page.ids["live"] == "div"
        sections = page.loop_sections()
        assert sorted(sections) == [1, 2]
        assert "s-pass" in sections[1] and "hello bob" in sections[1]
        assert "(in progress)" in sections[2] and "QA has not reported yet" in sections[2]
        assert page.plot_data()["verdicts"]["loop"] == [1]  # only finished loops are plotted
    finally:
        for _ in range(2):  # the first SIGTERM waits for the attempt; the second stops hoh at once
            os.killpg(build.pid, signal.SIGTERM)
            time.sleep(0.5)
        build.communicate(timeout=60)
    after = run_hoh("report", "-w", proj.ws)
    assert after.returncode == 0 and "(1/2 loops, interrupted)" in after.stdout
    page = Page(proj.ws / "report.html")
    assert "live" not in page.ids and "in progress, interrupted" in page.loop_sections()[2]


def test_a_workspace_with_no_loop_yet(tmp_path):
    from hoh.config import HohConfig
    from hoh.store.workspace import create_workspace

    ws = create_workspace(tmp_path / "ws", DEMO / "spec.md", HohConfig(harness={"name": "scripted"})).paths.root
    result = run_hoh("report", "-w", ws)
    assert result.returncode == 0 and "(0/3 loops, not started)" in result.stdout
    page = Page(ws / "report.html")
    assert page.plot_data() == {} and page.loop_sections() == {}
    assert "No loop has finished yet: nothing to plot." in page.text and "No loop has started yet." in page.text


def test_bad_input_writes_nothing(demo_ws, tmp_path):
    _fails_cleanly(run_hoh("report", "-w", tmp_path), "not a hoh workspace")
    assert list(tmp_path.iterdir()) == []
    _fails_cleanly(run_hoh("report", "-w", demo_ws, "-o", tmp_path / "missing" / "r.html"), "does not exist")
    _fails_cleanly(run_hoh("report", "-w", demo_ws, "-o", tmp_path), "is a directory")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("damage", ["qa", "candidate", "ledger", "journal", "config"])
def test_corrupt_state_is_one_line_and_nothing_is_written(demo_ws, tmp_path, damage):
    ws = tmp_path / "ws"
    shutil.copytree(demo_ws, ws, symlinks=True)
    (ws / "report.html").unlink(missing_ok=True)
    shutil.rmtree(ws / "report-pages", ignore_errors=True)  # a sealed loop's page, once made, is not read again
    loop2 = ws / "state" / "loops" / "0002"
    target, text, needle = {
        "qa": (loop2 / "qa.json", "{not json", "qa.json"),
        "candidate": (loop2 / "candidate.json", json.dumps({"schema_version": 1}), "candidate.json"),
        "ledger": (ws / "state" / "ledger.json", "[]", "ledger.json"),
        "journal": (ws / "state" / "journal.jsonl", '{"v": 1, "event": "loop_finished"}\n{"torn', "journal.jsonl"),
        "config": (ws / "hoh.yaml", "loops: [", "hoh.yaml"),
    }[damage]
    if damage == "journal":
        target.write_text(target.read_text() + text + "\n")
    else:
        target.write_text(text)
    _fails_cleanly(run_hoh("report", "-w", ws), needle)
    assert not (ws / "report.html").exists() and not (ws / "report-pages").exists()
    assert not [p for p in ws.iterdir() if p.name.startswith(".report.html")]


def test_hoh_help_imports_no_plotting():
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "hoh", "--help"], capture_output=True,
                            text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0
    imported = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
    assert not imported & {"matplotlib", "playwright", "numpy"}
    assert "hoh.report" not in result.stderr


def test_the_report_never_writes_state(demo_ws):
    before = {p: p.stat().st_mtime_ns for p in (demo_ws / "state").rglob("*") if p.is_file()}
    assert run_hoh("report", "-w", demo_ws, "-o", demo_ws / "again.html").returncode == 0
    after = {p: p.stat().st_mtime_ns for p in (demo_ws / "state").rglob("*") if p.is_file()}
    assert before == after


def test_the_header_has_the_runs_time_without_its_stop_and_one_loop_reads_as_one_loop(make_project, tmp_path):
    """Start, end and total run time in the header, the total the sessions' time only (from the journal's
    own lines here, not hoh's fold); a one-loop run's plots are one bar among space, and its cumulative
    line, one point, is drawn as a marker."""
    proj = make_project(mini_script(1))
    assert run_hoh("build", proj.spec, "-H", "scripted", "-w", proj.ws, "-q", "--loops", "1").returncode == 0
    journal = proj.ws / "state" / "journal.jsonl"
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    # A second session a day later: the day it waited is not run time.
    day = 86400.0
    stopped = [*lines, {"v": 1, "seq": len(lines) + 1, "time": lines[-1]["time"] + day, "event": "run_started",
                        "target_loops": 1, "resumed": True, "harness": "scripted", "sandbox": lines[1]["sandbox"]},
               {**lines[-1], "seq": len(lines) + 2, "time": lines[-1]["time"] + day + 2.0}]
    journal.write_text("".join(json.dumps(line) + "\n" for line in stopped))
    run = report_data.read_run(proj.ws)
    first, last = lines[1]["time"], lines[-1]["time"]
    assert run.started == first and run.ended == last + day + 2.0
    assert run.active_seconds == pytest.approx(last - first + 2.0, abs=0.01)
    assert run_hoh("report", "-w", proj.ws).returncode == 0
    page = Page(proj.ws / "report.html")
    header = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", page.text.split('id="run-time"')[1]
                                                                     .split("</div>")[0])))
    assert "from " in header and "UTC to " in header and "elapsed, stopped in between" in header

    from matplotlib.figure import Figure

    from hoh.report.plots import _loop_axis, workspace_plots
    ax = Figure().add_subplot()
    _loop_axis(ax, [1])
    low, high = ax.get_xlim()
    assert high - low >= 5 and list(ax.get_xticks()) == [1]
    cumulative = next(p for p in workspace_plots(run) if p.name == "cumulative")
    line = cumulative.svg.split('id="cumulative-tokens"')[1].split('<g id="cumulative-patch')[0]
    assert "<use" in line, "a one-point line is invisible without its marker"


def test_markup_an_agent_wrote_is_text_on_every_page(demo_ws, tmp_path):
    """A plan's goal and task title and QA's summary with markup in them: escaped on the main page (the goal heads
    the loop's row there) and on the loop's own page, and no page runs any script but the report's own."""
    ws = tmp_path / "ws"
    shutil.copytree(demo_ws, ws, symlinks=True)
    shutil.rmtree(ws / "report-pages", ignore_errors=True)
    loop1 = ws / "state" / "loops" / "0001"
    plan = json.loads((loop1 / "plan.json").read_text())
    plan["goal"] = "<script>alert('plan')</script>"
    plan["tasks"][0]["title"] = "<img src=x onerror=alert(1)>"
    (loop1 / "plan.json").write_text(json.dumps(plan))
    qa = json.loads((loop1 / "qa.json").read_text())
    qa["summary"] = "</pre><script>alert('qa')</script>"
    (loop1 / "qa.json").write_text(json.dumps(qa))
    out, _ = write_workspace_report(ws, tmp_path / "report.html")
    page = Page(out)
    loop = page.loop_sections()[1]
    for text in (page.text, loop):
        assert "<script>alert" not in text and "<img src=x" not in text
        tags = re.findall(r"<script[^>]*>", text)
        assert tags.count("<script>") == 1  # the tables' own few lines
        assert all(t == "<script>" or t.startswith('<script type="application/json" class="plot-data"') for t in tags)
    assert "&lt;script&gt;alert(&#39;plan&#39;)&lt;/script&gt;" in page.text  # the loop's row on the main page
    assert "&lt;script&gt;alert(&#39;plan&#39;)&lt;/script&gt;" in loop and "&lt;img src=x" in loop
    assert "&lt;/pre&gt;&lt;script&gt;alert(&#39;qa&#39;)&lt;/script&gt;" in loop
