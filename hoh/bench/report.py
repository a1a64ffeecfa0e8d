"""Summaries of a run's task records, as data and Markdown; runs side by side with win rates.

- HoH@k: the mean score after loop k over the *scored* tasks (those with a final score). Tasks
  whose grade is an error (Harbor's verifier could not run, the environment could not start) are
  counted and listed with their reason, never averaged in as zeros.
- With several reward keys, HoH@k is also given per key (`by_key`), each over the tasks reporting it.
- Pass rate: the share of scored tasks whose final score is ≥ 1.0.
- Tokens per point: input + output tokens of the scored tasks over their summed final score in
  percentage points (a final score of 1.0 is 100 points).
- Win rate of A over B: over the tasks both scored, (wins + ties / 2) / tasks, on the final score.
  Dominance of a run (FrontierSWE's pairwise measure, as we read it): its wins plus half its ties
  over every (task, other run) pair that both scored, against all the other runs compared.
"""

from __future__ import annotations

from typing import Any

SUMMARY_SCHEMA_VERSION = 2
PASS_THRESHOLD = 1.0


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def score_at(record: dict[str, Any], k: int) -> float | None:
    """The task's score after loop k; a run with fewer loops keeps its last one."""
    scores = record.get("scores") or []
    return scores[min(k, len(scores)) - 1] if scores else None


def summarize(records: list[dict[str, Any]], settings: dict[str, Any],
              invalid: list[dict[str, str]] | None = None) -> dict[str, Any]:
    loops = max([int(settings.get("loops") or 1)] + [len(r.get("scores") or []) for r in records])
    scored = [r for r in records if r.get("final_score") is not None]
    outcomes: dict[str, int] = {}
    for r in records:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    if invalid:
        outcomes["invalid"] = len(invalid)
    token_keys = ("input", "cached_input", "output")
    tokens = {k: sum((r.get("tokens") or {}).get(k, 0) or 0 for r in records) for k in token_keys}
    costs = [r["cost_usd"] for r in records if r.get("cost_usd") is not None]

    def at(k: int) -> list[float]:
        return [s for s in (score_at(r, k) for r in scored) if s is not None]

    keys = sorted({key for r in records for entry in r.get("loops") or [] for key in (entry.get("rewards") or {})})
    by_key = {key: [_key_mean(records, key, k) for k in range(1, loops + 1)] for key in keys} if len(keys) > 1 else {}
    points = 100 * sum(r["final_score"] for r in scored)
    scored_tokens = sum(((r.get("tokens") or {}).get("input", 0) or 0) + ((r.get("tokens") or {}).get("output", 0)
                                                                         or 0) for r in scored)
    # an errored trial's spend buys no points; a cost per point needs every scored trial's cost
    scored_costs = [r.get("cost_usd") for r in scored]
    scored_cost = sum(scored_costs) if scored_costs and None not in scored_costs else None
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "settings": settings,
        "trials": len(records),
        "outcomes": dict(sorted(outcomes.items())),
        "scored": len(scored),
        "hoh_at": [{"loop": k, "mean": _mean(at(k)), "n": len(at(k)),
                    "pass_rate": _mean([1.0 if s >= PASS_THRESHOLD else 0.0 for s in at(k)])}
                   for k in range(1, loops + 1)],
        "by_key": by_key,
        "final_mean": _mean([r["final_score"] for r in scored]),
        "pass_rate": _mean([1.0 if r["final_score"] >= PASS_THRESHOLD else 0.0 for r in scored]),
        "tokens": tokens,
        "cost_usd": round(sum(costs), 4) if costs else None,
        "tokens_per_point": round(scored_tokens / points, 1) if points and scored_tokens else None,
        "cost_per_point": round(scored_cost / points, 6) if points and scored_cost else None,
        "errors": [{"task": r["task"], "error": r["error"]} for r in records if r["outcome"] == "error"],
        "invalid": invalid or [],
        "tasks": [{"task": r["task"], "outcome": r["outcome"], "scores": [score_at(r, k) for k in range(1, loops + 1)],
                   "final_score": r.get("final_score"), "rewards": (r.get("loops") or [{}])[-1].get("rewards"),
                   "tokens": r.get("tokens"), "cost_usd": r.get("cost_usd"), "wall_seconds": r.get("wall_seconds"),
                   "error": r.get("error")} for r in records],
    }


def _key_mean(records: list[dict[str, Any]], key: str, k: int) -> dict[str, Any]:
    values = []
    for r in records:
        entries = r.get("loops") or []
        if entries:
            rewards = entries[min(k, len(entries)) - 1].get("rewards") or {}
            if key in rewards:
                values.append(float(rewards[key]))
    return {"loop": k, "mean": _mean(values), "n": len(values)}


