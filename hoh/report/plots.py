"""The report's plots: matplotlib figures inlined as SVG, each with the data it draws.

Why matplotlib SVG (measured on this project's reports, mid-2026 releases):
- plotly.min.js alone is 4.8 MB (plotly 7.1) and Bokeh's inline BokehJS 3.9 MB (bokeh 3.9): either
  is over the 3 MB a 200-loop report may weigh before a single loop is drawn;
- Vega-Lite needs its JS too (0.9 MB via vl-convert, an 84 MB wheel that runs Deno to make it);
- matplotlib's SVG of a 200-loop plot is 60–150 KB, needs no script to show, renders the same in
  every browser and offline, and is deterministic (fixed hash salt, no date). The five workspace
  plots of a 200-loop run come to well under 1 MB.
What is lost is hover: each plot's exact numbers are embedded beside it as JSON (`data`) and every
bar carries an id `<plot>-<series>-<x>`, so the numbers stay one click (or one test) away.

matplotlib (a core dependency) is imported only when a report is drawn, never by `hoh --help`.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:
    from .bench_model import BenchReport
    from .data import RunModel

ROLE_COLOURS = {"planner": "#4c72b0", "developer": "#dd8452", "qa": "#55a868"}
VERDICT_COLOURS = {"pass": "#2ca02c", "partial": "#f0ad4e", "fail": "#d62728"}
ISSUE_COLOURS = {"open": "#d62728", "reopened": "#9467bd", "fixed_pending_verify": "#f0ad4e", "closed": "#2ca02c"}
RUN_COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c"]
OTHER = "#9e9e9e"
BARS_UP_TO = 60
PLOT_POINTS = 100
"""Past this many loops a workspace plot draws one mark per bucket of loops (the mean per loop, or the state
after the bucket's last loop) so its SVG and its drawing time stay the same at any length; the data beside
it keeps every loop."""


@dataclass
class Plot:
    """One figure: its element id, title, inline SVG and the series it draws."""

    name: str
    title: str
    svg: str
    data: dict[str, Any] = field(default_factory=dict)


def _figure(height: float = 3.0):
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("the HTML report draws with matplotlib, which is not installed: "
                         "pip install 'matplotlib>=3.8'") from None
    fig = Figure(figsize=(6.4, height), layout="constrained")
    return fig, fig.add_subplot()


def _svg(fig, name: str) -> str:
    """The figure as an inline <svg> element: text kept as text, no metadata or date (equal data
    gives equal bytes), and every id prefixed with the plot's name, since matplotlib numbers its
    groups per figure (`axes_1`, …) and several figures share one page."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": name}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Type": None, "Format": None})
    text = buf.getvalue()
    prefix = f"{name}-"

    def own(ident: str) -> str:
        return ident if ident.startswith(prefix) else prefix + ident

    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{own(m[1])}"', text[text.index("<svg"):])
    return re.sub(r'(url\(#|href="#)([^")]+)', lambda m: m[1] + own(m[2]), svg)


def _style(ax, xlabel: str, ylabel: str, counts: bool = False) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if counts:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_axisbelow(True)
    ax.grid(axis="y", alpha=0.3)


def _loop_axis(ax, xs: list[int]) -> None:
    """Loops on x: at least five loop-widths wide, so one loop is one bar among empty space rather than a
    block filling the plot on an axis of 0.6 … 1.4; ticks only at loops that exist while there are few."""
    lo, hi = min(xs), max(xs)
    pad = max(0.0, (4 - (hi - lo)) / 2)
    ax.set_xlim(lo - 0.5 - pad, hi + 0.5 + pad)
    if len(xs) <= 10:
        ax.set_xticks(xs)


def _marker(xs: list[int]) -> str | None:
    """A line through one point draws nothing: mark the points while there are few enough to tell apart."""
    return "o" if len(xs) <= 10 else "." if len(xs) <= BARS_UP_TO else None


