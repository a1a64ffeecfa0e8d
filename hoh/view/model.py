"""What `hoh view`'s pages show, read from one workspace through the readers hoh already has.

The header is `hoh status`'s figures (`store.status.workspace_status`, of the journal's fold kept by
following it: `follow.py`) plus the attempt running now and when it started; the loop list is that fold's
loop entries, made a page at a time; a loop's detail is the report's `LoopModel` (`report.data.loop_model`:
plan, Developer report, candidate, QA, evidence, replay, admissions), read only when that loop is opened
and kept once the loop is sealed; the ledger is `Ledger.load`, shown a page of issues and a page of
behaviours at a time. Every read is cached on the workspace's change stamp (`sources.Source`; the ledger
on its own file's), so a page that polls an idle run reads nothing. Nothing here writes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..errors import HohError
from ..evidence.ledger import Ledger
from ..records import LoopSummary
from ..report.data import INLINE_LOOP_BYTES, DiffStat, LoopModel, diff_stats, evidence_files, loop_model, spec_title
from ..statuses import LoopStatus, RunStatus
from ..store.status import loop_entries, workspace_status
from ..store.workspace import Workspace, open_workspace
from .follow import Running
from .sources import Source

LOOPS_PER_PAGE = 25
"""Loops listed per page, newest first: a 500-loop run is 20 pages, each as cheap as the first."""
ITEMS_PER_PAGE = 100
"""Issues (and behaviours) per page of the ledger, newest first."""
HISTORY_SHOWN = 20
"""An item's newest history entries on the ledger page (a behaviour checked every loop has hundreds)."""


@dataclass
class Header:
    """The run header: `hoh status`'s figures, the title, and what is running right now."""

    title: str
    status: dict[str, Any]
    """`workspace_status`: state, target_loops, loops_finished, usage, tokens, cost_usd, budget, eta, roles…"""
    running: Running | None

    @property
    def live(self) -> bool:
        return self.status["state"] == RunStatus.RUNNING

    @property
    def current_loop(self) -> int | None:
        if self.running:
            return self.running.loop
        return self.status["loops"][-1]["loop"] if self.status["loops"] else None


@dataclass
class LoopPage:
    rows: list[LoopSummary]
    """Newest first."""
    page: int
    pages: int
    total: int


@dataclass
class LoopDetail:
    loop: LoopModel
    diffstat_note: str | None


def workspace(source: Source) -> Workspace:
    """The opened workspace (identity, config); raises HohError when it is missing or corrupt."""
    return source.cached("workspace", lambda: open_workspace(source.root), source.setup_etag())


def status(source: Source) -> dict[str, Any]:
    """`hoh status`'s figures from the followed journal's fold, with the newest loop's entry alone in `loops` (a
    page of the loop list asks for its own: the header's cost stays the same however long the run)."""
    def read() -> dict[str, Any]:
        ws = workspace(source)
        with source.follower().folded() as fold:
            return workspace_status(ws, shown=1, fold=fold)
    return source.cached("status", read)


def header(source: Source) -> Header:
    def read() -> Header:
        ws = workspace(source)
        st = status(source)
        title = spec_title(ws.paths.spec.read_text(encoding="utf-8", errors="replace"))
        running = source.follower().running if st["state"] == RunStatus.RUNNING else None
        return Header(title, st, running)
    return source.cached("header", read)


