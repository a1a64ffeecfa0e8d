"""The workspace report as a main page and a folder of small pages beside it, made incrementally.

    report.html                      the run's header, its plots over every loop, the issues not closed (then the
                                     latest closed), the broken behaviours (then the latest verified), the newest
                                     loops as a table, and links to every other page
    report-pages/loop-0001.html      one loop: plan, Developer report, checks, QA with its evidence, attempts
    report-pages/loops-1.html        loops 1–50 as a table (loops-2: 51–100, …)
    report-pages/issues-1.html       issues 1–100 of the ledger with their histories (issues-2: 101–200, …)
    report-pages/behaviours-1.html   behaviours 1–100 of the register
    report-pages/files/loop-0001/    the report's text copies of loop 1's evidence files (`rolefiles.py`), made
                                     with its page

(for `-o NAME.html`, the folder is `NAME-pages/`). The main page's size and cost do not grow with the
run's loops but for the plots' data; each other page is bounded by its loop or its 50 or 100 items.

Incremental: every page but the main one carries a key (`<meta name="hoh-page">`) of what it shows —
for a loop that finished, its number, status and candidate and whether a next loop exists; for a page of
the ledger, each item's id, status and history (only ever appended to: its length and last entry); always
the workspace (its path and identity), the link prefix, this format and hoh's version. A page whose file
already carries its key is neither read from the state nor rendered nor written: a finished loop is
sealed and never changes, so re-making a report writes the new loops' pages, the pages of the ledger
that moved, and the main page. A loop still running has no key: its page is made every time. Issues and behaviours are only ever appended to the
ledger, so the page an item's link points to never changes.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .. import __version__
from ..errors import UsageError
from .data import LoopModel, RunModel, evidence_path, read_details, read_plans
from .rolefiles import copy_name

FORMAT = 1
"""This layout's version, in every page's key: a report made by another layout is made anew."""
LOOPS_PER_LIST = 50
ITEMS_PER_PAGE = 100
LOOPS_SHOWN = 25
"""The newest loops in the main page's table."""
ITEMS_SHOWN = 50
"""Issues (and behaviours) on the main page at most."""
KEY_PROBE = 2048


def loop_page(t: int) -> str:
    return f"loop-{t:04d}.html"


def list_page(k: int) -> str:
    return f"loops-{k}.html"


def list_of(t: int) -> int:
    return (t - 1) // LOOPS_PER_LIST + 1


@dataclass(frozen=True)
class Layout:
    """Where a report's pages go: `main`, and its folder beside it."""

    main: Path

    @property
    def folder(self) -> Path:
        return self.main.with_name(f"{self.main.stem}-pages")

    def check(self) -> None:
        if self.folder.exists() and not self.folder.is_dir():
            raise UsageError(f"{self.folder} is not a folder: the report keeps its loops' pages there; move it away")


@dataclass
class Todo:
    """One page to render: its file name in the folder (None: the main page), template, key and context."""

    name: str | None
    template: str
    key: str | None
    context: dict[str, Any] = field(default_factory=dict)


