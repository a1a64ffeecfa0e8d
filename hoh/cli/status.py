"""Rendering for `hoh status` and `hoh show`.

`hoh status` is laid out once (`status_layout`: its lines and tables as text) and printed either through rich
(`render_status`) or, when the output is certain to be the same bytes, as plain text (`plaintext.py`), which
spares rich's import and its table layout on the common, non-terminal path.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Union

from ..store.status import EarlierLoops
from ..terminal import terminal_text

if TYPE_CHECKING:  # rich is imported by the functions that print through it
    from rich.console import Console
    from rich.table import Table


ROLE_LETTERS = ("planner", "developer", "qa")


def money(cost: float | None) -> str:
    """A cost for people: unknown is "?", never $0."""
    if cost is None:
        return "?"
    return f"${cost:,.2f}" if cost >= 0.1 or cost == 0 else f"${cost:.4f}"


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 120:
        return f"{seconds}s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _amount(key: str, value: float) -> str:
    return f"{int(value):,}" if key == "tokens" else money(value) if key == "cost_usd" else f"{value:.2f}h"


def _table(*columns: str) -> "Table":
    # Cells fold rather than end in "…": in a narrow terminal a value wraps, it is never cut.
    from rich.table import Table
    table = Table(box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    for name in columns:
        table.add_column(name, overflow="fold")
    return table


SHOWN_LOOPS = 20
"""The table shows the last this many loops unless asked for all."""


def check_cell(checks: dict[str, int] | None, seconds: float = 0.0) -> str:
    """A loop's checks in a few characters: `5/1/0 +2 -1 3s`, with skipped and rejected only when there were
    any; the time is the replay's and the admission's."""
    if not checks:
        return ""
    cell = f"{checks.get('replayed', 0)}/{checks.get('failed', 0)}/{checks.get('flaky', 0)}"
    cell += f" +{checks['added']}" if checks.get("added") else ""
    cell += f" -{checks['retired']}" if checks.get("retired") else ""
    extra = [f"{checks[k]} {k}" for k in ("skipped", "rejected") if checks.get(k)]
    return cell + (f" ({', '.join(extra)})" if extra else "") + f" {duration(seconds)}"


class LineKind(Enum):
    """How rich prints a line of the status (`render_status` keeps each call as it was)."""

    TEXT = "text"
    """Figures and agents' words: no markup, no highlighting, folded when too long."""
    LEGEND = "legend"
    """The table's legend, dim."""
    GUARD = "guard"
    """What the guard put back."""
    WARNING = "warning"
    """A warning: its first word yellow."""


@dataclass(frozen=True)
class Line:
    """A line of text, printed as its kind says."""

    text: str
    kind: LineKind = LineKind.TEXT


@dataclass(frozen=True)
class Grid:
    """A table without borders: a header row of column names, then rows of cells as printed."""

    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]


Block = Union[Line, Grid]
WARNING = "warning:"
"""The yellow first word of a `LineKind.WARNING` line."""


def shown_loops(data: dict[str, Any], show_all: bool) -> tuple[list[dict[str, Any]], EarlierLoops]:
    """The loops the table shows (the last `SHOWN_LOOPS` unless `show_all`) and what it says of the others, from
    the status with every loop's entry or with `earlier_loops` (`workspace_status(ws, shown)`)."""
    if "earlier_loops" in data:
        return data["loops"], data["earlier_loops"]
    loops = data["loops"] if show_all else data["loops"][-SHOWN_LOOPS:]
    earlier = data["loops"][:len(data["loops"]) - len(loops)]
    return loops, EarlierLoops.of((loop["loop"], loop["candidate_id"], loop.get("violations", {})) for loop in earlier)


