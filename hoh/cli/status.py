"""Rendering for `hoh status` and `hoh show`."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _tokens(usage: dict[str, Any]) -> str:
    total = usage["input_tokens"] + usage["output_tokens"]
    cost = f" ${usage['cost_usd']:.2f}" if usage.get("cost_usd") else ""
    return f"{total:,}{cost}"


SHOWN_LOOPS = 20


def render_status(console: Console, data: dict[str, Any], show_all: bool = False) -> None:
    console.print(f"[bold]{data['workspace']}[/bold] · harness {data['harness']} · {data['state']} · "
                  f"{data['loops_finished']}/{data['target_loops']} loops · tokens {_tokens(data['usage'])}")
    table = Table(show_edge=False)
    for col in ("loop", "status", "criteria", "tries P/D/Q", "time", "issues o/c/r", "tokens"):
        table.add_column(col)
    table.add_column("candidate", no_wrap=True, overflow="fold")
    loops = data["loops"] if show_all else data["loops"][-SHOWN_LOOPS:]
    if len(loops) < len(data["loops"]):
        console.print(f"… {len(data['loops']) - len(loops)} earlier loops (hoh status --all shows them)")
    for loop in loops:
        attempts = "/".join(str(loop["attempts"][r]) for r in ("planner", "developer", "qa"))
        issues = loop["issues"]
        issue_cell = (f"{issues['open'] + issues['fixed_pending_verify']}/{issues['closed']}/{issues['reopened']}"
                      if issues else "")
        usage = {k: sum(u[k] for u in loop["usage"].values()) for k in ("input_tokens", "output_tokens")}
        table.add_row(str(loop["loop"]), loop["status"], f"{loop['criteria_verified']}/{loop['criteria_total']}",
                      attempts, f"{loop['seconds']:.1f}s", issue_cell, _tokens(usage), loop["candidate_id"] or "")
    console.print(table)
    caught = [f"loop {loop['loop']} {role} {n}" for loop in data["loops"]
              for role, n in loop.get("violations", {}).items() if n]
    if caught:
        console.print(f"guard: writes into protected areas found and put back ({'; '.join(caught)}); "
                      "details in each attempt's result.json", soft_wrap=True)
    if data.get("sandbox") == "off":
        console.print("[yellow]warning:[/yellow] sandbox.mode is off: roles ran without the OS jail (hoh's guard "
                      "and the harness's own flags were the only protection)", soft_wrap=True)
    by_role = {role: sum(loop["usage"][role]["input_tokens"] + loop["usage"][role]["output_tokens"]
                         for loop in data["loops"]) for role in ("planner", "developer", "qa")}
    console.print("tokens by role: " + " · ".join(f"{role} {n:,}" for role, n in by_role.items()))


def show_issue(console: Console, item: dict[str, Any]) -> None:
    if item["id"].startswith("I-"):
        console.print(f"[bold]{item['id']}[/bold] {item['title']}")
        extra = f" · linked behaviour {item['behaviour_id']}" if item.get("behaviour_id") else ""
        console.print(f"status {item['status']} · severity {item['severity']} · loops {item['first_loop']}–"
                      f"{item['last_loop']} · regressions {item['regressions']}{extra}")
    else:
        console.print(f"[bold]{item['id']}[/bold] {item['behaviour']}")
        console.print(f"status {item['status']} · first verified loop {item['first_verified']['loop']} · "
                      f"issues {', '.join(item['issues']) or 'none'}")
    table = Table(show_edge=False)
    for col in ("loop", "candidate", "status", "by", "evidence / notes"):
        table.add_column(col)
    for h in item["history"]:
        detail = "; ".join(filter(None, [", ".join(h.get("evidence", [])[:3]), h.get("notes", "")]))
        table.add_row(str(h["loop"]), h["candidate_id"] or "", h["status"], ", ".join(h.get("sources", [])), detail)
    console.print(table)