def key_of(*parts: Any) -> str:
    blob = json.dumps([FORMAT, __version__, *parts], sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def current(path: Path, key: str | None) -> bool:
    """Whether the page at `path` was made with `key` (read: its first bytes only)."""
    if key is None:
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(KEY_PROBE)
    except OSError:
        return False
    return f'<meta name="hoh-page" content="{key}">'.encode() in head


def chunks(items: list[Any], size: int) -> list[tuple[str, int, int, list[Any]]]:
    return [(str(k // size + 1), k + 1, min(k + size, len(items)), items[k:k + size])
            for k in range(0, len(items), size)]


class Pages:
    """The pages of one run's report at `layout`: which must be made, and the links between them."""

    def __init__(self, run: RunModel, layout: Layout):
        self.run, self.layout = run, layout
        self.issue_chunks = chunks(run.issues, ITEMS_PER_PAGE)
        self.behaviour_chunks = chunks(run.behaviours, ITEMS_PER_PAGE)
        self.issue_page = {i["id"]: f"issues-{n}.html" for n, _, _, part in self.issue_chunks for i in part}
        self.behaviour_page = {b["id"]: f"behaviours-{n}.html" for n, _, _, part in self.behaviour_chunks for b in part}
        self.by_loop = {lp.loop: lp for lp in run.loops}

    # ---- links, from the main page (`in_folder` False) or from a page in the folder ----------------------
    def links(self, in_folder: bool, here: set[str] = frozenset()) -> dict[str, Any]:
        base = self.layout.folder if in_folder else self.layout.main.parent
        prefix = Path(os.path.relpath(self.run.workspace, base)).as_posix()
        folder = "" if in_folder else f"{self.layout.folder.name}/"

        def link(rel: str) -> str:
            return quote(f"{prefix}/{rel}" if prefix != "." else rel)

        def page(name: str) -> str:
            return quote(folder + name)

        def item(pages: dict[str, str], ident: str) -> str:
            if ident in here or ident not in pages:
                return f"#{quote(ident)}"
            return f"{page(pages[ident])}#{quote(ident)}"

        def evidence_href(t: int, name: str) -> str:
            """QA's evidence file: the report's text copy of it (`rolefiles.py`), or a text file or image itself."""
            copy = copy_name(t, name)
            return page(copy) if copy is not None else link(evidence_path(self.run, t, name))

        return {"link": link, "page": page, "loop_href": lambda t: page(loop_page(t)), "evidence_href": evidence_href,
                "issue_href": lambda ident: item(self.issue_page, ident),
                "behaviour_href": lambda ident: item(self.behaviour_page, ident),
                "main_href": quote(f"../{self.layout.main.name}") if in_folder else "#", "prefix": prefix}

    # ---- which pages ---------------------------------------------------------------------------------------
    def plan(self) -> list[Todo]:
        """Every page that is missing or stale, its loops' details read; the main page last."""
        run, folder = self.run, self.layout.folder
        prefix = self.links(True)["prefix"]
        run_id = [prefix, str(run.workspace), run.ws.identity if run.ws else None]  # which run, linked from where
        todos: list[Todo] = []
        loops_todo: list[LoopModel] = []
        for i, lp in enumerate(run.loops):
            nxt = run.loops[i + 1].loop if i + 1 < len(run.loops) else None
            key = key_of("loop", run_id, lp.loop, lp.status, lp.candidate_id, nxt) if lp.finished else None  # sealed
            if current(folder / loop_page(lp.loop), key):
                continue
            prev = run.loops[i - 1].loop if i else None
            todos.append(Todo(loop_page(lp.loop), "ws_loop.html.j2", key,
                              {"lp": lp, "prev": prev, "next": nxt, "list_page": list_page(list_of(lp.loop))}))
            loops_todo.append(lp)
        if loops_todo:
            read_details(run, loops_todo)
            if run.diff_note:  # made again next time, when the history may read
                for todo in todos:
                    todo.key = None
        lists = self.list_pages()
        rows: list[LoopModel] = []
        for n, (name, first, last) in enumerate(lists):
            part = [lp for lp in run.loops if list_of(lp.loop) == n + 1]
            done = len(part) == LOOPS_PER_LIST and all(lp.finished for lp in part)
            shows = [(lp.loop, lp.status, lp.criteria_verified, lp.seconds, lp.usage, lp.issues) for lp in part]
            key = key_of("loops", run_id, name, shows, len(lists)) if done else None
            if current(folder / name, key):
                continue
            rows += part
            todos.append(Todo(name, "ws_loops.html.j2", key, {
                "rows": part[::-1], "first": first, "last": last,
                "newer": lists[n + 1][0] if n + 1 < len(lists) else None, "older": lists[n - 1][0] if n else None}))
        newest = run.loops[::-1][:LOOPS_SHOWN]
        read_plans(run, rows + newest)
        for kind, found, template in (("issues", self.issue_chunks, "ws_issues.html.j2"),
                                      ("behaviours", self.behaviour_chunks, "ws_behaviours.html.j2")):
            for n, first, last, part in found:
                name = f"{kind}-{n}.html"
                # histories are only appended to: an item's status, history length and last entry say what it shows
                state = [(i["id"], i.get("status"), len(i.get("history", [])), i.get("history", [])[-1:]) for i in part]
                key = key_of(kind, run_id, state, self._item_pages(found, kind))
                if not current(folder / name, key):
                    todos.append(Todo(name, template, key, {"first": first, "last": last, f"{kind}_shown": part,
                                                            "here": {item["id"] for item in part}}))
        todos.append(Todo(None, "workspace.html.j2", None, {"rows": newest}))
        return todos

    def list_pages(self) -> list[tuple[str, int, int]]:
        last = self.run.loops[-1].loop if self.run.loops else 0
        return [(list_page(k), (k - 1) * LOOPS_PER_LIST + 1, min(k * LOOPS_PER_LIST, last))
                for k in range(1, list_of(last) + 1)] if last else []

    @staticmethod
    def _item_pages(found: list[tuple[str, int, int, list[Any]]], kind: str) -> list[tuple[str, int, int]]:
        return [(f"{kind}-{n}.html", first, last) for n, first, last, _ in found]

    def shown(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The issues and behaviours on the main page: every issue not closed and then the latest closed ones
        (ITEMS_SHOWN at most, the most recent first to stay), in ledger order; behaviours likewise (broken first)."""
        def pick(items: list[dict[str, Any]], urgent) -> list[dict[str, Any]]:
            if len(items) <= ITEMS_SHOWN:
                return items
            ranked = sorted(range(len(items)), key=lambda k: (not urgent(items[k]), -k))[:ITEMS_SHOWN]
            return [items[k] for k in sorted(ranked)]
        return (pick(self.run.issues, lambda i: i.get("status") != "closed"),
                pick(self.run.behaviours, lambda b: b.get("status") == "broken"))

    def context(self, todo: Todo) -> dict[str, Any]:
        """The template's variables for `todo`, its links included."""
        extra = {"issue_pages": self._item_pages(self.issue_chunks, "issues"),
                 "behaviour_pages": self._item_pages(self.behaviour_chunks, "behaviours")}
        if todo.name is None:
            issues, behaviours = self.shown()
            here = {i["id"] for i in issues} | {b["id"] for b in behaviours}
            many = len(self.run.issues) > len(issues), len(self.run.behaviours) > len(behaviours)
            return {**self.links(False, here), **extra, "issues_shown": issues, "behaviours_shown": behaviours,
                    "list_pages": self.list_pages() if len(self.run.loops) > len(todo.context["rows"]) else [],
                    **({} if many[0] else {"issue_pages": []}), **({} if many[1] else {"behaviour_pages": []}),
                    **todo.context, "page_key": None}
        here = todo.context.get("here", set())
        return {**self.links(True, here), **extra, **todo.context, "page_key": todo.key}
