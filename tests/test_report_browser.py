"""The reports in a real browser: headless Chromium (Debian's `chromium`, driven by Playwright without
downloading a browser) opens each from file:// with the network cut off. No console error, no request
but the file itself, every plot drawn with non-empty marks, the tables sort and filter, and a
screenshot of each is saved under the test's tmp dir (CI keeps it as an artifact).

Skipped when Chromium or Playwright is missing, failed instead under HOH_REQUIRE_BROWSER=1 (.ci/run).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import run_hoh
from harbor_env import bench_runs, harbor  # noqa: F401 - fixtures
from long_run import make_long_workspace

from hoh.report import write_workspace_report

CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-gpu"]


def _missing(reason: str):
    if os.environ.get("HOH_REQUIRE_BROWSER"):
        pytest.fail(f"{reason} (HOH_REQUIRE_BROWSER is set)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        _missing("Chromium is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Opened:
    """One page load, with everything the browser said and fetched."""

    def __init__(self, browser, path: Path):
        self.context = browser.new_context(viewport={"width": 1240, "height": 900}, offline=True)
        self.page = self.context.new_page()
        self.console, self.errors, self.requests = [], [], []
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.as_uri(), wait_until="load")
        self.path = path

    def check_clean(self) -> None:
        assert self.errors == [], self.errors
        assert [m for m in self.console if m.startswith(("error", "warning"))] == []
        assert self.requests == [self.path.as_uri()], self.requests

    def check_plots(self, names: list[str]) -> None:
        """Each plot's SVG has a size on screen and drawn marks (bars, areas, lines) with a size too."""
        for name in names:
            sizes = self.page.evaluate("""(name) => {
                const svg = document.querySelector(`#plot-${name} svg`);
                const box = svg.getBoundingClientRect();
                const marks = [...svg.querySelectorAll(`[id^="${name}-"] path, [id^="${name}-"] use`)]
                    .map(m => m.getBBox()).filter(b => b.width > 0 || b.height > 0);
                return {width: box.width, height: box.height, marks: marks.length};
            }""", name)
            assert sizes["width"] > 400 and sizes["height"] > 150 and sizes["marks"] > 0, (name, sizes)

    def visible_rows(self, table: str) -> list[str]:
        return self.page.evaluate(f"""[...document.querySelectorAll('#{table} tbody tr')]
            .filter(r => !r.hidden).map(r => r.id)""")

    def screenshot(self, out: Path) -> Path:
        self.page.screenshot(path=str(out), full_page=True)
        assert out.stat().st_size > 20_000
        return out

    def close(self) -> None:
        self.context.close()


def test_workspace_report_in_chromium(browser, demo_ws, tmp_path):
    out = tmp_path / "report.html"
    assert run_hoh("report", "-w", demo_ws, "-o", out).returncode == 0
    opened = Opened(browser, out)
    try:
        opened.check_clean()
        opened.check_plots(["verdicts", "issues", "tokens", "cumulative", "time"])
        assert opened.visible_rows("issue-table") == ["I-0001", "I-0002"]
        opened.page.fill('input[data-filter="issue-table"]', "Subtraction")
        assert opened.visible_rows("issue-table") == ["I-0002"]
        opened.page.fill('input[data-filter="issue-table"]', "")
        opened.page.click("#issue-table th:nth-child(7)")  # regressions, ascending
        assert opened.visible_rows("issue-table") == ["I-0002", "I-0001"]
        opened.page.click("#issue-table th:nth-child(7)")
        assert opened.visible_rows("issue-table") == ["I-0001", "I-0002"]
        opened.page.select_option('select[data-filter="issue-table"]', "open")
        assert opened.visible_rows("issue-table") == []
        opened.page.select_option('select[data-filter="issue-table"]', "")
        # loop sections are folded but the last; opening one shows its QA evidence
        assert opened.page.is_visible("#loop-0004 pre") and not opened.page.is_visible("#loop-0001 pre")
        opened.page.click("#loop-0001 > summary")
        assert opened.page.is_visible("#loop-0001 pre")
        opened.screenshot(tmp_path / "workspace-report.png")
        opened.check_clean()
    finally:
        opened.close()


def test_long_workspace_report_in_chromium(browser, tmp_path):
    ws = make_long_workspace(tmp_path / "ws", loops=200)
    out, _ = write_workspace_report(ws, tmp_path / "long.html")
    opened = Opened(browser, out)
    try:
        opened.check_clean()
        opened.check_plots(["verdicts", "issues", "tokens", "cumulative", "time"])
        assert len(opened.visible_rows("issue-table")) > 200
        assert opened.page.evaluate("document.querySelectorAll('details.loop').length") == 200
        opened.screenshot(tmp_path / "long-report.png")
    finally:
        opened.close()


def test_bench_report_in_chromium(browser, bench_runs, tmp_path):
    out = tmp_path / "bench.html"
    result = run_hoh("bench", "report", bench_runs["oracle"], "--html", "--compare", bench_runs["scripted"], "-o", out)
    assert result.returncode == 0, result.stderr
    opened = Opened(browser, out)
    try:
        opened.check_clean()
        opened.check_plots(["curves", "final"])
        # the scripted run's curve rises from loop 1 to loop 2 on screen (drawn higher) and stays at loop 3
        ys = opened.page.evaluate("""[...document.querySelectorAll('#curves-mean-1 use')]
            .map(u => u.getBoundingClientRect().y)""")
        assert len(ys) == 3 and ys[1] < ys[0] and ys[2] == ys[1]
        opened.page.fill('input[data-filter="task-table"]', "rom")
        assert opened.visible_rows("task-table") == ["task-roman"]
        opened.screenshot(tmp_path / "bench-report.png")
    finally:
        opened.close()
