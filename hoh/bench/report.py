"""Summaries of a run's task records, as data and Markdown; runs side by side with win rates.

- HoH@k: the mean headline score after loop k over the *scored* tasks: those whose every loop was graded
  (or carried a grade). A task with a loop in error (a role failed, the trial died, the grade could not be
  computed) or not gradable here (its reference solution cannot reach the maximum) is counted and listed
  with its cause, never averaged in as a zero.
- The headline score is `--metric KEY` when chosen, else `reward`, the only key, or the mean of the keys;
  every reward key also has its own curve (`by_key`), over the scored tasks reporting it.
- Pass rate: the share of scored tasks whose final score is ≥ 1.0.
- Tokens per point: input + output tokens of the scored tasks over their summed final score in
  percentage points (a final score of 1.0 is 100 points).
- Win rate of A over B: over the tasks both scored, (wins + ties / 2) / tasks, on the final score.
  Dominance of a run (FrontierSWE's pairwise measure, as we read it): its wins plus half its ties
  over every (task, other run) pair that both scored, against all the other runs compared.
"""

from __future__ import annotations

from typing import Any

from ..errors import UsageError

SUMMARY_SCHEMA_VERSION = 3
PASS_THRESHOLD = 1.0
STATE_MARK = {"failed": "failed", "not_run": "not run", "ungraded": "ungraded", "pending": "pending"}
"""How a loop that has no score shows in a table cell."""


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def score_at(record: dict[str, Any], k: int) -> float | None:
    """The task's score after loop k; None beyond the loops it ran."""
    scores = record.get("scores") or []
    return scores[k - 1] if k <= len(scores) else None


def is_scored(record: dict[str, Any]) -> bool:
    return record.get("outcome") == "completed" and bool(record.get("scores")) and \
        all(s is not None for s in record["scores"])


def reward_keys(records: list[dict[str, Any]]) -> list[str]:
    return sorted({key for r in records for entry in r.get("loops") or [] for key in (entry.get("rewards") or {})})


def check_metric(metric: str | None, records: list[dict[str, Any]]) -> None:
    """A --metric that no graded loop reports is bad input: one line naming the keys there are."""
    if metric is None:
        return
    keys = reward_keys(records)
    if metric not in keys:
        known = f"choose one of: {', '.join(keys)}" if keys else "none is reported yet: no loop was graded"
        raise UsageError(f"--metric {metric}: no task reports that reward key ({known}); the run's results are "
                         "kept")


def summarize(records: list[dict[str, Any]], settings: dict[str, Any],
              invalid: list[dict[str, str]] | None = None, metric: str | None = None) -> dict[str, Any]:
    loops = max([int(settings.get("loops") or 1)] + [len(r.get("scores") or []) for r in records])
    scored = [r for r in records if is_scored(r)]
    outcomes: dict[str, int] = {}
    for r in records:
        outcomes[str(r["outcome"])] = outcomes.get(str(r["outcome"]), 0) + 1
    if invalid:
        outcomes["invalid"] = len(invalid)
    token_keys = ("input", "cached_input", "output")
    tokens = {k: sum((r.get("tokens") or {}).get(k, 0) or 0 for r in records) for k in token_keys}
    costs = [r["cost_usd"] for r in records if r.get("cost_usd") is not None]

    def at(k: int) -> list[float]:
        return [s for s in (score_at(r, k) for r in scored) if s is not None]

    keys = reward_keys(scored)
    points = 100 * sum(r["final_score"] for r in scored)
    scored_tokens = sum(((r.get("tokens") or {}).get("input", 0) or 0) + ((r.get("tokens") or {}).get("output", 0)
                                                                         or 0) for r in scored)
    # an errored trial's spend buys no points; a cost per point needs every scored trial's cost
    scored_costs = [r.get("cost_usd") for r in scored]
    scored_cost = sum(scored_costs) if scored_costs and None not in scored_costs else None
    calibration: dict[str, int] = {}
    for r in records:
        state = (r.get("calibration") or {}).get("state") or "off"
        calibration[state] = calibration.get(state, 0) + 1
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "settings": settings,
        "metric": metric,
        "headline": headline_name(metric, scored),
        "keys": reward_keys(records),
        "trials": len(records),
        "outcomes": dict(sorted(outcomes.items())),
        "scored": len(scored),
        "hoh_at": [{"loop": k, "mean": _mean(at(k)), "n": len(at(k)),
                    "pass_rate": _mean([1.0 if s >= PASS_THRESHOLD else 0.0 for s in at(k)])}
                   for k in range(1, loops + 1)],
        "by_key": {key: [_key_mean(scored, key, k) for k in range(1, loops + 1)] for key in keys},
        "final_mean": _mean([r["final_score"] for r in scored]),
        "pass_rate": _mean([1.0 if r["final_score"] >= PASS_THRESHOLD else 0.0 for r in scored]),
        "tokens": tokens,
        "cost_usd": round(sum(costs), 4) if costs else None,
        "tokens_per_point": round(scored_tokens / points, 1) if points and scored_tokens else None,
        "cost_per_point": round(scored_cost / points, 6) if points and scored_cost else None,
        "calibration": dict(sorted(calibration.items())),
        "errors": [{"task": r["task"], "outcome": str(r["outcome"]), "cause": r.get("cause"), "error": r["error"]}
                   for r in records if r["outcome"] in ("error", "not_gradable")],
        "invalid": invalid or [],
        "tasks": [task_row(r, loops) for r in records],
    }


