"""`hoh view` over HTTP (Starlette's TestClient, and the real CLI for its command line): every page of the
demo run, live stamps, paging, the security rules (no way out of the workspace, escaping, headers, the
Host check), a missing or half-written workspace, several workspaces, and a viewing session that leaves
the workspace byte-identical."""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest
from conftest import mini_script, run_hoh
from starlette.testclient import TestClient

from hoh.errors import StateError, UsageError
from hoh.view import model
from hoh.view.app import CSP, create_app
from hoh.view.serve import loopback_host
from hoh.view.sources import find_workspaces

BASE = "http://127.0.0.1"


def client(*roots: Path) -> TestClient:
    return TestClient(create_app(list(roots)), base_url=BASE)


def copy_ws(ws: Path, to: Path) -> Path:
    shutil.copytree(ws, to, symlinks=True)
    return to


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under `root`: its kind, mode, size, mtime and content hash (a symlink: its target)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            st = os.lstat(path)
            if os.path.islink(path):
                out[str(path.relative_to(root))] = ("link", os.readlink(path), st.st_mtime_ns)
            elif path.is_dir():
                out[str(path.relative_to(root))] = ("dir", st.st_mode, st.st_mtime_ns)
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                out[str(path.relative_to(root))] = ("file", st.st_mode, st.st_size, st.st_mtime_ns, digest)
    st = os.lstat(root)
    out["."] = ("dir", st.st_mode, st.st_mtime_ns)
    return out


def crawl(c: TestClient, start: str = "/", limit: int = 400) -> dict[str, object]:
    """Every page and file reachable by links from `start` (this view's own URLs only)."""
    seen: dict[str, object] = {}
    todo = deque([start])
    while todo and len(seen) < limit:
        url = todo.popleft()
        if url in seen:
            continue
        response = c.get(url)
        seen[url] = response
        if "text/html" not in response.headers.get("content-type", ""):
            continue
        for href in re.findall(r'(?:href|src|data-part|data-poll)="([^"]+)"', response.text):
            target = urljoin(url, href.replace("&amp;", "&"))
            parsed = urlparse(target)
            if parsed.netloc in ("", "127.0.0.1") and parsed.path.startswith("/"):
                todo.append(parsed.path + (f"?{parsed.query}" if parsed.query else ""))
    return seen


# ---- the pages -----------------------------------------------------------------------------------------------

def test_every_page_of_the_demo_answers_with_the_run_and_the_security_headers(demo_ws):
    c = client(demo_ws)
    pages = crawl(c)
    assert all(r.status_code == 200 for r in pages.values()), {u: r.status_code for u, r in pages.items()
                                                               if r.status_code != 200}
    for url, r in pages.items():
        assert r.headers["content-security-policy"] == CSP and r.headers["x-content-type-options"] == "nosniff", url
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP
    run = pages["/w/0/"].text
    assert "Calculator" in run or "calc" in run.lower()
    assert all(f'id="loop-{t}"' in run for t in (1, 2, 3, 4))
    # The loop list is the journal's figures only: no plan is read for it.
    loop2 = pages["/w/0/loop/2"].text
    assert "Multiplication, division and clean error messages" in loop2 and "Multiplication, division" not in run
    assert 'id="criteria"' in loop2 and 'id="replay-table"' in loop2 and "C-0002" in loop2
    # Every evidence link of a loop opens as text.
    links = re.findall(r'href="(/w/0/file/state/loops/0002/evidence/[^"]+)"', loop2)
    assert links and all(pages[link].headers["content-type"] == "text/plain; charset=utf-8" for link in links)
    # Each attempt of each role has its transcript page.
    for role in ("planner", "developer", "qa"):
        assert pages[f"/w/0/loop/2/attempt/{role}/attempt-1"].status_code == 200
    diff = pages["/w/0/loop/2/diff"].text
    assert "calc.py" in diff and re.search(r'<span class="da">\+', diff)
    ledger = pages["/w/0/ledger"].text
    assert 'id="I-0001"' in ledger and 'id="V-0001"' in ledger and "reopened" in ledger