def _si(ax) -> None:
    """Token counts as 15k / 1.5M rather than an axis-wide 1e7 offset."""
    from matplotlib.ticker import EngFormatter

    ax.yaxis.set_major_formatter(EngFormatter(sep=""))


def _legend_above(ax, entries: int) -> None:
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.01), fontsize=8, ncols=min(entries, 4), frameon=False)


def _bars(ax, plot: str, series: str, xs: list[int], heights: list[float], bottoms: list[float] | None = None,
          width: int = 1, **kw: Any) -> None:
    """One bar per x, id `<plot>-<series>-<x>`; a bucket of `width` loops from x is one bar across them."""
    bars = ax.bar([x + (width - 1) / 2 for x in xs], heights, bottom=bottoms, width=0.8 * width, **kw)
    for x, bar in zip(xs, bars):
        bar.set_gid(f"{plot}-{series}-{x}")


class Buckets:
    """Loops on x, in buckets of `width` (1 up to PLOT_POINTS loops): what each plot draws."""

    def __init__(self, xs: list[int]):
        self.width = -(-len(xs) // PLOT_POINTS)
        self.groups = [list(range(k, min(k + self.width, len(xs)))) for k in range(0, len(xs), self.width)]
        self.xs = [xs[g[0]] for g in self.groups]
        self.last_xs = [xs[g[-1]] for g in self.groups]

    def mean(self, values: list[float | None]) -> list[float]:
        out = []
        for g in self.groups:
            known = [values[k] for k in g if values[k] is not None]
            out.append(sum(known) / len(known) if known else float("nan"))
        return out

    def last(self, values: list[Any]) -> list[Any]:
        return [values[g[-1]] for g in self.groups]

    def note(self, what: str = "mean per loop") -> str:
        return "" if self.width == 1 else f" ({what} of each {self.width} loops)"


def _stacked(ax, plot: str, xs: list[int], stacks: dict[str, list[float]], colours: dict[str, str],
             width: int = 1) -> None:
    """Stacked bars, one id per bar; past BARS_UP_TO loops a stacked step area (one id per series),
    which reads better at a few pixels per loop and keeps the SVG small."""
    if len(xs) > BARS_UP_TO:
        areas = ax.stackplot(xs, *stacks.values(), step="mid", colors=[colours.get(s, OTHER) for s in stacks],
                             labels=[s.replace("_", " ") for s in stacks], lw=0)
        for series, area in zip(stacks, areas):
            area.set_gid(f"{plot}-{series}")
        return
    bottom = [0.0] * len(xs)
    for series, values in stacks.items():
        _bars(ax, plot, series, xs, values, bottom, width, color=colours.get(series, OTHER),
              label=series.replace("_", " "))
        bottom = [b + v for b, v in zip(bottom, values)]


# ---- one workspace ---------------------------------------------------------------------------------
def workspace_plots(run: RunModel) -> list[Plot]:
    """Verdicts and criteria, issues by status, tokens and cost per role, cumulative cost, wall time."""
    loops = [lp for lp in run.loops if lp.finished]
    if not loops:
        return []
    xs = [lp.loop for lp in loops]
    roles, b = list(ROLE_COLOURS), Buckets(xs)
    return [_verdicts(loops, xs, b), _issues(loops, xs, b), _tokens(loops, xs, roles, b), _cumulative(loops, xs, b),
            _wall_time(loops, xs, roles, b)]


def _verdicts(loops, xs, b: Buckets) -> Plot:
    data = {"loop": xs, "status": [lp.status for lp in loops],
            "criteria_verified": [lp.criteria_verified for lp in loops],
            "criteria_total": [lp.criteria_total for lp in loops]}
    fig, ax = _figure()
    _bars(ax, "verdicts", "total", b.xs, b.mean(data["criteria_total"]), color="none", edgecolor="#bbbbbb",
          label="criteria planned", width=b.width)
    # a bucket's colour: its most frequent verdict (the worse one on a tie)
    order = {s: n for n, s in enumerate(("fail", "partial", "pass"))}
    common = [max(sorted({data["status"][k] for k in g}, key=lambda s: order.get(s, -1)),
                  key=[data["status"][k] for k in g].count) for g in b.groups]
    colours = [VERDICT_COLOURS.get(s, OTHER) for s in common]
    _bars(ax, "verdicts", "verified", b.xs, b.mean(data["criteria_verified"]), color=colours, width=b.width)
    from matplotlib.patches import Patch

    shown = [s for s in (*VERDICT_COLOURS, "other") if s in data["status"] or
             (s == "other" and any(x not in VERDICT_COLOURS for x in data["status"]))]
    ax.legend(handles=[Patch(edgecolor="#bbbbbb", facecolor="none", label="criteria planned")]
              + [Patch(color=VERDICT_COLOURS.get(s, OTHER), label=f"verified · {s}") for s in shown],
              loc="lower left", bbox_to_anchor=(0, 1.01), fontsize=8, ncols=len(shown) + 1, frameon=False)
    ax.set_ylim(0, max(data["criteria_total"] + [1]) * 1.05)
    _style(ax, "loop", "criteria", counts=b.width == 1)
    _loop_axis(ax, xs)
    return Plot("verdicts", "Verdict and acceptance criteria verified per loop" +
                b.note("mean per loop and the most frequent verdict"), _svg(fig, "verdicts"), data)


def _issues(loops, xs, b: Buckets) -> Plot:
    statuses = ("closed", "fixed_pending_verify", "open", "reopened")
    stacks = {s: [(lp.issues or {}).get(s, 0) for lp in loops] for s in statuses}
    fig, ax = _figure()
    _stacked(ax, "issues", b.last_xs, {s: b.last(v) for s, v in stacks.items()}, ISSUE_COLOURS)
    _legend_above(ax, 4)
    ax.set_ylim(0, max([sum(v) for v in zip(*stacks.values())] + [1]) * 1.05)
    _style(ax, "loop", "issues in the ledger", counts=True)
    _loop_axis(ax, xs)
    return Plot("issues", "Issues by status after each loop", _svg(fig, "issues"), {"loop": xs, **stacks})


def _tokens(loops, xs, roles, b: Buckets) -> Plot:
    stacks = {r: [lp.tokens(r) for lp in loops] for r in roles}
    cost = [lp.cost() for lp in loops]
    fig, ax = _figure()
    _stacked(ax, "tokens", b.xs, {r: b.mean(v) for r, v in stacks.items()}, ROLE_COLOURS, b.width)
    _style(ax, "loop", "tokens (input + output)")
    _loop_axis(ax, xs)
    _si(ax)
    handles, labels = ax.get_legend_handles_labels()
    if any(c is not None for c in cost):
        ax2 = ax.twinx()
        line, = ax2.plot(b.xs, b.mean(cost), color="black", marker=_marker(b.xs), lw=1, label="cost (USD)",
                         gid="tokens-cost")
        ax2.set_ylabel("USD")
        ax2.set_ylim(bottom=0)
        handles, labels = handles + [line], labels + ["cost (USD)"]
    ax.legend(handles, labels, loc="lower left", bbox_to_anchor=(0, 1.01), fontsize=8, ncols=4, frameon=False)
    ax.set_ylim(0, max([sum(v) for v in zip(*(b.mean(v) for v in stacks.values()))] + [1]) * 1.05)
    title = "Tokens per role per loop" + (", and cost" if any(c is not None for c in cost) else
                                          " (the harness reported no cost)") + b.note()
    return Plot("tokens", title, _svg(fig, "tokens"), {"loop": xs, **stacks, "cost_usd": cost})


def _cumulative(loops, xs, b: Buckets) -> Plot:
    tokens, cost, total_t, total_c, known = [], [], 0, 0.0, False
    for lp in loops:
        total_t += lp.tokens()
        if (c := lp.cost()) is not None:
            total_c, known = total_c + c, True
        tokens.append(total_t)
        cost.append(round(total_c, 6) if known else None)
    data = {"loop": xs, "tokens": tokens, "cost_usd": cost}
    xs, tokens, cost = b.last_xs, b.last(tokens), b.last(cost)
    fig, ax = _figure()
    if known:
        ax.plot(xs, [c if c is not None else float("nan") for c in cost], color="black", lw=1.5, gid="cumulative-cost",
                marker=_marker(xs))
        _style(ax, "loop", "cumulative cost (USD)")
        _loop_axis(ax, xs)
        ax2 = ax.twinx()
        ax2.plot(xs, tokens, color=ROLE_COLOURS["planner"], lw=1, ls="--", gid="cumulative-tokens",
                 marker=_marker(xs))
        ax2.set_ylabel("cumulative tokens", color=ROLE_COLOURS["planner"])
        ax2.set_ylim(bottom=0)
        _si(ax2)
        title = "Cumulative cost (solid) and tokens (dashed)"
    else:
        ax.plot(xs, tokens, color=ROLE_COLOURS["planner"], lw=1.5, gid="cumulative-tokens", marker=_marker(xs))
        _style(ax, "loop", "cumulative tokens")
        _loop_axis(ax, xs)
        _si(ax)
        title = "Cumulative tokens (the harness reported no cost)"
    ax.set_ylim(bottom=0)
    return Plot("cumulative", title, _svg(fig, "cumulative"), data)


def _wall_time(loops, xs, roles, b: Buckets) -> Plot:
    stacks = {r: [round(lp.role_seconds.get(r, 0.0), 3) for lp in loops] for r in roles}
    drawn = {r: b.mean(v) for r, v in stacks.items()}
    fig, ax = _figure()
    _stacked(ax, "time", b.xs, drawn, ROLE_COLOURS, b.width)
    _legend_above(ax, 3)
    ax.set_ylim(0, max([sum(v) for v in zip(*drawn.values())] + [1]) * 1.05)
    _style(ax, "loop", "seconds (all attempts)")
    _loop_axis(ax, xs)
    return Plot("time", "Wall time per role per loop" + b.note(), _svg(fig, "time"), {"loop": xs, **stacks})


# ---- a benchmark -----------------------------------------------------------------------------------
def bench_plots(report: BenchReport) -> list[Plot]:
    """HoH@k curves (mean with the per-task range) of every run on one chart; each reward key's curve when
    the keys say more than the headline; final score per task, a task not scored marked with its outcome."""
    if not any(run.trials for run in report.runs):
        return []
    keys = [_keys(report)] if any(run.shows_keys() for run in report.runs) else []
    return [_curves(report), *keys, _final_by_task(report)]


def _curves(report: BenchReport) -> Plot:
    fig, ax = _figure()
    data: dict[str, Any] = {"runs": []}
    top = 1.0
    for n, run in enumerate(report.runs):
        colour = RUN_COLOURS[n % len(RUN_COLOURS)]
        curve = run.curve()
        ks = [p["loop"] for p in curve if p["mean"] is not None]
        means = [p["mean"] for p in curve if p["mean"] is not None]
        data["runs"].append({"label": run.label, "headline": run.headline, "curve": curve})
        if not ks:
            continue
        lows = [p["min"] for p in curve if p["mean"] is not None]
        highs = [p["max"] for p in curve if p["mean"] is not None]
        top = max([top, *highs])
        if run.one_pass and report.max_loops > 1:
            # a one-pass run (vanilla, the oracle) is a reference level across every k; a hoh run with
            # fewer loops is not: it has no HoH@k past its last loop
            ax.axhline(means[0], color=colour, ls="--", lw=1.5, label=f"{run.label} (one pass)", gid=f"curves-mean-{n}")
            continue
        ax.fill_between(ks, lows, highs, color=colour, alpha=0.12, lw=0, gid=f"curves-range-{n}")
        ax.plot(ks, means, color=colour, marker="o", ms=_marker_size(n), lw=2, label=run.label, gid=f"curves-mean-{n}")
    ax.set_xlim(0.75, max([r.loops for r in report.runs] + [1]) + 0.25)
    ax.set_ylim(0, top * 1.08)
    _style(ax, "loop k", "headline score (mean; band: task range)")
    _legend_above(ax, len(report.runs))
    return Plot("curves", "HoH@k: mean headline score after loop k over the scored tasks, with the range over tasks",
                _svg(fig, "curves"), data)


def _marker_size(n: int) -> float:
    """Each later run's markers smaller, drawn on top: two runs with equal means both stay visible."""
    return max(4.0, 9.0 - 2 * n)


KEY_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
KEY_STYLES = ["-", "--", ":", "-."]


def _keys(report: BenchReport) -> Plot:
    """One curve per (run, reward key): the run's colour, the key's marker and line style."""
    fig, ax = _figure()
    data: dict[str, Any] = {"runs": []}
    keys = sorted({key for run in report.runs for key in run.keys()})
    top, lines = 1.0, 0
    for n, run in enumerate(report.runs):
        entry: dict[str, Any] = {"label": run.label, "keys": {}}
        for key in run.keys():
            curve = run.key_curve(key)
            entry["keys"][key] = curve
            ks = [p["loop"] for p in curve if p["mean"] is not None]
            means = [p["mean"] for p in curve if p["mean"] is not None]
            if not ks:
                continue
            top = max([top, *means])
            i = keys.index(key)
            ax.plot(ks, means, color=RUN_COLOURS[n % len(RUN_COLOURS)], marker=KEY_MARKERS[i % len(KEY_MARKERS)],
                    ms=_marker_size(n), ls=KEY_STYLES[i % len(KEY_STYLES)], lw=1.8, label=f"{run.label}: {key}",
                    gid=f"keys-{n}-{key}")
            lines += 1
        data["runs"].append(entry)
    ax.set_xlim(0.75, report.max_loops + 0.25)
    ax.set_ylim(0, top * 1.08)
    _style(ax, "loop k", "reward (mean over the scored tasks)")
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.01), fontsize=8, ncols=2, frameon=False)
    return Plot("keys", "HoH@k per reward key: each key's mean after loop k", _svg(fig, "keys"), data)