def headline_name(metric: str | None, scored: list[dict[str, Any]]) -> str:
    """What the headline score is of, over the scored tasks (results.score_of decides it per grade)."""
    if metric is not None:
        return metric
    per_task = {tuple(reward_keys([r])) for r in scored}
    if all("reward" in keys or len(keys) == 1 for keys in per_task):
        names = {"reward" if "reward" in keys else keys[0] for keys in per_task if keys}
        return ", ".join(sorted(names)) or "reward"
    several = sorted({k for keys in per_task if "reward" not in keys and len(keys) > 1 for k in keys})
    return ("reward, else " if any("reward" in keys for keys in per_task) else "") + "the mean of " + \
        ", ".join(several)


def task_row(r: dict[str, Any], loops: int) -> dict[str, Any]:
    entries = r.get("loops") or []
    return {"task": r["task"], "outcome": str(r["outcome"]), "scored": is_scored(r),
            "scores": [score_at(r, k) for k in range(1, loops + 1)],
            "states": [str(entries[k - 1]["state"]) if k <= len(entries) else None for k in range(1, loops + 1)],
            "rewards_at": [entries[k - 1].get("rewards") if k <= len(entries) else None for k in range(1, loops + 1)],
            "final_score": r.get("final_score"), "rewards": entries[-1].get("rewards") if entries else None,
            "tokens": r.get("tokens"), "cost_usd": r.get("cost_usd"), "wall_seconds": r.get("wall_seconds"),
            "error": r.get("error"), "cause": r.get("cause"), "note": r.get("note"), "note_cause": r.get("note_cause"),
            "calibration": r.get("calibration")}


def _key_mean(records: list[dict[str, Any]], key: str, k: int) -> dict[str, Any]:
    values = []
    for r in records:
        entries = r.get("loops") or []
        if k <= len(entries):
            rewards = entries[k - 1].get("rewards") or {}
            if key in rewards:
                values.append(float(rewards[key]))
    return {"loop": k, "mean": _mean(values), "n": len(values)}


def fmt(value: float | int | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    return f"{value:,}" if isinstance(value, int) else f"{value:.{digits}f}"


def seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}s"


def cell(t: dict[str, Any], k: int, digits: int = 3) -> str:
    """Loop k of a task row: its score (each key beside it when there are several), else its state."""
    score, state = t["scores"][k - 1], t["states"][k - 1]
    if score is None:
        return STATE_MARK.get(state or "", "–")
    rewards = t["rewards_at"][k - 1] or {}
    keys = "" if len(rewards) < 2 else " (" + ", ".join(f"{key} {fmt(float(v), 2)}" for key, v in
                                                       sorted(rewards.items())) + ")"
    return fmt(score, digits) + keys


def why(t: dict[str, Any]) -> str:
    """What a task's note says first: the cause of its error, else its calibration, else Harbor's note."""
    calibration = t.get("calibration") or {}
    if t["outcome"] == "not_gradable":
        return t.get("cause") or calibration.get("reason") or ""
    return t.get("cause") or t.get("note_cause") or ""


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
             f"suite `{s.get('suite')}` · env `{s.get('env')}` · {label(s)} · {s.get('loops')} loops · "
             f"headline `{summary['headline']}`", "",
             f"{summary['trials']} tasks · " + ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items())
             + f" · scored {summary['scored']} · calibration "
             + ", ".join(f"{k} {v}" for k, v in summary["calibration"].items()), "",
             "| " + " | ".join([f"HoH@{k}" for k in ks] + ["pass rate", "tokens in/out", "tokens/point", "cost"]) + " |",
             "|" + "---|" * (len(ks) + 4),
             "| " + " | ".join([fmt(e["mean"]) for e in summary["hoh_at"]]
                               + [fmt(summary["pass_rate"], 2), f"{tok['input']:,}/{tok['output']:,}",
                                  fmt(summary["tokens_per_point"], 1), cost]) + " |"]
    for key, curve in summary["by_key"].items():
        lines.append(f"\n`{key}`: " + " → ".join(f"@{e['loop']} {fmt(e['mean'])} (n={e['n']})" for e in curve))
    lines += ["", "| task | outcome | " + " | ".join(f"@{k}" for k in ks) + " | tokens | wall | cause |",
              "|" + "---|" * (len(ks) + 5)]
    for t in summary["tasks"]:
        total = (t["tokens"] or {}).get("input", 0) + (t["tokens"] or {}).get("output", 0) if t["tokens"] else None
        note = why(t).replace("|", "\\|")
        lines.append(f"| {t['task']} | {t['outcome']} | " + " | ".join(cell(t, k) for k in ks)
                     + f" | {fmt(total)} | {seconds(t['wall_seconds'])} | {note} |")
    for bad in summary["invalid"]:
        lines.append(f"| {bad['task']} | invalid | " + " | ".join("–" for _ in ks) + f" | – | – | {bad['reason']} |")
    if summary["errors"]:
        lines += ["", "## Errors and tasks not gradable here (full text)", ""]
        for e in summary["errors"]:
            lines += [f"### {e['task']} ({e['outcome']})", "", "```", str(e["error"]), "```", ""]
            telling = next(((t.get("calibration") or {}).get("telling") for t in summary["tasks"]
                            if t["task"] == e["task"]), None)
            lines += [f"- {line}" for line in telling or []]
    return "\n".join(lines) + "\n"