def test_the_header_shows_status_tokens_and_roles(demo_ws):
    c = client(demo_ws)
    header = c.get("/w/0/part/header").text
    status = json.loads(run_hoh("status", "-w", demo_ws, "--json").stdout)
    assert f"{status['loops_finished']} of {status['target_loops']} finished" in header
    assert f"{status['tokens']:,}" in header
    assert all(role in header for role in ("planner", "developer", "qa")) and "scripted" in header
    assert "nothing" in header  # the run is over: no role running


def test_the_loop_list_is_paged_newest_first(demo_ws, monkeypatch):
    monkeypatch.setattr(model, "LOOPS_PER_PAGE", 3)
    c = client(demo_ws)
    first, second = c.get("/w/0/").text, c.get("/w/0/?page=2").text
    assert re.findall(r'id="loop-(\d+)"', first) == ["4", "3", "2"]
    assert re.findall(r'id="loop-(\d+)"', second) == ["1"]
    assert 'rel="next"' in first and 'rel="prev"' in second
    assert re.findall(r'id="loop-(\d+)"', c.get("/w/0/part/loops?page=2").text) == ["1"]
    assert "?page=2" in c.get("/w/0/loop/1").text  # the way back lands on the loop's own page


def test_the_poll_stamp_answers_304_until_the_journal_moves(demo_ws, tmp_path):
    ws = copy_ws(demo_ws, tmp_path / "ws")
    c = client(ws)
    first = c.get("/w/0/poll")
    etag = first.headers["etag"]
    assert first.json()["etag"] in etag
    assert c.get("/w/0/poll", headers={"If-None-Match": etag}).status_code == 304
    with open(ws / "state" / "journal.jsonl", "a") as fh:
        fh.write('{"v": 1, "seq": 9999, "ti')  # a torn line, as a crash leaves one
    moved = c.get("/w/0/poll", headers={"If-None-Match": etag})
    assert moved.status_code == 200 and moved.headers["etag"] != etag
    assert c.get("/w/0/").status_code == 200  # the torn line is ignored


# ---- read-only ---------------------------------------------------------------------------------------------

def test_a_viewing_session_leaves_the_workspace_byte_identical(demo_ws, tmp_path):
    ws = copy_ws(demo_ws, tmp_path / "ws")
    before = snapshot(ws)
    time.sleep(0.05)  # a write would show in mtimes
    c = client(ws)
    pages = crawl(c)
    assert len(pages) > 40
    for url in list(pages):
        c.get(url)  # and again, from the cache
    assert snapshot(ws) == before


# ---- security ----------------------------------------------------------------------------------------------