def _final_by_task(report: BenchReport) -> Plot:
    tasks = report.task_ids()
    runs = report.runs
    fig, ax = _figure(max(2.2, 0.32 * len(tasks) * max(1, len(runs)) ** 0.5 + 1))
    height = 0.8 / max(1, len(runs))
    data: dict[str, Any] = {"tasks": tasks, "runs": []}
    for n, run in enumerate(runs):
        finals = [run.final_score(t) for t in tasks]
        trials = [run.trial(t) for t in tasks]
        # a task not scored has no bar: its outcome is written where the bar would start, never a 0
        unscored = {t: (trial.outcome if trial else "missing") for t, trial in zip(tasks, trials)
                    if trial is None or not trial.scored()}
        data["runs"].append({"label": run.label, "final": finals, "not_scored": unscored})
        ys = [i + n * height for i in range(len(tasks))]
        bars = ax.barh(ys, [f or 0 for f in finals], height=height * 0.9, color=RUN_COLOURS[n % len(RUN_COLOURS)],
                       label=run.label)
        for task, bar, y in zip(tasks, bars, ys):
            bar.set_gid(f"final-{n}-{task}")
            if task in unscored:
                word = "not in this run" if unscored[task] == "missing" else unscored[task].replace("_", " ")
                ax.text(0.01, y, word, va="center", ha="left", fontsize=7,
                        color="#5f6b76", style="italic", gid=f"final-{n}-{task}-state")
    ax.set_yticks([i + height * (len(runs) - 1) / 2 for i in range(len(tasks))], tasks)
    ax.invert_yaxis()
    ax.set_xlim(0, max([1.0] + [f for run in data["runs"] for f in run["final"] if f is not None]) * 1.05)
    ax.set_xlabel("final headline score (a task not scored: its outcome instead of a bar)")
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_axisbelow(True)
    ax.grid(axis="x", alpha=0.3)
    _legend_above(ax, len(runs))
    return Plot("final", "Final score per task", _svg(fig, "final"), data)
