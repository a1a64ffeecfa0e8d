"""The reports in a real browser: headless Chromium (Debian's `chromium`, driven by Playwright without
downloading a browser) opens each from file:// with the network cut off. No console error, no request
but the file itself, every plot drawn with non-empty marks, the tables sort and filter, and a
screenshot of each is saved under the test's tmp dir (CI keeps it as an artifact).

Skipped when Chromium or Playwright is missing, failed instead under HOH_REQUIRE_BROWSER=1 (.ci/run).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from conftest import mini_script, run_hoh
from harbor_env import bench_runs, bench_trust, harbor  # noqa: F401 - fixtures
from long_run import make_long_workspace

from hoh.report import write_workspace_report
from hoh.report.pages import ITEMS_PER_PAGE, ITEMS_SHOWN, LOOPS_SHOWN
from hoh.report.rolefiles import AS_THEY_ARE

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
        # the loops are rows, newest first, each linking to its own page beside the report
        assert opened.visible_rows("loop-table") == ["row-0004", "row-0003", "row-0002", "row-0001"]
        opened.screenshot(tmp_path / "workspace-report.png")
        opened.check_clean()
    finally:
        opened.close()
    loop = Opened(browser, tmp_path / "report-pages" / "loop-0001.html")
    try:
        loop.check_clean()  # a loop's page fetches nothing either
        assert loop.page.is_visible("#loop-0001 pre")  # its QA evidence, inline
        assert loop.page.get_attribute("a[rel=next]", "href") == "loop-0002.html"
    finally:
        loop.close()


RAN = "document.title = 'ran'"
"""What QA's pages try: a script that leaves its mark where the test can read it."""
ACTIVE = {"page.html": f"<html><body><script>{RAN}</script><p>a page</p></body></html>\n",
          "picture.svg": f'<svg xmlns="http://www.w3.org/2000/svg"><script>{RAN}</script></svg>\n',
          "doc.xhtml": f'<html xmlns="http://www.w3.org/1999/xhtml"><head><title>a page</title></head>'
                       f'<body><script>{RAN}</script></body></html>\n',
          "shot.png": f"<html><body><script>{RAN}</script></body></html>\n"}
"""QA's evidence files that a browser would open as documents by their names, and an image that is a page."""


def test_a_role_s_page_is_linked_as_text_and_runs_nothing(browser, make_project, tmp_path):
    """QA leaves pages with scripts (HTML, SVG, XHTML) as evidence and cites them; the report, opened from
    file://, links each through its own text copy: followed, the link shows the page's source and runs nothing.
    Opened as they are, the same files run their script (what the report must never link to)."""
    script = mini_script(1)
    qa = script["loops"][1]["qa"]
    qa["actions"] = [{"write": {"path": "${evidence_dir}/" + name, "content": body}} for name, body in ACTIVE.items()]
    qa["reply"] = {"findings": [{"title": "pages with scripts", "severity": "major", "repro": "true",
                                 "evidence": [{"kind": "file", "ref": name, "detail": "QA's"} for name in ACTIVE]}]}
    project = make_project(script)
    project.build(loops=1)
    out, _ = write_workspace_report(project.ws, tmp_path / "report.html")
    evidence = project.state("loops", "0001", "evidence")
    for name in ("page.html", "picture.svg", "doc.xhtml"):  # the files themselves are active, so the test can fail
        raw = Opened(browser, evidence / name)
        try:
            assert raw.page.title() == "ran", name
        finally:
            raw.close()
    for page_name, selector in (("report-pages/loop-0001.html", "#loop-0001 .finding a"),
                                ("report-pages/issues-1.html", "#I-0001 a"), ("report.html", "#I-0001 a")):
        opened = Opened(browser, tmp_path / page_name)
        try:
            opened.check_clean()
            links = opened.page.evaluate(f"""[...document.querySelectorAll({selector!r})]
                .map(a => [a.textContent, a.getAttribute('href'), a.href])""")
            linked = {text: (href, url) for text, href, url in links if text in ACTIVE}
            assert set(linked) == set(ACTIVE), links
            page = opened.page
            for name, (href, url) in linked.items():
                shown_as_itself = Path(name).suffix in AS_THEY_ARE
                assert href.endswith(name if shown_as_itself else ".txt") and ("/evidence/" in href) == shown_as_itself
                page.goto(url, wait_until="load")  # where the link takes the user (some are in folded history)
                assert page.url == url and page.title() != "ran", (name, href)
                if not shown_as_itself:  # the page's source, as text
                    assert page.evaluate("document.contentType") == "text/plain", (name, href)
                    assert RAN in page.evaluate("document.body.innerText"), (name, href)
        finally:
            opened.close()


