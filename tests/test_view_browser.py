"""`hoh view` in a real browser (issue 25 #1): headless Chromium (the system's, through Playwright) opens the
view the real CLI serves while a scripted build runs, sees the next loop appear without a reload and the
running role's clock tick, follows the running Developer's transcript as its tool calls come in, opens a diff, and opens a transcript of each harness — the four CLIs' recorded
streams and a scripted one — finding its messages and tool calls. Every page loads only the view's own
files and logs no error (a CSP violation is a console error).

Skipped when Chromium or Playwright is missing, failed instead under HOH_REQUIRE_BROWSER=1 (.ci/run).
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import DEMO, REPO, run_hoh, wait_for
from test_report_browser import browser  # noqa: F401 - the fixture

STREAMS = REPO / "tests" / "data" / "harness_streams"
CLIS = ("codex", "opencode", "pi", "claude")


class ViewProcess:
    """`hoh view --no-open` as a subprocess, with the URL it printed."""

    def __init__(self, *workspaces: Path):
        args = [a for ws in workspaces for a in ("-w", str(ws))]
        self.proc = subprocess.Popen([sys.executable, "-m", "hoh", "view", "--no-open", *args], text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        line = self.proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:\d+/", line)
        if not match:
            self.proc.kill()
            raise AssertionError(f"hoh view printed no URL: {line!r} {self.proc.stderr.read()}")
        self.url = match.group(0)

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err


class Tab:
    """One page, with what the browser logged and fetched."""

    def __init__(self, browser, origin: str):
        self.context = browser.new_context(viewport={"width": 1240, "height": 900})
        self.page = self.context.new_page()
        self.origin = origin
        self.console, self.errors, self.requests = [], [], []
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))

    def check_clean(self) -> None:
        assert self.errors == [] and [m for m in self.console if m.startswith(("error", "warning"))] == [], \
            (self.errors, self.console)
        assert all(url.startswith(self.origin) for url in self.requests), self.requests

    def close(self) -> None:
        self.context.close()


def journal_events(ws: Path) -> list[dict]:
    try:
        lines = (ws / "state" / "journal.jsonl").read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            pass  # the last line may be half written
    return out


def loop_started(ws: Path, loop: int) -> bool:
    return any(e["event"] == "loop_started" and e["loop"] == loop for e in journal_events(ws))


def test_a_running_build_shows_each_new_loop_without_a_reload_and_its_diff(browser, tmp_path):  # noqa: F811
    spec = tmp_path / "spec.md"
    shutil.copy(DEMO / "spec.md", spec)
    script = yaml.safe_load((DEMO / "script.yaml").read_text())
    for t, seconds in ((2, 8), (3, 10)):  # slow Developers: the page is open while loops 2 and 3 run
        script["loops"][t]["developer"].setdefault("actions", []).insert(0, {"sleep": seconds})
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script, sort_keys=False))
    ws = tmp_path / "ws"
    build = subprocess.Popen([sys.executable, "-m", "hoh", "build", str(spec), "--harness", "scripted", "--loops", "3",
                              "-w", str(ws), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             stdin=subprocess.DEVNULL)
    view = tab = None
    try:
        wait_for(lambda: loop_started(ws, 2), 90, "loop 2 to start")
        view = ViewProcess(ws)
        tab = Tab(browser, view.url)
        page = tab.page
        page.goto(view.url + "w/0/", wait_until="load")
        assert page.locator("#loop-1").count() == 1 and page.locator("#loop-3").count() == 0
        page.evaluate("window.hohMarker = 'not reloaded'")
        # The running role and its own clock, ticking in the page.
        page.wait_for_function("document.querySelector('#running .clock')?.textContent.match(/^\\d+:\\d\\d$/)",
                               timeout=20_000)
        assert "developer" in page.locator("#running").inner_text()
        page.wait_for_selector("#loop-3", timeout=90_000)
        assert page.evaluate("window.hohMarker") == "not reloaded"
        assert page.locator("#loop-2").count() == 1
        # The running Developer's transcript, followed live: its tool calls come in after its sleep.
        running = page.wait_for_selector('#running a[href*="/loop/3/attempt/developer/"]', timeout=60_000)
        running.click()
        page.wait_for_selector("#transcript")
        assert "running" in page.locator(".facts").inner_text()
        page.wait_for_selector("#transcript .k-tool_call", timeout=60_000)
        page.wait_for_selector("#transcript .k-message", timeout=30_000)
        # A finished loop's diff, from its page.
        page.goto(view.url + "w/0/", wait_until="load")
        page.click("#loop-1 a")
        page.wait_for_selector("#diff-link")
        page.click("#diff-link")
        page.wait_for_selector("pre.diff")
        assert "calc.py" in page.locator("#diff-files").inner_text()
        assert page.locator("pre.diff span.da").count() > 5
        tab.check_clean()
        assert build.wait(timeout=120) == 0, build.stderr.read()
    finally:
        if tab:
            tab.close()
        if build.poll() is None:
            build.send_signal(signal.SIGINT)
            build.wait(timeout=60)
        if view:
            code, err = view.stop()
            assert code == 0 and "Traceback" not in err, err


def as_cli(scripted: Path, to: Path, cli: str) -> Path:
    """A copy of a scripted workspace whose loop-1 attempts are the CLI's recorded stream, and whose records of
    the harness (inputs.json, the journal, hoh.yaml) name that CLI."""
    shutil.copytree(scripted, to, symlinks=True)
    for attempt in (to / "state" / "loops" / "0001" / "roles").glob("*/attempt-*"):
        shutil.copy(STREAMS / cli / "success.jsonl", attempt / "events.jsonl")
        inputs = json.loads((attempt / "inputs.json").read_text())
        (attempt / "inputs.json").write_text(json.dumps({**inputs, "harness": cli}))
    journal = to / "state" / "journal.jsonl"
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    for event in events:
        if "harness" in event:
            event["harness"] = cli
    journal.write_text("".join(json.dumps(e) + "\n" for e in events))
    config = yaml.safe_load((to / "hoh.yaml").read_text())
    config["harness"]["name"] = cli
    (to / "hoh.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return to


def test_a_transcript_of_each_harness_shows_its_messages_and_tool_calls(browser, tmp_path):  # noqa: F811
    scripted = tmp_path / "scripted"
    built = run_hoh("build", DEMO / "spec.md", "--harness", "scripted", "--loops", "1", "-w", scripted, "-q")
    assert built.returncode == 0, built.stderr
    workspaces = {"scripted": scripted} | {cli: as_cli(scripted, tmp_path / cli, cli) for cli in CLIS}
    view = ViewProcess(*workspaces.values())
    tab = Tab(browser, view.url)
    try:
        page = tab.page
        page.goto(view.url, wait_until="load")
        assert page.locator("#workspaces tbody tr").count() == 5
        for index, harness in enumerate(workspaces):
            page.goto(f"{view.url}w/{index}/loop/1", wait_until="load")
            page.click("a.transcript-link:text('developer/attempt-1')")
            page.wait_for_selector("#transcript")
            assert page.locator("#harness").inner_text() == harness
            assert page.locator("#transcript .k-message").count() >= 1, harness
            assert page.locator("#transcript .k-tool_call").count() >= 1, harness
            call = page.locator("#transcript .k-tool_call pre").first.inner_text()
            assert call.strip(), harness  # the call's input is shown
            assert page.locator("#transcript .k-tool_result").count() >= 1 or harness == "scripted", harness
        tab.check_clean()
    finally:
        tab.close()
        code, err = view.stop()
        assert code == 0 and "Traceback" not in err, err
