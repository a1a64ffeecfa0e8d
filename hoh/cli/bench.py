"""`hoh bench`: run a benchmark suite (one hoh build per task, graded after every loop), report, list."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..errors import UsageError
from .usage import UsageCommand

# hoh.bench is imported inside the commands: `hoh --help` and the other commands never load it.

app = typer.Typer(name="bench", no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                  help="Benchmark runner: one hoh build per task, graded after every loop (HoH@1..@T).")
out = Console()
err = Console(stderr=True)

SUITE_HELP = "A Harbor task dir, a dir of Harbor tasks (e.g. benchmarks/examples), or programbench[:REGEX]."


class BenchProgress:
    """One live line per running trial (loop, role, grading) and an overall bar; quiet does nothing."""

    POLL_SECONDS = 0.5

    def __init__(self, console: Console, quiet: bool):
        self.console, self.quiet = console, quiet
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=20),
                                 MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True)
        self.overall = None
        self.running: dict[str, tuple[Any, Any]] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.poller = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> "BenchProgress":
        if not self.quiet:
            self.progress.start()
            self.poller.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        if not self.quiet:
            self.poller.join(timeout=2)
            self.progress.stop()

    def plan(self, specs: list, kept: list[str]) -> None:
        if kept:
            self.console.print(f"keeping {len(kept)} finished trial(s); running {len(specs)}")
        if not self.quiet:
            self.overall = self.progress.add_task("[bold]all trials", total=len(specs))

    def start(self, spec) -> None:
        line = None
        if not self.quiet:
            line = self.progress.add_task(f"{spec.task.id} · starting", total=int(spec.config.get("loops", 1)))
        with self.lock:
            self.running[spec.task.id] = (line, spec)

    def done(self, spec, record: dict[str, Any]) -> None:
        from ..bench.report import fmt
        with self.lock:
            line, _ = self.running.pop(spec.task.id, (None, None))
        scores = " ".join(f"@{s['loop']} {fmt(s['score'], 2)}" for s in record["scores"])
        note = f" · {record['error']}" if record.get("error") else ""
        self.console.print(f"{spec.task.id}: {record['outcome']} {scores} ({record['wall_seconds']:.1f}s){note}",
                           markup=False, highlight=False, soft_wrap=True)
        if line is not None:
            self.progress.remove_task(line)
            self.progress.advance(self.overall)

    def _poll(self) -> None:
        from ..bench.results import TrialPaths, read_progress
        while not self.stopped.wait(self.POLL_SECONDS):
            with self.lock:
                running = list(self.running.items())
            for task_id, (line, spec) in running:
                if line is None:
                    continue
                p = read_progress(TrialPaths(spec.root))
                loop, loops = p.get("loop", 0), p.get("loops", 1)
                phase = p.get("phase", "starting")
                attempt = f" (attempt {p['attempt']})" if p.get("attempt", 1) > 1 else ""
                self.progress.update(line, completed=max(0, loop - 1),
                                     description=f"{task_id} · loop {loop}/{loops} · {phase}{attempt}")


def render_summary(console: Console, summary: dict[str, Any]) -> None:
    from ..bench.report import fmt
    loops = [e["loop"] for e in summary["mean_score_by_loop"]]
    table = Table(show_edge=False, title=None)
    for col in ["task", "outcome", *[f"@{k}" for k in loops], "tokens", "wall", "note"]:
        table.add_column(col, overflow="fold" if col == "note" else "ellipsis")
    for t in summary["tasks"]:
        table.add_row(t["task"], t["outcome"], *[fmt(s) for s in t["by_loop"]], f"{t['tokens']:,}",
                      f"{fmt(t['wall_seconds'], 1)}s", (t["error"] or "")[:120])
    table.add_section()
    tokens = summary["tokens"]["input"] + summary["tokens"]["output"]
    table.add_row("[bold]mean", f"{summary['scored']}/{summary['trials']} scored",
                  *[fmt(e["mean"]) for e in summary["mean_score_by_loop"]], f"{tokens:,}",
                  f"{summary['wall_seconds']:.1f}s", "")
    console.print(table)
    cost = f" · cost ${summary['cost_usd']:.2f}" if summary.get("cost_usd") is not None else ""
    curve = " → ".join(f"HoH@{e['loop']} {fmt(e['mean'])}" for e in summary["mean_score_by_loop"])
    console.print(f"{curve} · pass rate {fmt(summary['pass_rate'], 2)} · outcomes "
                  + ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items()) + cost)


def interrupted(progress: BenchProgress) -> None:
    """Ctrl-C: stop the running trials' harness processes and leave at once, as after a kill -9;
    rerunning the same command resumes every unfinished trial from its journal."""
    from ..bench.trial import stop_harness
    progress.stopped.set()
    for _, spec in list(progress.running.values()):
        stop_harness(spec.root)
    progress.progress.stop()
    print("hoh: interrupted; rerun the same command to resume the unfinished trials", file=sys.stderr, flush=True)
    sys.stdout.flush()
    # Worker threads cannot be stopped from outside; leaving without joining them is what makes
    # this as immediate as a kill, and everything that finished is already on disk.
    os._exit(130)


@app.command(cls=UsageCommand)
def run(
    suite: str = typer.Argument(..., help=SUITE_HELP),
    out_dir: Path = typer.Option(Path("hoh-bench"), "--out", "-o", help="Run directory; rerun the same command "
                                 "to resume it.", rich_help_panel="Run"),
    harness: Optional[str] = typer.Option(None, "--harness", "-H", help="Harness CLI (scripted, oracle, codex, ...).",
                                          rich_help_panel="Harness"),
    model: Optional[str] = typer.Option(None, help="Model name for the harness.", rich_help_panel="Harness"),
    base_url: Optional[str] = typer.Option(None, help="Model endpoint (OpenAI-compatible; Anthropic for claude).",
                                           rich_help_panel="Harness"),
    api_key_env: Optional[str] = typer.Option(None, help="Env var holding the endpoint's API key.",
                                              rich_help_panel="Harness"),
    mode: str = typer.Option("hoh", "--mode", help="hoh | vanilla (one Developer pass) | continuation "
                             "(the harness re-run T times, no Planner/QA).", rich_help_panel="Mode"),
    ablate: list[str] = typer.Option([], "--ablate", help="Switch a mechanism off: plan-update | evidence | "
                                     "warm-start (repeatable; hoh mode).", rich_help_panel="Mode"),
    loops: Optional[int] = typer.Option(None, "--loops", "-n", min=1, help="T: loops per task, graded after each "
                                        "(default 3; 1 for vanilla and the oracle).", rich_help_panel="Mode"),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Trials in parallel.", rich_help_panel="Execution"),
    executor: str = typer.Option("local", "--executor", help="local | ray.",
                                 rich_help_panel="Execution"),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="An existing Ray cluster "
                                              "(e.g. 10.0.0.5:6379 or ray://host:10001).", rich_help_panel="Execution"),
    ray_cpus: float = typer.Option(1.0, "--ray-cpus-per-trial", help="CPUs Ray reserves per trial.",
                                   rich_help_panel="Execution"),
    task_filter: Optional[str] = typer.Option(None, "--filter", help="Only task ids matching this regex.",
                                              rich_help_panel="Run"),
    retry_errors: bool = typer.Option(False, "--retry-errors", help="Rerun trials whose record is an error.",
                                      rich_help_panel="Run"),
    grade_on_host: bool = typer.Option(False, "--grade-on-host", help="Run tests/test.sh with this machine's "
                                       "tools even when the task names a Docker environment.", rich_help_panel="Run"),
    config: Optional[Path] = typer.Option(None, "--config", help="A hoh.yaml every trial starts from.",
                                          rich_help_panel="Run"),
    set_: list[str] = typer.Option([], "--set", help="Override a hoh setting: key.sub=value (repeatable).",
                                   rich_help_panel="Run"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No live progress.", rich_help_panel="Run"),
) -> None:
    """Run SUITE: one hoh build per task, graded after every loop; finished trials of OUT are kept."""
    from ..bench import modes
    from ..bench.runner import bench_settings, run_bench
    from ..config import HohConfig, apply_overrides, load_config
    # A benchmark goes on past a failed role (the loop is recorded as failed); --set can change it.
    base = load_config(config) if config else HohConfig(policy={"on_role_failure": "continue"})
    cfg = apply_overrides(base, set_, {"harness.name": harness, "harness.model": model,
                                       "harness.base_url": base_url, "harness.api_key_env": api_key_env})
    settings = bench_settings(suite, config=cfg, mode=mode, ablate=ablate,
                              loops=loops or modes.default_loops(mode, cfg.harness.name),
                              task_filter=task_filter, grade_on_host=grade_on_host)
    options: dict[str, Any] = {"address": ray_address, "cpus_per_trial": ray_cpus} if executor == "ray" else {}
    with BenchProgress(err, quiet) as progress:
        try:
            result = run_bench(settings, out_dir, executor=executor, jobs=jobs, retry_errors=retry_errors,
                               executor_options=options, on_plan=progress.plan, on_start=progress.start,
                               on_done=progress.done)
        except KeyboardInterrupt:
            interrupted(progress)
    render_summary(out, result.summary)
    out.print(f"records: {result.paths.trials}/*/trial.json · summary: {result.paths.summary_md}",
              soft_wrap=True, markup=False, highlight=False)
    if any(r["outcome"] == "error" for r in result.records):
        err.print("some trials ended in error; rerun with --retry-errors to resume them", markup=False)
        raise typer.Exit(1)


@app.command(cls=UsageCommand)
def report(
    out_dir: Path = typer.Argument(..., help="A run directory (-o of hoh bench run)."),
    compare: list[Path] = typer.Option([], "--compare", help="Another run directory to show beside OUT "
                                       "(repeatable: vanilla, continuation, ablations...)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    html: bool = typer.Option(False, "--html", help="Write a self-contained HTML report with HoH@k curves."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="With --html: the file to write "
                                          "(default: OUT/report.html)."),
) -> None:
    """Summarise a run (mean score per loop, pass rate, tokens); with --compare, per-task deltas."""
    from ..bench.report import fmt
    from ..bench.runner import compare_runs, report_run
    if html:
        if as_json:
            raise UsageError("--html and --json are two outputs; choose one")
        from ..report import write_bench_report

        path, bench = write_bench_report([out_dir, *compare], output)
        for run in bench.runs:
            curve = " → ".join(f"HoH@{p['loop']} {fmt(p['mean'])}" for p in run.curve())
            print(f"{run.label}: {curve}")
        print(f"report: {path}")
        return
    if output is not None:
        raise UsageError("-o names the HTML file; add --html")
    if not compare:
        paths, summary = report_run(out_dir)
        if as_json:
            print(json.dumps(summary, indent=2))
            return
        render_summary(out, summary)
        out.print(f"summary: {paths.summary_md}")
        return
    comparisons = [compare_runs(out_dir, other) for other in compare]
    if as_json:
        print(json.dumps(comparisons[0][0] if len(comparisons) == 1 else [c for c, _ in comparisons], indent=2))
        return
    for other, (cmp, _) in zip(compare, comparisons):
        render_comparison(out_dir, other, cmp)


def render_comparison(out_dir: Path, other: Path, cmp: dict[str, Any]) -> None:
    from ..bench.report import fmt
    out.print(f"A = {out_dir}: {cmp['a']}\nB = {other}: {cmp['b']}", markup=False, highlight=False)
    for title, rows, key in (("metric", cmp["rows"], "metric"), ("task", cmp["tasks"], "task")):
        table = Table(show_edge=False)
        for col in (title, "A", "B", "B − A"):
            table.add_column(col)
        for row in rows:
            table.add_row(row[key], fmt(row["a"]), fmt(row["b"]), fmt(row["delta"]))
        out.print(table)


@app.command("list", cls=UsageCommand)
def list_tasks(
    suite: str = typer.Argument(..., help=SUITE_HELP),
    task_filter: Optional[str] = typer.Option(None, "--filter", help="Only task ids matching this regex."),
    grade_on_host: bool = typer.Option(False, "--grade-on-host", help="As for run: ignore Docker environments."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List a suite's tasks with their metadata, and whether each can be graded on this machine."""
    from ..bench.tasks import load_suite
    from ..bench.verifier import unavailable_reasons
    found = load_suite(suite, task_filter)
    rows = []
    for task in found.tasks:
        reasons = unavailable_reasons(task, grade_on_host=grade_on_host) if task.valid else []
        grading = "invalid" if not task.valid else "grader_unavailable" if reasons else "ok"
        rows.append({"id": task.id, "name": task.name, "description": task.description, "kind": task.kind,
                     "metadata": task.metadata, "grading": grading,
                     "reasons": list(task.problems) + reasons})
    if as_json:
        print(json.dumps({"suite": found.spec, "tasks": rows}, indent=2, default=str))
        return
    table = Table(show_edge=False, show_lines=True)
    for col in ("task", "description", "metadata", "grading"):
        table.add_column(col, overflow="fold")
    for row in rows:
        meta = ", ".join(f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}"
                         for k, v in row["metadata"].items() if v not in (None, "", [], False))
        grading = row["grading"] + "".join(f"\n· {r}" for r in row["reasons"])
        table.add_row(row["id"], row["description"] or row["name"], meta, grading)
    out.print(table)
    counts = {g: sum(1 for r in rows if r["grading"] == g) for g in ("ok", "grader_unavailable", "invalid")}
    out.print(f"{len(rows)} tasks in {found.spec}: " + ", ".join(f"{k} {v}" for k, v in counts.items() if v),
              markup=False, highlight=False)


if __name__ == "__main__":  # pragma: no cover - `hoh bench` is the entry point
    sys.exit(app())
