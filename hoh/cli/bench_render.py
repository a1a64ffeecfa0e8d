"""How `hoh bench` prints results: a task's line as it ends, a run's summary, a comparison, a calibration.

Every state a loop or a task can end in is shown as itself (a score, `failed`, `not run`, `ungraded`,
`not_gradable`), every reward key beside the headline, and every note leads with its cause; the full
text of each error stays in summary.json and summary.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .console import out as out_console

if TYPE_CHECKING:
    from rich.console import Console

NOTE_WIDTH = 300


def plain(console: "Console", text: str) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def task_line(record: dict[str, Any]) -> str:
    from ..bench.report import cell, task_row, why
    loops = len(record["scores"]) or 1
    row = task_row(record, loops)
    scores = " ".join(f"@{k} {cell(row, k, 2)}" for k in range(1, loops + 1))
    wall = f" ({record['wall_seconds']:.0f}s)" if record.get("wall_seconds") is not None else ""
    note = f" · {why(row)}" if why(row) else ""
    return f"{record['task']}: {record['outcome']} {scores}{wall}{note}"


CALIBRATION_WORDS = {"gradable": "gradable here: its reference solution scores the maximum",
                     "not_gradable": "not gradable here", "no_solution": "no reference solution: not calibrated",
                     "pending": "not graded yet"}


def check_line(record: dict[str, Any]) -> str:
    reason = f" · {record['cause']}" if record.get("cause") else ""
    return f"{record['task']}: {CALIBRATION_WORDS.get(str(record['outcome']), str(record['outcome']))}{reason}"


def render_summary(console: "Console", summary: dict[str, Any]) -> None:
    from rich.table import Table
    from rich.text import Text

    from ..bench.report import cell, fmt, label, seconds, why
    ks = [e["loop"] for e in summary["hoh_at"]]
    costs = any(t.get("cost_usd") is not None for t in summary["tasks"])
    table = Table(show_edge=False)
    for col in ["task", "outcome", *[f"@{k}" for k in ks], "tokens", *(["cost"] if costs else []), "wall", "cause"]:
        table.add_column(col, overflow="fold" if col in ("cause", *[f"@{k}" for k in ks]) else "ellipsis")
    for t in summary["tasks"]:
        tokens = t["tokens"]
        total = f"{tokens['input'] + tokens['output']:,}" if tokens else "–"
        cost = [f"${t['cost_usd']:.4f}" if t.get("cost_usd") is not None else "–"] if costs else []
        table.add_row(Text(t["task"]), t["outcome"], *[cell(t, k) for k in ks], total, *cost,
                      seconds(t["wall_seconds"]), Text(why(t)[:NOTE_WIDTH]))
    for bad in summary["invalid"]:
        table.add_row(Text(bad["task"]), "invalid", *["–" for _ in ks], "–", *(["–"] if costs else []), "–",
                      Text(bad["reason"][:NOTE_WIDTH]))
    table.add_section()
    tok = summary["tokens"]
    table.add_row("[bold]mean", f"{summary['scored']}/{summary['trials']} scored",
                  *[fmt(e["mean"]) for e in summary["hoh_at"]], f"{tok['input'] + tok['output']:,}",
                  *([f"${summary['cost_usd']:.4f}" if summary.get("cost_usd") is not None else "–"] if costs else []),
                  "", "")
    console.print(table)
    curve = " → ".join(f"HoH@{e['loop']} {fmt(e['mean'])}" for e in summary["hoh_at"])
    cost = f" · cost ${summary['cost_usd']:.2f}" if summary.get("cost_usd") is not None else ""
    per_point = f" · {fmt(summary['tokens_per_point'], 1)} tokens/point" if summary.get("tokens_per_point") else ""
    if summary.get("cost_per_point"):
        per_point += f" · ${summary['cost_per_point']:.4f}/point"
    plain(console, f"{label(summary['settings'])}: {curve} · pass rate {fmt(summary['pass_rate'], 2)} · outcomes "
          + ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items()) + per_point + cost
          + f" · headline: {summary['headline']}")
    if len(summary["by_key"]) > 1:
        for key, points in summary["by_key"].items():
            plain(console, f"  {key}: " + " → ".join(f"@{e['loop']} {fmt(e['mean'])}" for e in points))
    left_out = [t["task"] for t in summary["tasks"] if not t["scored"]]
    if left_out:
        plain(console, f"left out of the means ({len(left_out)}): {', '.join(left_out)}; the full errors are in "
              "summary.md")


def render_comparison(out_dir: Path, other: Path, cmp: dict[str, Any]) -> None:
    from rich.table import Table
    from rich.text import Text

    from ..bench.report import fmt
    out = out_console()
    plain(out, f"A = {out_dir}: {cmp['a']}\nB = {other}: {cmp['b']}")
    for note in cmp["notes"]:
        plain(out, f"note: {note}")
    for title, rows, key in (("metric", cmp["rows"], "metric"), ("task", cmp["tasks"], "task")):
        table = Table(show_edge=False)
        for col in (title, "A", "B", "B − A", *(["note"] if title == "task" else [])):
            table.add_column(col, overflow="fold")
        for row in rows:
            extra = [Text(row["note"])] if title == "task" else []
            table.add_row(Text(row[key]), fmt(row["a"]), fmt(row["b"]), fmt(row["delta"]), *extra)
        out.print(table)
    rate = cmp["b_win_rate"]
    plain(out, f"B over A: {rate['wins']} wins, {rate['ties']} ties, {rate['losses']} losses on {rate['tasks']} "
          f"tasks · win rate {fmt(rate['rate'])}")


def render_check(console: "Console", records: list[dict[str, Any]]) -> None:
    """`hoh bench check`: per task, whether its reference solution reaches the maximum here, and why not."""
    from rich.table import Table
    from rich.text import Text
    table = Table(show_edge=False, show_lines=True)
    for col in ("task", "graded here", "reference solution's rewards", "why"):
        table.add_column(col, overflow="fold")
    for r in records:
        cal = r.get("calibration") or {}
        rewards = ", ".join(f"{k} {float(v):g}" for k, v in sorted((cal.get("rewards") or {}).items())) or "–"
        lines = [cal["reason"]] if cal.get("reason") else []
        lines += [f"· {line}" for line in cal.get("telling") or [] if line not in (cal.get("reason") or "")]
        state = CALIBRATION_WORDS.get(str(r["outcome"]), str(r["outcome"])).split(":")[0]
        table.add_row(Text(r["task"]), state, rewards, Text("\n".join(lines)))
    console.print(table)
    counts: dict[str, int] = {}
    for r in records:
        counts[str(r["outcome"])] = counts.get(str(r["outcome"]), 0) + 1
    plain(console, f"{len(records)} tasks: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items()))