def status_layout(data: dict[str, Any], show_all: bool = False) -> list[Block]:
    """The status for a terminal, readable at 80 columns: `hoh status --json`'s data as lines and tables."""
    blocks: list[Block] = []

    def say(text: str) -> None:
        blocks.append(Line(text))

    say(data["workspace"])
    line = (f"{data['state']} · {data['loops_finished']}/{data['target_loops']} loops · "
            f"tokens {data['tokens']:,} · cost {money(data['cost_usd'])}")
    if eta := data.get("eta"):
        line += f" · ETA {duration(eta['seconds'])}" + (f" (about {eta['at']})" if eta.get("at") else "")
    say(line)
    if data.get("paused_until"):
        say(f"paused until {data['paused_until']}: the harness's usage limit; hoh goes on by itself")
    if reason := data.get("stop_reason"):
        say(f"stop reason: {reason.get('message') or reason['status']}")
    if budget := data.get("budget"):
        parts = []
        for key, figure in budget.items():
            over = f" (over by {_amount(key, figure['overrun'])})" if figure["overrun"] else ""
            parts.append(f"{key} {_amount(key, figure['spent'])} / {_amount(key, figure['limit'])}{over}")
        say("budget: " + " · ".join(parts))
    if patience := data.get("patience"):
        say(f"patience: {patience['loops_without_progress']} of {patience['limit']} loops without progress")
    for note in data.get("notes", []):
        where = f"taken by loop {note['loop']}" if note["loop"] else "for the next loop that plans"
        text = " ".join((note["text"] or "(its file is missing)").split())
        say(f"note {note['id'] or '(queued)'} {where}: {text if len(text) <= 60 else text[:59] + '…'}")
    loops, earlier = shown_loops(data, show_all)
    last = next((loop["candidate_id"] for loop in reversed(loops) if loop["candidate_id"]), earlier.last_candidate)
    if last:
        say(f"last candidate: {last}")

    with_checks = any(loop.get("checks") for loop in loops)
    if earlier.count:
        say(f"… {earlier.count} earlier loops (hoh status --all shows them)")
    rows = []
    for loop in loops:
        attempts = "/".join(str(loop["attempts"][r]) for r in ROLE_LETTERS)
        issues = loop["issues"]
        issue_cell = (f"{issues['open'] + issues['fixed_pending_verify']}/{issues['closed']}/{issues['reopened']}"
                      if issues else "")
        tree = (loop["candidate_id"] or "").rpartition("-")[2][:8]  # enough to tell loops apart at 80 columns
        rows.append((str(loop["loop"]), loop.get("ended") or loop["status"],
                     f"{loop['criteria_verified']}/{loop['criteria_total']}", attempts, duration(loop["seconds"]),
                     issue_cell,
                     *((check_cell(loop.get("checks"), loop.get("check_seconds", 0.0)),) if with_checks else ()),
                     f"{loop['tokens']:,}", money(loop["cost_usd"]), tree))
    blocks.append(Grid(("loop", "status", "crit", "tries", "time", "issues", *(("checks",) if with_checks else ()),
                        "tokens", "cost", "tree"), rows))
    for loop in loops:  # why each loop short of a pass fell short, under the table (a column would not fit 80)
        if loop.get("reason"):
            say(f"loop {loop['loop']} {loop['status']}: {loop['reason']}")
    blocks.append(Line("tries: planner/developer/qa · issues: open/closed/reopened · "
                       + ("checks: replayed/failed/flaky +added -retired (skipped, rejected) time · " if with_checks
                          else "") + "tree: of the candidate", LineKind.LEGEND))

    blocks.append(Grid(("role", "harness", "model", "tries", "tokens", "cost", "time"),
                       [(role, r["harness"], r["model"] or "(default)", str(r["attempts"]), f"{r['tokens']:,}",
                         money(r["cost_usd"]), duration(r["seconds"])) for role, r in data["roles"].items()]))
    caught = [f"loop {loop} {role} {n}" for loop, role, n in earlier.violations] + \
        [f"loop {loop['loop']} {role} {n}" for loop in loops for role, n in loop.get("violations", {}).items() if n]
    if caught:
        blocks.append(Line(f"guard: writes into protected areas found and put back ({'; '.join(caught)}); "
                           "details in each attempt's result.json", LineKind.GUARD))
    if data.get("sandbox") == "off":
        blocks.append(Line(f"{WARNING} sandbox.mode is off: roles ran without the OS jail (hoh's guard and the "
                           "harness's own flags were the only protection)", LineKind.WARNING))
    return [_shown(block) for block in blocks]


def _shown(block: Block) -> Block:
    """The block as a terminal may be sent it: agents' words (a loop's reason, a stop reason, a note) with their
    controls visible, before either printer lays them out (so rich and the plain text agree)."""
    if isinstance(block, Grid):
        return Grid(block.columns, [tuple(terminal_text(cell) for cell in row) for row in block.rows])
    return Line(terminal_text(block.text), block.kind)


def render_status(console: "Console", data: dict[str, Any], show_all: bool = False) -> None:
    """The status through rich: what a terminal gets (styles), and the fallback of the plain text."""
    for block in status_layout(data, show_all):
        if isinstance(block, Grid):
            table = _table(*block.columns)
            for row in block.rows:
                table.add_row(*row)
            console.print(table)
        elif block.kind is LineKind.TEXT:
            console.print(block.text, soft_wrap=False, markup=False, highlight=False, overflow="fold")
        elif block.kind is LineKind.LEGEND:
            console.print(block.text, style="dim", highlight=False)
        elif block.kind is LineKind.GUARD:
            console.print(block.text, soft_wrap=False, overflow="fold")
        else:
            console.print(f"[yellow]{WARNING}[/yellow]{block.text.removeprefix(WARNING)}")


def show_issue(console: "Console", item: dict[str, Any]) -> None:
    """Titles, behaviours, evidence and notes are agents' words: printed as text, never as rich markup, their
    controls visible and each on its one line."""
    from rich.markup import escape

    def text(words: str) -> str:
        return escape(terminal_text(words))

    if item["id"].startswith("I-"):
        console.print(f"[bold]{item['id']}[/bold] {text(item['title'])}")
        extra = f" · linked behaviour {item['behaviour_id']}" if item.get("behaviour_id") else ""
        console.print(f"status {item['status']} · severity {item['severity']} · loops {item['first_loop']}–"
                      f"{item['last_loop']} · regressions {item['regressions']}{extra}")
    else:
        console.print(f"[bold]{item['id']}[/bold] {text(item['behaviour'])}")
        console.print(f"status {item['status']} · first verified loop {item['first_verified']['loop']} · "
                      f"issues {', '.join(item['issues']) or 'none'}")
    table = _table("loop", "candidate", "status", "by", "evidence / notes")  # ids fold, never end in "…"
    for h in item["history"]:
        detail = "; ".join(filter(None, [", ".join(h.get("evidence", [])[:3]), h.get("notes", "")]))
        table.add_row(str(h["loop"]), h["candidate_id"] or "", h["status"], ", ".join(h.get("sources", [])),
                      text(detail))
    console.print(table)
