"""Summaries of a run's trial records, as data and as Markdown; two runs side by side.

HoH@k is the mean score after loop k over the trials that were graded. A trial that stopped
early keeps its last graded score for the later loops (its artifact did not change). Trials
that could not be graded (grader_unavailable, invalid, or an error before any grade) are
counted by outcome but left out of the means: they measure the machine, not the agent.
"""

from __future__ import annotations

from typing import Any

SUMMARY_SCHEMA_VERSION = 1
PASS_THRESHOLD = 1.0
TOKEN_KEYS = ("input", "cached_input", "output", "reasoning")


def score_at(record: dict[str, Any], k: int) -> float | None:
    """The trial's score after loop k (carried forward past its last graded loop)."""
    scores = [s for s in record.get("scores", []) if s["loop"] <= k and s["score"] is not None]
    return scores[-1]["score"] if scores else None


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def summarize(records: list[dict[str, Any]], settings: dict[str, Any] | None = None) -> dict[str, Any]:
    loops = max([r.get("loops") or 0 for r in records] + [0])
    scored = [r for r in records if score_at(r, loops) is not None]
    outcomes: dict[str, int] = {}
    for r in records:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    tokens = {k: sum((r.get("tokens") or {}).get(k, 0) or 0 for r in records) for k in TOKEN_KEYS}
    costs = [r["cost_usd"] for r in records if r.get("cost_usd") is not None]

    def graded_at(k: int) -> list[float]:
        return [s for s in (score_at(r, k) for r in scored) if s is not None]

    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "settings": settings or {},
        "trials": len(records),
        "outcomes": dict(sorted(outcomes.items())),
        "scored": len(scored),
        "mean_score_by_loop": [{"loop": k, "mean": _mean(graded_at(k)), "n": len(graded_at(k))}
                               for k in range(1, loops + 1)],
        "final_mean": _mean([score_at(r, loops) for r in scored]),
        "pass_rate": _mean([1.0 if score_at(r, loops) >= PASS_THRESHOLD else 0.0 for r in scored]),
        "tokens": tokens,
        "cost_usd": round(sum(costs), 4) if costs else None,
        "wall_seconds": round(sum(r.get("wall_seconds") or 0 for r in records), 2),
        "tasks": [{"task": r["task"], "outcome": r["outcome"], "final_score": score_at(r, loops),
                   "by_loop": [score_at(r, k) for k in range(1, loops + 1)],
                   "tokens": sum((r.get("tokens") or {}).get(k, 0) or 0 for k in ("input", "output")),
                   "wall_seconds": r.get("wall_seconds"), "error": r.get("error")} for r in records],
    }


def fmt(value: float | int | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    return f"{value:,}" if isinstance(value, int) else f"{value:.{digits}f}"


def _settings_line(settings: dict[str, Any]) -> str:
    if not settings:
        return ""
    harness = settings.get("hoh", {}).get("harness", {})
    ablate = ", ".join(settings.get("ablate") or []) or "none"
    return (f"suite `{settings.get('suite')}` · mode **{settings.get('mode')}** · ablate {ablate} · harness "
            f"`{harness.get('name')}`{' / ' + harness['model'] if harness.get('model') else ''} · "
            f"{settings.get('loops')} loops")


def markdown(summary: dict[str, Any]) -> str:
    loops = [e["loop"] for e in summary["mean_score_by_loop"]]
    lines = ["# hoh bench summary", "", _settings_line(summary["settings"]), "",
             f"{summary['trials']} trials · " + ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items())
             + f" · scored {summary['scored']}", "",
             "| " + " | ".join([f"HoH@{k}" for k in loops] + ["final", "pass rate", "tokens in/out", "cost", "wall"])
             + " |",
             "|" + "---|" * (len(loops) + 5)]
    tok = summary["tokens"]
    cost = f"${summary['cost_usd']:.2f}" if summary["cost_usd"] is not None else "–"
    lines.append("| " + " | ".join([fmt(e["mean"]) for e in summary["mean_score_by_loop"]]
                                   + [fmt(summary["final_mean"]), fmt(summary["pass_rate"], 2),
                                      f"{tok['input']:,}/{tok['output']:,}", cost,
                                      f"{summary['wall_seconds']:.1f}s"]) + " |")
    lines += ["", "| task | outcome | " + " | ".join(f"@{k}" for k in loops) + " | tokens | wall | note |",
              "|" + "---|" * (len(loops) + 5)]
    for t in summary["tasks"]:
        note = (t["error"] or "").replace("|", "\\|")[:160]
        lines.append(f"| {t['task']} | {t['outcome']} | " + " | ".join(fmt(s) for s in t["by_loop"])
                     + f" | {t['tokens']:,} | {fmt(t['wall_seconds'], 1)}s | {note} |")
    return "\n".join(lines) + "\n"


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two summaries side by side: per-loop means, pass rates, tokens, and per-task final deltas."""
    by_a = {t["task"]: t for t in a["tasks"]}
    by_b = {t["task"]: t for t in b["tasks"]}
    tasks = []
    for task in sorted(by_a.keys() | by_b.keys()):
        sa = by_a.get(task, {}).get("final_score")
        sb = by_b.get(task, {}).get("final_score")
        tasks.append({"task": task, "a": sa, "b": sb,
                      "delta": round(sb - sa, 4) if sa is not None and sb is not None else None,
                      "note": "only in A" if task not in by_b else "only in B" if task not in by_a else ""})
    loops = max(len(a["mean_score_by_loop"]), len(b["mean_score_by_loop"]))

    def mean_at(s: dict[str, Any], k: int) -> float | None:
        entries = s["mean_score_by_loop"]
        return entries[min(k, len(entries)) - 1]["mean"] if entries else None

    def delta(x: float | None, y: float | None) -> float | None:
        return round(y - x, 4) if x is not None and y is not None else None

    rows = [{"metric": f"HoH@{k}", "a": mean_at(a, k), "b": mean_at(b, k)} for k in range(1, loops + 1)]
    rows += [{"metric": "final", "a": a["final_mean"], "b": b["final_mean"]},
             {"metric": "pass rate", "a": a["pass_rate"], "b": b["pass_rate"]},
             {"metric": "tokens in+out", "a": a["tokens"]["input"] + a["tokens"]["output"],
              "b": b["tokens"]["input"] + b["tokens"]["output"]}]
    for row in rows:
        row["delta"] = delta(row["a"], row["b"])
    return {"schema_version": SUMMARY_SCHEMA_VERSION, "a": _settings_line(a["settings"]),
            "b": _settings_line(b["settings"]), "rows": rows, "tasks": tasks}


def compare_markdown(cmp: dict[str, Any], name_a: str, name_b: str) -> str:
    lines = ["# hoh bench compare", "", f"- A = `{name_a}`: {cmp['a']}", f"- B = `{name_b}`: {cmp['b']}", "",
             "| metric | A | B | B − A |", "|---|---|---|---|"]
    for row in cmp["rows"]:
        lines.append(f"| {row['metric']} | {fmt(row['a'])} | {fmt(row['b'])} | {fmt(row['delta'])} |")
    lines += ["", "| task | A | B | B − A | note |", "|---|---|---|---|---|"]
    for t in cmp["tasks"]:
        lines.append(f"| {t['task']} | {fmt(t['a'])} | {fmt(t['b'])} | {fmt(t['delta'])} | {t['note']} |")
    return "\n".join(lines) + "\n"