@pytest.fixture
def hostile(demo_ws, tmp_path):
    """The demo with an agent's mischief: symlinks pointing out, a secret beside the workspace, markup in a
    plan, a QA summary and a transcript."""
    ws = copy_ws(demo_ws, tmp_path / "ws")
    (tmp_path / "secret.txt").write_text("TOP-SECRET\n")
    evidence = ws / "state" / "loops" / "0001" / "evidence"
    (evidence / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (evidence / "up").symlink_to(tmp_path)
    (ws / "state" / "loops" / "0002" / "roles" / "qa" / "escape").symlink_to("/etc")
    os.link(tmp_path / "secret.txt", evidence / "hard.txt")  # one file, a second name inside
    (tmp_path / "secret-2.txt").write_text("TOP-SECRET\n")
    os.link(tmp_path / "secret-2.txt", evidence / "hard-2.txt")  # and a third where the Planner's view has its own
    (ws / "scratch" / "loops-view" / "0001" / "evidence").mkdir(parents=True, exist_ok=True)
    os.link(tmp_path / "secret-2.txt", ws / "scratch" / "loops-view" / "0001" / "evidence" / "hard-2.txt")
    plan = ws / "state" / "loops" / "0001" / "plan.json"
    data = json.loads(plan.read_text())
    data["goal"] = "<script>alert('plan')</script>"
    data["tasks"][0]["title"] = "<img src=x onerror=alert(1)>"
    plan.write_text(json.dumps(data))
    events = ws / "state" / "loops" / "0001" / "roles" / "developer" / "attempt-1" / "events.jsonl"
    with open(events, "a") as fh:
        fh.write(json.dumps({"type": "message", "text": "</pre><script>alert('message')</script>"}) + "\n")
    return ws


@pytest.mark.parametrize("rel", [
    "state/loops/0001/evidence/leak.txt",                # a symlink to a file outside
    "state/loops/0001/evidence/up/secret.txt",           # through a symlinked folder
    "state/loops/0002/roles/qa/escape/passwd",           # a symlink to /etc
    "state/loops/0001/evidence/hard.txt",                # a hard link to a file outside
    "state/loops/0001/evidence/hard-2.txt",              # the same, with a name in the loops' view too
    "state/loops/0001/evidence/%2e%2e/%2e%2e/%2e%2e/%2e%2e/secret.txt",
    "state/..%2f..%2fsecret.txt",
    "%2e%2e/secret.txt",
    "%2Ftmp%2Fsecret.txt",
    "project/calc.py",                                   # the agent's own tree is not served
    "hoh.yaml",
    "state/loops/0001",                                  # a folder
])
def test_a_path_out_of_the_workspace_or_through_a_symlink_is_refused(hostile, rel):
    r = client(hostile).get(f"/w/0/file/{rel}")
    assert r.status_code == 404 and r.text.startswith("refused:"), (rel, r.text)
    assert "TOP-SECRET" not in r.text and "root:" not in r.text
    assert r.headers["content-type"] == "text/plain; charset=utf-8"


def test_a_symlinked_evidence_file_is_neither_listed_nor_inlined(hostile):
    page = client(hostile).get("/w/0/loop/1").text
    assert "TOP-SECRET" not in page and "leak.txt" not in page


def test_markup_an_agent_wrote_is_shown_as_text(hostile):
    c = client(hostile)
    loop = c.get("/w/0/loop/1").text
    assert "<script>alert" not in loop and "<img src=x" not in loop
    assert "&lt;script&gt;alert(&#39;plan&#39;)&lt;/script&gt;" in loop
    transcript = c.get("/w/0/loop/1/attempt/developer/attempt-1").text
    assert "<script>alert" not in transcript and "&lt;/pre&gt;&lt;script&gt;" in transcript
    # The only script any page loads is the view's own file.
    assert re.findall(r"<script[^>]*>", loop) == ['<script src="/static/view.js" defer>']
    served = c.get("/w/0/file/state/loops/0001/plan.json")
    assert served.headers["content-type"] == "text/plain; charset=utf-8" and "<script>" in served.text


def test_only_loopback_hosts_are_answered(demo_ws):
    app = create_app([demo_ws])
    assert TestClient(app, base_url="http://evil.example").get("/").status_code == 400
    assert TestClient(app, base_url="http://localhost").get("/").status_code == 200
    assert TestClient(app, base_url=BASE).post("/w/0/", content=b"x").status_code == 405  # GET is all it answers
    assert loopback_host("localhost") == "127.0.0.1" and loopback_host("127.0.0.1") == "127.0.0.1"
    for host in ("0.0.0.0", "192.168.1.2", "::1", "example.com"):
        with pytest.raises(UsageError, match="loopback only"):
            loopback_host(host)


# ---- missing, half-written and several workspaces -------------------------------------------------------------

def test_a_missing_or_half_written_workspace_is_a_page_saying_why(demo_ws, tmp_path):
    gone = copy_ws(demo_ws, tmp_path / "gone")
    half = copy_ws(demo_ws, tmp_path / "half")
    torn = copy_ws(demo_ws, tmp_path / "torn")
    c = client(gone, half, torn)
    assert c.get("/w/0/").status_code == 200
    shutil.rmtree(gone)  # removed while the view runs
    (half / "state" / "loops" / "0002" / "qa.json").write_text('{"schema_version": 1, "loop": 2, "cand')
    (torn / "spec.md").unlink()
    (half / "state" / "loops" / "0003" / "replay.json").write_text('{"results": [{"status": "failed"}]}')
    for ws in range(3):
        for url in (f"/w/{ws}/", f"/w/{ws}/part/header", f"/w/{ws}/loop/2", f"/w/{ws}/ledger", "/"):
            r = c.get(url)
            assert r.status_code == 200 and "Traceback" not in r.text, (url, r.text)
    assert 'id="trouble"' in c.get("/w/0/").text
    assert "qa.json" in c.get("/w/1/loop/2").text  # the corrupt file is named
    assert 'id="trouble"' in c.get("/w/1/loop/3").text  # a record not shaped as hoh writes it
    assert c.get("/w/1/loop/1").status_code == 200  # the other loops still open
    assert "spec" in c.get("/w/2/").text


def test_a_workspace_being_created_is_a_page_saying_why(tmp_path):
    ws = tmp_path / "ws"
    (ws / "state").mkdir(parents=True)
    (ws / "state" / "workspace.json").write_text('{"schema_version": 2, "spec_sh')
    r = client(ws).get("/w/0/")
    assert r.status_code == 200 and 'id="trouble"' in r.text and "workspace.json" in r.text


def test_a_folder_of_workspaces_is_one_view_with_an_index(demo_ws, tmp_path):
    out = tmp_path / "bench-out"
    copy_ws(demo_ws, out / "trial-a" / "ws")
    copy_ws(demo_ws, out / "trial-b" / "ws")
    (out / "trial-c").mkdir()  # a trial that made no workspace
    roots = find_workspaces([out, demo_ws, out / "trial-a" / "ws"])
    assert roots == [out / "trial-a" / "ws", out / "trial-b" / "ws", demo_ws]
    c = client(*roots)
    index = c.get("/").text
    assert all(f'id="ws-{i}"' in index for i in range(3)) and "trial-b" in index
    assert c.get("/w/2/").status_code == 200 and c.get("/w/3/").status_code == 404
    with pytest.raises(UsageError, match="no workspace at"):
        find_workspaces([out / "trial-c"])


# ---- the command line --------------------------------------------------------------------------------------

def start_view(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "hoh", "view", "--no-open", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    line = proc.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:\d+/", line)
    assert match, (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, match.group(0)


def test_the_help_names_the_command_and_its_options():
    assert "view" in run_hoh("--help").stdout
    result = run_hoh("view", "--help")
    assert result.returncode == 0 and all(o in result.stdout for o in ("--workspace", "--port", "--host", "--no-open"))


def test_the_cli_serves_until_ctrl_c_and_exits_cleanly(demo_ws):
    import httpx
    proc, url = start_view("-w", str(demo_ws))
    try:
        r = httpx.get(url, timeout=10)
        assert r.status_code == 200 and "ws-0" in r.text
        port = int(url.rsplit(":", 1)[1].strip("/"))
        busy = run_hoh("view", "-w", demo_ws, "--no-open", "--port", port)
        assert busy.returncode != 0 and len(busy.stderr.strip().splitlines()) == 1 and f"{port}" in busy.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "Traceback" not in err, err


@pytest.mark.parametrize("args, message", [
    (["-w", "{missing}"], "no workspace at"),
    (["-w", "{demo}", "--host", "0.0.0.0"], "loopback only"),
])
def test_bad_input_is_one_line_and_a_non_zero_exit(demo_ws, tmp_path, args, message):
    args = [a.format(missing=tmp_path / "nothing", demo=demo_ws) for a in args]
    result = run_hoh("view", "--no-open", *args)
    assert result.returncode != 0 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


# ---- cost ------------------------------------------------------------------------------------------------

def test_a_500_loop_run_is_listed_a_page_at_a_time_and_each_loop_on_demand(tmp_path):
    from long_run import make_long_workspace
    ws = make_long_workspace(tmp_path / "ws", loops=500)
    c = client(ws)
    started = time.monotonic()
    first = c.get("/w/0/")
    assert first.status_code == 200 and time.monotonic() - started < 10
    assert re.findall(r'id="loop-(\d+)"', first.text) == [str(t) for t in range(500, 500 - model.LOOPS_PER_PAGE, -1)]
    assert len(first.content) < 100_000 and "20 of 20" not in first.text and "page 1 of 20" in first.text
    last = c.get("/w/0/?page=20").text
    assert re.findall(r'id="loop-(\d+)"', last)[-1] == "1"
    # An idle page's poll reads nothing: answered from the stamp alone, well under a millisecond's work each.
    etag = c.get("/w/0/poll").headers["etag"]
    started = time.monotonic()
    assert all(c.get("/w/0/poll", headers={"If-None-Match": etag}).status_code == 304 for _ in range(50))
    assert time.monotonic() - started < 5
    assert c.get("/w/0/loop/250").status_code == 200 and c.get("/w/0/loop/250/diff").status_code == 200

    # the ledger a page of issues and a page of behaviours at a time, newest first; a loop links into its page
    ledger = json.loads((ws / "state" / "ledger.json").read_text())
    issues, behaviours = [i["id"] for i in ledger["issues"]], [b["id"] for b in ledger["behaviours"]]
    assert len(issues) > 2 * model.ITEMS_PER_PAGE and len(behaviours) > 2 * model.ITEMS_PER_PAGE
    page = c.get("/w/0/ledger")
    assert page.status_code == 200 and len(page.content) < 1_000_000
    shown = re.findall(r'<tr id="([IV]-\d+)"', page.text)
    assert shown == issues[::-1][:model.ITEMS_PER_PAGE] + behaviours[::-1][:model.ITEMS_PER_PAGE]
    older = c.get("/w/0/ledger?issues=2&behaviours=3").text
    assert re.findall(r'<tr id="(I-\d+)"', older)[0] == issues[::-1][model.ITEMS_PER_PAGE]
    assert re.findall(r'<tr id="(V-\d+)"', older)[0] == behaviours[::-1][2 * model.ITEMS_PER_PAGE]
    linked = set(re.findall(r'href="(/w/0/ledger[^"]*#[^"]+)"', c.get("/w/0/loop/100").text))
    assert len(linked) > 3
    for href in linked:
        path, _, anchor = html.unescape(href).partition("#")
        assert f'<tr id="{anchor}"' in c.get(path).text, href

    # the journal moved: the view folds only what was appended (the fold it keeps is never read again whole)
    import hoh.store.status as status_module
    journal = ws / "state" / "journal.jsonl"
    with journal.open("a") as fh:
        fh.write(json.dumps({"v": 1, "seq": 6741, "time": time.time(), "event": "run_started", "target_loops": 501,
                             "resumed": True, "harness": "scripted"}) + "\n")
        fh.write(json.dumps({"v": 1, "seq": 6742, "time": time.time(), "event": "loop_started", "loop": 501,
                             "base_commit": "0" * 40}) + "\n")
    real_fold = status_module.read_fold
    status_module.read_fold = lambda *a, **k: pytest.fail("the view read the whole journal again")
    try:
        moved = c.get("/w/0/").text
    finally:
        status_module.read_fold = real_fold
    assert re.findall(r'id="loop-(\d+)"', moved)[:2] == ["501", "500"] and "page 1 of 21" in moved
    assert "501" in c.get("/w/0/loop/501").text and "?page=21" in c.get("/w/0/loop/1").text

    # a sealed loop is read once: a moved journal stamp does not read it again
    calls = []
    real = model.loop_model
    model.loop_model = lambda *a, **k: calls.append(a[1].loop) or real(*a, **k)
    try:
        journal = ws / "state" / "journal.jsonl"
        st = journal.stat()
        os.utime(journal, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        assert c.get("/w/0/loop/250").status_code == 200 and c.get("/w/0/loop/251").status_code == 200
    finally:
        model.loop_model = real
    assert calls == [251]


def test_the_followed_journal_reads_each_line_once_and_equals_a_full_read(demo_ws, tmp_path):
    from hoh.paths import WorkspacePaths
    from hoh.report.data import journal_facts
    from hoh.store.fold import read_fold
    from hoh.store.journal import Journal
    from hoh.view.follow import Follower

    ws = copy_ws(demo_ws, tmp_path / "ws")
    journal = ws / "state" / "journal.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join(lines[:10]) + lines[10][:7])  # a line being written: not taken yet
    follower = Follower(journal).update()
    assert follower.lines == 10 and follower.offset == len(b"".join(lines[:10]))
    for k in range(10, len(lines)):
        journal.write_bytes(b"".join(lines[:k + 1]))
        follower.update()
        if lines[k].startswith(b'{') and b'"attempt_started"' in lines[k]:
            assert follower.running is not None and follower.running.attempt >= 1
        with follower.folded() as fold:  # the fold kept line by line is the fold of the journal read whole
            whole = read_fold(WorkspacePaths(ws), steps=True)
            assert (fold.history, fold.notes) == (whole.history, whole.notes), f"after line {k + 1}"
    assert follower.lines == len(lines)
    assert follower.facts.result() == journal_facts(Journal(journal))
    assert follower.running is None  # the run finished
    journal.write_bytes(b"".join(lines[:5]))  # shorter (a repaired tail, a restore): read again from the start
    assert follower.update().lines == 5
    with open(journal, "r+b") as fh:  # rewritten in place, as long as before: read again from the start too
        fh.write(re.sub(rb'"time": \d', b'"time": 9', b"".join(lines[:5]), count=5))
    os.utime(journal, ns=(time.time_ns(), time.time_ns() + 10**9))
    with follower.update().folded() as fold:
        assert fold.history == read_fold(WorkspacePaths(ws)).history and follower.lines == 5
    journal.write_bytes(b"".join(lines[:5]) + b'{"torn\n' + lines[5])
    with pytest.raises(StateError, match="line 6 is corrupt"):
        follower.update()


# ---- attempts ----------------------------------------------------------------------------------------------

def test_an_interrupted_attempt_is_listed_and_its_transcript_opens(demo_ws, tmp_path):
    ws = copy_ws(demo_ws, tmp_path / "ws")
    roles = ws / "state" / "loops" / "0002" / "roles"
    aside = roles / "developer.interrupted-1" / "attempt-1"
    shutil.copytree(roles / "developer" / "attempt-1", aside)
    (aside / "result.json").unlink()  # cut off before hoh judged it
    with open(aside / "events.jsonl", "a") as fh:
        fh.write('{"type": "tool", "name": "run", "comm')  # and mid-line
    c = client(ws)
    loop = c.get("/w/0/loop/2").text
    row = re.search(r'<tr data-ref="developer.interrupted-1/attempt-1">.*?</tr>', loop, re.S)
    assert row and "interrupted" in row.group(0)
    page = c.get("/w/0/loop/2/attempt/developer.interrupted-1/attempt-1")
    assert page.status_code == 200 and 'id="transcript"' in page.text and "k-tool_call" in page.text
    # Its raw stream was never scrubbed of secrets (hoh does that when an attempt ends): only the page shows it.
    assert "events.jsonl" not in page.text and "prompt.md" in page.text
    raw = c.get("/w/0/file/state/loops/0002/roles/developer.interrupted-1/attempt-1/events.jsonl")
    assert raw.status_code == 404 and "not yet scrubbed" in raw.text
    assert c.get("/w/0/file/state/loops/0002/roles/developer/attempt-1/events.jsonl").status_code == 200
    assert c.get("/w/0/loop/2/attempt/developer/attempt-9").status_code == 404
    assert c.get("/w/0/loop/2/attempt/..%2f..%2f0001/roles/qa/attempt-1").status_code == 404


def test_the_poll_of_a_running_attempt_moves_with_its_stream(demo_ws, tmp_path):
    ws = copy_ws(demo_ws, tmp_path / "ws")
    c = client(ws)
    url = "/w/0/poll?attempt=3/developer/attempt-1"
    etag = c.get(url).headers["etag"]
    assert etag != c.get("/w/0/poll").headers["etag"]  # the stream's stamp is part of it
    with open(ws / "state" / "loops" / "0003" / "roles" / "developer" / "attempt-1" / "events.jsonl", "a") as fh:
        fh.write('{"type": "message", "text": "still going"}\n')
    assert c.get(url, headers={"If-None-Match": etag}).status_code == 200


def test_a_human_note_is_shown_pending_then_in_the_loop_that_took_it(make_project):
    """`hoh note` reaches the view: pending in the run's header (an agent-looking `<script>` in it is text),
    and after a loop planned with it, on that loop's page as part of its Planner's inputs."""
    proj = make_project(mini_script(2))
    ws = proj.ws
    assert run_hoh("build", proj.spec, "-H", "scripted", "-w", ws, "-q", "--loops", "1").returncode == 0
    assert run_hoh("note", "-w", ws, "fix I-0002 first <script>alert(1)</script>").returncode == 0
    page = client(ws).get("/w/0/").text
    assert 'id="notes"' in page and "pending: for the next loop that plans" in page
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    resumed = run_hoh("resume", "-w", ws, "--loops", "1", "-q")
    assert resumed.returncode == 0, resumed.stderr
    c = client(ws)
    assert 'taken by loop <a href="/w/0/loop/2">' in c.get("/w/0/").text
    loop_page = c.get("/w/0/loop/2").text
    assert 'id="loop-notes"' in loop_page and "fix I-0002 first" in loop_page
    assert 'id="loop-notes"' not in c.get("/w/0/loop/1").text