def fmt(value: float | int | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    return f"{value:,}" if isinstance(value, int) else f"{value:.{digits}f}"


def label(settings: dict[str, Any]) -> str:
    who = f"{settings.get('harness')}{'/' + settings['model'] if settings.get('model') else ''}"
    if settings.get("harness") == "oracle":
        return who
    ablate = " ".join(f"−{a}" for a in settings.get("ablate") or [])
    return " · ".join(filter(None, [who, settings.get("mode"), ablate]))


def markdown(summary: dict[str, Any]) -> str:
    s = summary["settings"]
    ks = [e["loop"] for e in summary["hoh_at"]]
    tok = summary["tokens"]
    cost = f"${summary['cost_usd']:.2f}" if summary["cost_usd"] is not None else "–"
    lines = ["# hoh bench summary", "",
             f"suite `{s.get('suite')}` · env `{s.get('env')}` · {label(s)} · {s.get('loops')} loops", "",
             f"{summary['trials']} tasks · " + ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items())
             + f" · scored {summary['scored']}", "",
             "| " + " | ".join([f"HoH@{k}" for k in ks] + ["pass rate", "tokens in/out", "tokens/point", "cost"]) + " |",
             "|" + "---|" * (len(ks) + 4),
             "| " + " | ".join([fmt(e["mean"]) for e in summary["hoh_at"]]
                               + [fmt(summary["pass_rate"], 2), f"{tok['input']:,}/{tok['output']:,}",
                                  fmt(summary["tokens_per_point"], 1), cost]) + " |"]
    for key, curve in summary["by_key"].items():
        lines.append(f"\n`{key}`: " + " → ".join(f"@{e['loop']} {fmt(e['mean'])} (n={e['n']})" for e in curve))
    lines += ["", "| task | outcome | " + " | ".join(f"@{k}" for k in ks) + " | tokens | wall | note |",
              "|" + "---|" * (len(ks) + 5)]
    for t in summary["tasks"]:
        total = (t["tokens"] or {}).get("input", 0) + (t["tokens"] or {}).get("output", 0) if t["tokens"] else None
        note = (t["error"] or "").replace("|", "\\|")[:200]
        lines.append(f"| {t['task']} | {t['outcome']} | " + " | ".join(fmt(v) for v in t["scores"])
                     + f" | {fmt(total)} | {fmt(t['wall_seconds'], 1)}s | {note} |")
    for bad in summary["invalid"]:
        lines.append(f"| {bad['task']} | invalid | " + " | ".join("–" for _ in ks) + f" | – | – | {bad['reason']} |")
    return "\n".join(lines) + "\n"


# ---- comparisons ------------------------------------------------------------------------------------
def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """B against A: HoH@k, final, pass rate, tokens, per-task final deltas, B's win rate over A."""
    by_a = {t["task"]: t for t in a["tasks"]}
    by_b = {t["task"]: t for t in b["tasks"]}
    tasks = []
    for task in sorted(by_a.keys() | by_b.keys()):
        sa, sb = by_a.get(task, {}).get("final_score"), by_b.get(task, {}).get("final_score")
        tasks.append({"task": task, "a": sa, "b": sb, "delta": _delta(sa, sb),
                      "note": "only in A" if task not in by_b else "only in B" if task not in by_a else
                      (by_a[task].get("error") or by_b[task].get("error") or "")})
    loops = max(len(a["hoh_at"]), len(b["hoh_at"]))

    def mean_at(s: dict[str, Any], k: int) -> float | None:
        entries = s["hoh_at"]
        return entries[min(k, len(entries)) - 1]["mean"] if entries else None

    rows = [{"metric": f"HoH@{k}", "a": mean_at(a, k), "b": mean_at(b, k)} for k in range(1, loops + 1)]
    rows += [{"metric": "pass rate", "a": a["pass_rate"], "b": b["pass_rate"]},
             {"metric": "tokens in+out", "a": a["tokens"]["input"] + a["tokens"]["output"],
              "b": b["tokens"]["input"] + b["tokens"]["output"]},
             {"metric": "tokens/point", "a": a["tokens_per_point"], "b": b["tokens_per_point"]},
             {"metric": "cost $", "a": a.get("cost_usd"), "b": b.get("cost_usd")},
             {"metric": "cost $/point", "a": a.get("cost_per_point"), "b": b.get("cost_per_point")},
             {"metric": "errors", "a": len(a["errors"]), "b": len(b["errors"])}]
    for row in rows:
        row["delta"] = _delta(row["a"], row["b"])
    return {"schema_version": SUMMARY_SCHEMA_VERSION, "a": label(a["settings"]), "b": label(b["settings"]),
            "rows": rows, "tasks": tasks, "b_win_rate": win_rate(b, a)}


def _delta(x: float | int | None, y: float | int | None) -> float | int | None:
    if x is None or y is None:
        return None
    return y - x if isinstance(x, int) and isinstance(y, int) else round(y - x, 4)


def pair_counts(a: dict[str, Any], b: dict[str, Any]) -> tuple[int, int, int]:
    """(wins, ties, losses) of A against B over the tasks both scored, on the final score."""
    finals_b = {t["task"]: t["final_score"] for t in b["tasks"] if t["final_score"] is not None}
    wins = ties = losses = 0
    for t in a["tasks"]:
        if t["final_score"] is None or t["task"] not in finals_b:
            continue
        other = finals_b[t["task"]]
        wins += t["final_score"] > other
        ties += t["final_score"] == other
        losses += t["final_score"] < other
    return wins, ties, losses


def win_rate(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    wins, ties, losses = pair_counts(a, b)
    n = wins + ties + losses
    return {"wins": wins, "ties": ties, "losses": losses, "tasks": n,
            "rate": round((wins + ties / 2) / n, 4) if n else None}


def win_rates(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Every run against every other: the pairwise win-rate matrix and each run's Dominance."""
    names = [label(s["settings"]) for s in summaries]
    matrix = [[None if i == j else win_rate(a, b)["rate"] for j, b in enumerate(summaries)]
              for i, a in enumerate(summaries)]
    dominance = []
    for i, a in enumerate(summaries):
        counts = [pair_counts(a, b) for j, b in enumerate(summaries) if j != i]
        won = sum(w + t / 2 for w, t, _ in counts)
        n = sum(w + t + l for w, t, l in counts)
        dominance.append(round(won / n, 4) if n else None)
    return {"runs": names, "matrix": matrix, "dominance": dominance}