def loop_page(source: Source, page: int) -> LoopPage:
    """One page of the loop list, newest first: only its loops' entries are made."""
    def read() -> LoopPage:
        state = RunStatus(status(source)["state"])
        with source.follower().folded() as fold:
            loops = fold.history.loop_list()
            pages = max(1, -(-len(loops) // LOOPS_PER_PAGE))
            shown = min(max(page, 1), pages)
            end = len(loops) - (shown - 1) * LOOPS_PER_PAGE
            entries = loop_entries(loops[max(0, end - LOOPS_PER_PAGE):end], state, time.time())
        return LoopPage([LoopSummary.from_json(e) for e in reversed(entries)], shown, pages, len(loops))
    return source.cached(f"loops-{page}", read)


def loop_entry(source: Source, t: int) -> dict[str, Any] | None:
    """Loop `t`'s entry, as `hoh status --json` gives it; None when the journal has no such loop."""
    state = RunStatus(status(source)["state"])
    with source.follower().folded() as fold:
        stats = fold.history.loops.get(t)
        return loop_entries([stats], state, time.time())[0] if stats is not None else None


def page_of(source: Source, loop: int) -> int:
    """The loop-list page that shows `loop` (for the way back from a loop's page)."""
    with source.follower().folded() as fold:
        later = sum(1 for t in fold.history.loops if t > loop)
    return later // LOOPS_PER_PAGE + 1


def facts(source: Source) -> dict[str, Any]:
    """The report's journal facts (each attempt's outcome, role failures, sessions, the stop reason), from the
    followed journal: each line read once."""
    return source.follower().facts.result()


def loop_detail(source: Source, t: int) -> LoopDetail | None:
    """Loop `t` in full, or None when the journal has no such loop. A finished loop is sealed: what was read
    of it is kept while its fold entry stays the same."""
    entry = loop_entry(source, t)
    if entry is None:
        return None

    def read() -> LoopDetail:
        ws = workspace(source)
        model = loop_model(ws.paths, LoopSummary.from_json(entry), facts(source))
        model.evidence, _ = evidence_files(ws.paths, ws.paths.loop(t).evidence, INLINE_LOOP_BYTES)
        note = None
        if model.candidate:
            try:
                model.diffstat = diff_stats(ws, [model.candidate.commit]).get(model.candidate.commit)
            except HohError as err:  # a damaged history.git costs the stats, not the page
                note = f"diff stats unavailable: {err}"
        return LoopDetail(model, note)
    if entry["status"] != LoopStatus.RUNNING:
        return source.kept("loop", t, entry, read)
    return source.cached(f"loop-{t}", read)


def ledger(source: Source) -> Ledger:
    return source.cached("ledger", lambda: Ledger.load(workspace(source).paths.ledger), source.ledger_etag())


def behaviours(source: Source) -> dict[str, dict[str, Any]]:
    """Behaviour id → its register entry (a loop's page names the behaviours its QA checked)."""
    return source.cached("behaviours", lambda: {b["id"]: b for b in ledger(source).behaviours}, source.ledger_etag())


@dataclass
class LedgerPage:
    """A page of the ledger's issues and one of its behaviours, newest first, and where every item is."""

    issues: list[dict[str, Any]]
    behaviours: list[dict[str, Any]]
    issue_page: int
    issue_pages: int
    behaviour_page: int
    behaviour_pages: int
    total_issues: int
    total_behaviours: int


def _pages(count: int) -> int:
    return max(1, -(-count // ITEMS_PER_PAGE))


def _slice(items: list[dict[str, Any]], page: int) -> tuple[list[dict[str, Any]], int]:
    page = min(max(page, 1), _pages(len(items)))
    end = len(items) - (page - 1) * ITEMS_PER_PAGE
    return items[max(0, end - ITEMS_PER_PAGE):end][::-1], page


def ledger_page(source: Source, issue_page: int, behaviour_page: int) -> LedgerPage:
    book = ledger(source)
    issues, ip = _slice(book.issues, issue_page)
    behaviours, bp = _slice(book.behaviours, behaviour_page)
    return LedgerPage(issues, behaviours, ip, _pages(len(book.issues)), bp, _pages(len(book.behaviours)),
                      len(book.issues), len(book.behaviours))


def ledger_href(source: Source):
    """id → the ledger page's URL that shows that issue or behaviour (newest first, so an item moves back a page
    every ITEMS_PER_PAGE new ones)."""
    def read() -> dict[str, str]:
        book, out = ledger(source), {}
        for kind, items in (("issues", book.issues), ("behaviours", book.behaviours)):
            for k, item in enumerate(items):
                out[item["id"]] = f"{kind}={(len(items) - 1 - k) // ITEMS_PER_PAGE + 1}"
        return out
    where = source.cached("ledger-where", read, source.ledger_etag())
    base = f"/w/{source.index}/ledger"
    return lambda ident: f"{base}?{where[ident]}#{ident}" if ident in where else f"{base}#{ident}"


def diffstat_line(stat: DiffStat | None) -> str:
    if stat is None:
        return "–"
    return f"{stat.changed} file{'s' if stat.changed != 1 else ''}, +{stat.added} −{stat.deleted}"
