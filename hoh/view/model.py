"""What `hoh view`'s pages show, read from one workspace through the readers hoh already has.

The header is `hoh status`'s fold (`store.status.workspace_status`) plus the attempt running now and
when it started; the loop list is that fold's loop entries, a page at a time; a loop's detail is the
report's `LoopModel` (`report.data.loop_model`: plan, Developer report, candidate, QA, evidence,
replay, admissions), read only when that loop is opened; the ledger is `Ledger.load`. Every read is
cached on the workspace's change stamp (`sources.Source`), so a page that polls an idle run reads
nothing. Nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import HohError
from ..evidence.ledger import Ledger
from ..records import LoopSummary
from ..report.data import (INLINE_LOOP_BYTES, DiffStat, LoopModel, diff_stats, evidence_files, journal_facts,
                           loop_model, spec_title)
from ..statuses import RunStatus
from ..store.events import AttemptFinished, AttemptStarted, RunFinished
from ..store.journal import Journal
from ..store.status import workspace_status
from ..store.workspace import Workspace, open_workspace
from .sources import Source

LOOPS_PER_PAGE = 25
"""Loops listed per page, newest first: a 500-loop run is 20 pages, each as cheap as the first."""


@dataclass(frozen=True)
class Running:
    """The role attempt running now, with the epoch second it started (the page runs its clock)."""

    role: str
    loop: int
    attempt: int
    since: float


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
    return source.cached("workspace", lambda: open_workspace(source.root))


def status(source: Source) -> dict[str, Any]:
    return source.cached("status", lambda: workspace_status(workspace(source)))


def header(source: Source) -> Header:
    def read() -> Header:
        ws = workspace(source)
        st = status(source)
        title = spec_title(ws.paths.spec.read_text(encoding="utf-8", errors="replace"))
        running = _running(Journal(ws.paths.journal)) if st["state"] == RunStatus.RUNNING else None
        return Header(title, st, running)
    return source.cached("header", read)


def _running(journal: Journal) -> Running | None:
    """The attempt started and not yet finished, with its start time (the fold keeps the event, not its time)."""
    current = None
    for record in journal.records():
        ev = record.event
        if isinstance(ev, AttemptStarted):
            current = Running(ev.role, ev.loop, ev.attempt, record.time)
        elif isinstance(ev, (AttemptFinished, RunFinished)):
            current = None
    return current


def loop_page(source: Source, page: int) -> LoopPage:
    entries = status(source)["loops"]
    pages = max(1, -(-len(entries) // LOOPS_PER_PAGE))
    page = min(max(page, 1), pages)
    end = len(entries) - (page - 1) * LOOPS_PER_PAGE
    chosen = entries[max(0, end - LOOPS_PER_PAGE):end]
    return LoopPage([LoopSummary.from_json(e) for e in reversed(chosen)], page, pages, len(entries))


def page_of(source: Source, loop: int) -> int:
    """The loop-list page that shows `loop` (for the way back from a loop's page)."""
    entries = status(source)["loops"]
    later = sum(1 for e in entries if e["loop"] > loop)
    return later // LOOPS_PER_PAGE + 1


def facts(source: Source) -> dict[str, Any]:
    """The report's journal pass (each attempt's outcome, role failures, sessions, the stop reason)."""
    return source.cached("facts", lambda: journal_facts(Journal(source.paths.journal)))


def loop_detail(source: Source, t: int) -> LoopDetail | None:
    """Loop `t` in full, or None when the journal has no such loop."""
    def read() -> LoopDetail | None:
        entry = next((e for e in status(source)["loops"] if e["loop"] == t), None)
        if entry is None:
            return None
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
    return source.cached(f"loop-{t}", read)


def ledger(source: Source) -> Ledger:
    return source.cached("ledger", lambda: Ledger.load(workspace(source).paths.ledger))


def diffstat_line(stat: DiffStat | None) -> str:
    if stat is None:
        return "–"
    return f"{stat.changed} file{'s' if stat.changed != 1 else ''}, +{stat.added} −{stat.deleted}"