def test_long_workspace_report_in_chromium(browser, tmp_path):
    ws = make_long_workspace(tmp_path / "ws", loops=200)
    out, _ = write_workspace_report(ws, tmp_path / "long.html")
    opened = Opened(browser, out)
    try:
        opened.check_clean()
        opened.check_plots(["verdicts", "issues", "tokens", "cumulative", "time"])
        assert len(opened.visible_rows("issue-table")) == ITEMS_SHOWN
        assert len(opened.visible_rows("loop-table")) == LOOPS_SHOWN
        opened.screenshot(tmp_path / "long-report.png")
    finally:
        opened.close()
    ledger = Opened(browser, tmp_path / "long-pages" / "issues-1.html")
    try:
        ledger.check_clean()
        assert len(ledger.visible_rows("issue-table")) == ITEMS_PER_PAGE
        ledger.page.fill('input[data-filter="issue-table"]', "I-0002")
        assert "I-0002" in ledger.visible_rows("issue-table") and len(ledger.visible_rows("issue-table")) < ITEMS_PER_PAGE
    finally:
        ledger.close()


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


def test_bench_report_shows_every_state_distinctly_in_chromium(browser, bench_trust, tmp_path):
    """The runs of tests/data/bench_trust (every loop state, a task not gradable here, two reward keys), the
    one-loop run compared with the stopped one: each state read back from the page as the browser shows it."""
    out = tmp_path / "trust.html"
    result = run_hoh("bench", "report", bench_trust["stop"], "--html", "--compare", bench_trust["one"], "-o", out)
    assert result.returncode == 0, result.stderr
    opened = Opened(browser, out)
    page = opened.page
    try:
        opened.check_clean()
        opened.check_plots(["curves", "keys", "final"])
        cells = page.evaluate("""Object.fromEntries([...document.querySelectorAll('#task-table td.cell')].map(c => {
            const badge = c.querySelector('em');
            return [c.id, {state: c.dataset.state, outcome: c.dataset.outcome || null, title: c.title,
                           text: c.innerText.replace(/\\s+/g, ' ').trim(), cell: getComputedStyle(c).backgroundColor,
                           badge: badge ? getComputedStyle(badge).backgroundColor : null}];
        }))""")
        loops = len([c for c in cells if c.startswith("cell-1-dies-")])
        assert loops >= 2 and len([c for c in cells if c.startswith("cell-2-twokeys-")]) == 1

        # dies: loop 1 graded, every later loop not run, with the trial's exception as its cause
        assert cells["cell-1-dies-1"]["state"] == "graded" and cells["cell-1-dies-1"]["text"] == "1.000"
        for k in range(2, loops + 1):
            dead = cells[f"cell-1-dies-{k}"]
            assert dead["state"] == "not_run" and dead["text"] == "not run", dead
            assert "the trial ended in NonZeroAgentExitCodeError" in dead["title"], dead
        # no-model: not run in the stopped run (hoh finished no loop), failed with the role's reason in the other
        assert all(cells[f"cell-1-no-model-{k}"]["state"] == "not_run" for k in range(1, loops + 1))
        failed = cells["cell-2-no-model-1"]
        assert failed["state"] == "failed" and failed["text"] == "failed"
        assert 'Unknown provider "endpoint"' in failed["title"]
        # offline-verifier: its own badge in every loop
        for k in range(1, loops + 1):
            assert cells[f"cell-1-offline-verifier-{k}"]["outcome"] == "not_gradable"
            assert cells[f"cell-1-offline-verifier-{k}"]["text"] == "not gradable"
        # twokeys: both keys with their values in each loop's cell, the headline the mean of the two
        assert cells["cell-1-twokeys-1"]["text"] == "0.750 correctness 1.000 performance 0.500"
        assert cells[f"cell-1-twokeys-{loops}"]["text"] == "1.000 correctness 1.000 performance 1.000"
        assert cells["cell-2-twokeys-1"]["text"] == "0.750 correctness 1.000 performance 0.500"
        carried = [c for c in cells.values() if c["state"] == "carried"]  # main's fixture adds `early`
        assert all(re.fullmatch(r"[\d.]+ carried from (@\d|A₀)", c["text"]) for c in carried), carried
        # no two states look alike: each badge (and each cell without a score) has a colour of its own
        shown = {"not_run": cells["cell-1-dies-2"], "failed": failed,
                 "not_gradable": cells["cell-1-offline-verifier-1"],
                 **({"carried": carried[0]} if carried else {})}
        assert len({c["badge"] for c in shown.values()}) == len(shown), shown
        assert len({c["cell"] for c in (cells["cell-1-dies-1"], cells["cell-1-dies-2"], failed)}) == 3

        # the task rows and the Errors section: the cause line first, the full text one click away
        why = page.inner_text("#task-dies td.why")
        assert "loop 2 not run: the trial ended in NonZeroAgentExitCodeError" in why
        assert "Name or service not known" in page.inner_text("#task-offline-verifier td.why")
        dies = "#error-1-dies"
        assert page.inner_text(f"{dies} .cause").startswith(
            "loop 2 not run: the trial ended in NonZeroAgentExitCodeError")
        assert not page.is_visible(f"{dies} pre.full")
        page.click(f"{dies} details > summary")
        assert page.is_visible(f"{dies} pre.full") and "crashing on purpose" in page.inner_text(f"{dies} pre.full")
        offline = page.inner_text("#error-1-offline-verifier")
        assert "not gradable" in offline and "left out of every mean" in offline
        assert any("Name or service not known" in line for line in page.eval_on_selector_all(
            "#error-1-offline-verifier ul.telling li", "els => els.map(e => e.innerText)"))
        assert 'Unknown provider "endpoint"' in page.inner_text("#error-2-no-model .cause")
        assert "None: every trial completed" not in page.inner_text("#error-table")
        stopped = page.inner_text("#left-out li:first-child")
        assert re.search(r"left out of every mean:\s*error\s+2,\s*not gradable\s+1\b", stopped), stopped

        # every reward key has its own HoH@k row per run, and its curve in the plot of the keys
        key_rows = page.eval_on_selector_all("#score-table tr.key-row",
                                             "rs => rs.map(r => r.dataset.run + ':' + r.dataset.key)")
        assert {"0:correctness", "0:performance", "1:correctness", "1:performance"} <= set(key_rows)
        assert page.inner_text("#score-table tr[data-run='0'][data-metric='headline'] code") == \
            "reward, else the mean of correctness, performance"  # early reports `reward`, twokeys two keys
        assert page.evaluate("document.querySelectorAll('#plot-keys [id^=\"keys-\"]').length") >= 4

        # the comparison says what does not match, and has no HoH@k for the loops the one-loop run did not run
        notes = page.eval_on_selector_all("#compare-2 .compare-note", "els => els.map(e => e.innerText)")
        assert any(n.startswith("the runs cover different tasks") for n in notes), notes
        assert f"A ran {loops} loops and B 1: HoH@k beyond 1 has no value for the shorter run" in notes
        compare = dict(page.eval_on_selector_all("#compare-2 tbody tr", "rs => rs.map(r => [r.dataset.metric, "
                                                 "[...r.cells].slice(1).map(c => c.innerText)])"))
        assert compare["HoH@1"] == ["0.750", "0.750", "+0.000"]  # twokeys alone: the only task both scored
        assert compare["HoH@2"][1:] == ["–", "–"]
        assert compare["correctness @1"][:2] == ["1.000", "1.000"]
        assert compare["performance @1"][:2] == ["0.500", "0.500"]
        opened.screenshot(tmp_path / "bench-trust-report.png")
        opened.check_clean()
    finally:
        opened.close()