# ---- comparisons ------------------------------------------------------------------------------------
def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """B against A over the tasks both scored: HoH@k (only for loops both ran), per key, final, pass rate,
    tokens, per-task final deltas, B's win rate over A. What does not match is said, never averaged over."""
    by_a = {t["task"]: t for t in a["tasks"]}
    by_b = {t["task"]: t for t in b["tasks"]}
    both = sorted(t for t in by_a.keys() & by_b.keys() if by_a[t]["scored"] and by_b[t]["scored"])
    tasks = []
    for task in sorted(by_a.keys() | by_b.keys()):
        sa, sb = by_a.get(task, {}).get("final_score"), by_b.get(task, {}).get("final_score")
        ta, tb = by_a.get(task), by_b.get(task)
        note = "only in A" if tb is None else "only in B" if ta is None else \
            "" if task in both else (why(ta) or why(tb) or f"not scored in {'A' if not ta['scored'] else 'B'}")
        tasks.append({"task": task, "a": sa, "b": sb, "delta": _delta(sa, sb) if task in both else None,
                      "note": note})
    la, lb = len(a["hoh_at"]), len(b["hoh_at"])

    def mean_over(s: dict[str, Any], k: int, key: str | None = None) -> float | None:
        rows = {t["task"]: t for t in s["tasks"]}
        values = []
        for task in both:
            t = rows[task]
            if k > len(t["scores"]):
                return None
            value = t["scores"][k - 1] if key is None else (t["rewards_at"][k - 1] or {}).get(key)
            if value is not None:
                values.append(float(value))
        return _mean(values)

    rows = [{"metric": f"HoH@{k}", "a": mean_over(a, k) if k <= la else None, "b": mean_over(b, k) if k <= lb else None}
            for k in range(1, max(la, lb) + 1)]
    keys = sorted(set(a.get("keys") or []) & set(b.get("keys") or []))
    if len(keys) > 1:  # each reward key at the last loop both ran
        k = min(la, lb)
        rows += [{"metric": f"{key} @{k}", "a": mean_over(a, k, key), "b": mean_over(b, k, key)} for key in keys]
    rows += [{"metric": "pass rate", "a": a["pass_rate"], "b": b["pass_rate"]},
             {"metric": "tokens in+out", "a": a["tokens"]["input"] + a["tokens"]["output"],
              "b": b["tokens"]["input"] + b["tokens"]["output"]},
             {"metric": "tokens/point", "a": a["tokens_per_point"], "b": b["tokens_per_point"]},
             {"metric": "cost $", "a": a.get("cost_usd"), "b": b.get("cost_usd")},
             {"metric": "cost $/point", "a": a.get("cost_per_point"), "b": b.get("cost_per_point")},
             {"metric": "errors", "a": len(a["errors"]), "b": len(b["errors"])}]
    for row in rows:
        row["delta"] = _delta(row["a"], row["b"])
    notes = []
    if by_a.keys() != by_b.keys():
        notes.append(f"the runs cover different tasks ({len(by_a.keys() - by_b.keys())} only in A, "
                     f"{len(by_b.keys() - by_a.keys())} only in B): HoH@k compares the {len(both)} both scored")
    elif len(both) < max(a["scored"], b["scored"]):
        notes.append(f"HoH@k compares the {len(both)} tasks both runs scored")
    if la != lb:
        notes.append(f"A ran {la} loop{'s' * (la != 1)} and B {lb}: HoH@k beyond {min(la, lb)} has no value for "
                     "the shorter run")
    if a.get("headline") != b.get("headline"):
        notes.append(f"the headline metrics differ (A {a.get('headline')}, B {b.get('headline')})")
    return {"schema_version": SUMMARY_SCHEMA_VERSION, "a": label(a["settings"]), "b": label(b["settings"]),
            "rows": rows, "tasks": tasks, "matched": both, "notes": notes, "b_win_rate": win_rate(b, a)}


def _delta(x: float | int | None, y: float | int | None) -> float | int | None:
    if x is None or y is None:
        return None
    return y - x if isinstance(x, int) and isinstance(y, int) else round(y - x, 4)


def pair_counts(a: dict[str, Any], b: dict[str, Any]) -> tuple[int, int, int]:
    """(wins, ties, losses) of A against B over the tasks both scored, on the final score."""
    finals_b = {t["task"]: t["final_score"] for t in b["tasks"] if t.get("scored")}
    wins = ties = losses = 0
    for t in a["tasks"]:
        if not t.get("scored") or t["task"] not in finals_b:
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
