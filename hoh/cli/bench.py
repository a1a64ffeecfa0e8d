"""`hoh bench`: run a suite on Harbor (HoH@1..@T, each loop graded by Harbor's verifier), report, list."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from ..errors import Interrupted, UsageError
from .console import err as err_console
from .bench_render import check_line, plain, render_check, render_comparison, render_summary, task_line
from .console import out as out_console
from .usage import UsageCommand

# hoh.bench and rich's consoles and tables are imported inside the commands: `hoh --help` and the
# other commands never load them.

app = typer.Typer(name="bench", no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                  help="Benchmarks on Harbor: one hoh run per task, every loop graded by the task's verifier (HoH@1..@T).")

SUITE_HELP = "A Harbor task dir, a dir of Harbor tasks, a Harbor dataset (NAME[@VERSION]), or programbench[:REGEX]."


@app.command(cls=UsageCommand)
def run(
    suite: str = typer.Argument(..., help=SUITE_HELP),
    out_dir: Path = typer.Option(Path("hoh-bench"), "--out", "-o", help="Run directory (Harbor's job dirs go "
                                 "under OUT/jobs); rerun the same command to resume it.", rich_help_panel="Run"),
    env: str = typer.Option("docker", "--env", "-e", help="Harbor environment: docker, podman, daytona, modal, ... "
                            "or module.path:ClassName.", rich_help_panel="Run"),
    harness: Optional[str] = typer.Option(None, "--harness", "-H", help="Harness CLI hoh drives (codex, opencode, pi, "
                                          "claude, scripted, package.module:Class; default: the --config's "
                                          "harness.name), or oracle (Harbor's oracle agent).",
                                          rich_help_panel="Harness"),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model name for the harness.",
                                        rich_help_panel="Harness"),
    base_url: Optional[str] = typer.Option(None, help="Model endpoint, as the task environment reaches it.",
                                           rich_help_panel="Harness"),
    api_key_env: Optional[str] = typer.Option(None, help="Env var holding the endpoint's API key.",
                                              rich_help_panel="Harness"),
    mode: str = typer.Option("hoh", "--mode", help="hoh | vanilla (one Developer pass) | continuation "
                             "(the harness re-run T times, no Planner/QA).", rich_help_panel="Mode"),
    ablate: list[str] = typer.Option([], "--ablate", help="Switch a mechanism off: plan-update | evidence | "
                                     "warm-start (repeatable; hoh mode).", rich_help_panel="Mode"),
    loops: Optional[int] = typer.Option(None, "--loops", "-n", min=1, help="T: loops per task, each graded "
                                        "(default 3; 1 for vanilla and the oracle).", rich_help_panel="Mode"),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Harbor trials at once, over all tasks.",
                             rich_help_panel="Run"),
    include: list[str] = typer.Option([], "--include", "-i", help="Only tasks whose name matches this glob "
                                      "(repeatable).", rich_help_panel="Run"),
    config: Optional[Path] = typer.Option(None, "--config", help="A hoh.yaml every trial starts from.",
                                          rich_help_panel="Run"),
    set_: list[str] = typer.Option([], "--set", help="Override a hoh setting: key.sub=value (repeatable).",
                                   rich_help_panel="Run"),
    programbench_download: bool = typer.Option(False, "--programbench-download", help="ProgramBench: fetch test "
                                               "data missing here from its hub (with a timeout).",
                                               rich_help_panel="Run"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No line per task as it starts and ends.",
                               rich_help_panel="Run"),
    calibrate: bool = typer.Option(True, "--calibrate/--no-calibrate", help="First grade each task's reference "
                                   "solution here; a task it cannot bring to the maximum is not gradable here.",
                                   rich_help_panel="Grading"),
    metric: Optional[str] = typer.Option(None, "--metric", help="The reward key the headline HoH@k is of "
                                         "(default: reward, the only key, or the mean of the keys).",
                                         rich_help_panel="Grading"),
    agent_timeout_multiplier: Optional[float] = typer.Option(None, "--agent-timeout-multiplier", help="Harbor's: "
                                                             "the task's agent timeout × this (the agent job).",
                                                             rich_help_panel="Harbor"),
    agent_kwargs: list[str] = typer.Option([], "--ak", help="Harbor's: an agent kwarg KEY=VALUE (hoh's agent options, "
                                           "or the oracle's; repeatable).", rich_help_panel="Harbor"),
    agent_env: list[str] = typer.Option([], "--ae", help="Harbor's: a variable for the agent, NAME=VALUE or NAME (its "
                                        "value here); only the name is stored (repeatable).", rich_help_panel="Harbor"),
    environment_kwargs: list[str] = typer.Option([], "--ek", help="Harbor's: an environment kwarg KEY=VALUE "
                                                 "(repeatable).", rich_help_panel="Harbor"),
) -> None:
    """Run SUITE on Harbor: per task one agent trial (hoh, or Harbor's oracle), then one grading trial per loop."""
    from ..bench import settings as s
    from ..bench.runner import bench_settings, frozen_config, run_bench
    out, err = out_console(), err_console()
    env_values = s.parse_agent_env(agent_env)
    settings = bench_settings(suite, env=env, harness=harness, model=model, base_url=base_url,
                              api_key_env=api_key_env, mode=mode, ablate=ablate, include=include,
                              loops=loops or s.default_loops(mode, harness), hoh=frozen_config(config),
                              overrides=set_, programbench_download=programbench_download, calibrate=calibrate,
                              agent_timeout_multiplier=agent_timeout_multiplier,
                              agent_kwargs=s.parse_kwargs("--ak", agent_kwargs),
                              agent_env=list(env_values), environment_kwargs=s.parse_kwargs("--ek", environment_kwargs))

    def planned(total: int, done: int) -> None:
        if not quiet and done:
            plain(err, f"{done} of {total} tasks already ran in {out_dir}; running the rest")

    def started(key: str, what: str) -> None:
        if not quiet:
            plain(err, f"{key}: {STARTS[what]} …")

    def finished(record: dict[str, Any]) -> None:
        if not quiet:
            plain(err, task_line(record))

    try:
        result = run_bench(settings, out_dir, jobs=jobs, agent_env=env_values, on_plan=planned, on_start=started,
                           on_done=finished, metric=metric)
    except KeyboardInterrupt:
        raise Interrupted("interrupted; Harbor stopped its trials; rerun the same command to resume them") from None
    render_summary(out, result.summary)
    plain(out, f"Harbor jobs: {result.paths.jobs} (harbor view {result.paths.jobs}) · summary: {result.paths.summary_md}")
    if result.summary["errors"] or any(r["outcome"] == "pending" for r in result.records):
        plain(err, "some tasks ended in error or are not gradable here (listed above with the cause)")
        raise typer.Exit(1)


STARTS = {"calibrate": "grading its reference solution", "agent": "agent trial", "grade": "grading each loop"}


@app.command(cls=UsageCommand)
def check(
    suite: str = typer.Argument(..., help=SUITE_HELP),
    out_dir: Path = typer.Option(Path("hoh-check"), "--out", "-o", help="Run directory (Harbor's job dirs go under "
                                 "OUT/jobs); rerun the same command to resume it."),
    env: str = typer.Option("docker", "--env", "-e", help="Harbor environment: docker, podman, daytona, modal, ... "
                            "or module.path:ClassName."),
    include: list[str] = typer.Option([], "--include", "-i", help="Only tasks whose name matches this glob "
                                      "(repeatable)."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Harbor trials at once."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Can SUITE be graded here? Each task's reference solution, graded by its verifier in ENV (no agent)."""
    from ..bench.runner import bench_settings, run_bench
    out, err = out_console(), err_console()
    settings = bench_settings(suite, env=env, harness="oracle", loops=1, include=include, check_only=True)
    try:
        result = run_bench(settings, out_dir, jobs=jobs, on_done=lambda r: plain(err, check_line(r)))
    except KeyboardInterrupt:
        raise Interrupted("interrupted; Harbor stopped its trials; rerun the same command to resume them") from None
    if as_json:
        print(json.dumps({"suite": suite, "tasks": [{"task": r["task"], "state": str(r["outcome"]),
                                                     **(r.get("calibration") or {})} for r in result.records]},
                         indent=2))
    else:
        render_check(out, result.records)
    if any(r["outcome"] in ("not_gradable", "pending") for r in result.records):
        raise typer.Exit(1)


@app.command(cls=UsageCommand)
def report(
    out_dir: Path = typer.Argument(..., help="A run directory (-o of hoh bench run)."),
    compare: list[Path] = typer.Option([], "--compare", help="Another run to show beside OUT (repeatable: "
                                       "vanilla, continuation, ablations, another model ...)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    html: bool = typer.Option(False, "--html", help="Write a self-contained HTML report with HoH@k curves."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="With --html: the file to write "
                                          "(default: OUT/report.html)."),
    metric: Optional[str] = typer.Option(None, "--metric", help="The reward key the headline HoH@k is of "
                                         "(default: reward, the only key, or the mean of the keys)."),
) -> None:
    """HoH@k per task and mean, pass rate, errors, tokens; with --compare, deltas and pairwise win rates."""
    from rich.table import Table
    from rich.text import Text

    from ..bench.report import compare as compare_summaries
    from ..bench.report import fmt, win_rates
    from ..bench.runner import report_run
    out = out_console()
    if html:
        if as_json:
            raise UsageError("--html and --json are two outputs; choose one")
        from ..report import write_bench_report

        path, bench = write_bench_report([out_dir, *compare], output, metric)
        for one in bench.runs:
            plain(out, f"{one.label}: " + " → ".join(f"HoH@{p['loop']} {fmt(p['mean'])}" for p in one.curve()))
        plain(out, f"report: {path}")
        return
    if output is not None:
        raise UsageError("-o names the HTML file; add --html")
    summaries = [report_run(path, metric)[1] for path in [out_dir, *compare]]
    if not compare:
        if as_json:
            print(json.dumps(summaries[0], indent=2))
        elif summaries[0]["settings"].get("check_only"):  # `hoh bench check`'s OUT: calibration only
            render_check(out, summaries[0]["tasks"])
        else:
            render_summary(out, summaries[0])
        return
    comparisons = [compare_summaries(summaries[0], other) for other in summaries[1:]]
    rates = win_rates(summaries)
    if as_json:
        print(json.dumps({"comparisons": comparisons, "win_rates": rates}, indent=2))
        return
    for other, cmp in zip(compare, comparisons):
        render_comparison(out_dir, other, cmp)
    table = Table(show_edge=False, title="pairwise win rate (row over column, final scores) and Dominance")
    table.add_column("run")
    for i in range(len(rates["runs"])):
        table.add_column(f"vs {chr(65 + i)}")
    table.add_column("Dominance")
    for i, name in enumerate(rates["runs"]):
        table.add_row(Text(f"{chr(65 + i)} = {name}"), *[fmt(v) if v is not None else "" for v in rates["matrix"][i]],
                      fmt(rates["dominance"][i]))
    out.print(table)


@app.command("list", cls=UsageCommand)
def list_tasks(
    suite: str = typer.Argument(..., help=SUITE_HELP),
    include: list[str] = typer.Option([], "--include", "-i", help="Only tasks whose name matches this glob."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List a suite's tasks as Harbor sees them (and the dirs it would skip, with its lint findings)."""
    from rich.table import Table
    from rich.text import Text

    from ..bench.listing import list_suite
    out = out_console()
    rows = list_suite(suite, include)
    if as_json:
        print(json.dumps({"suite": suite, "tasks": rows}, indent=2, default=str))
        return
    table = Table(show_edge=False, show_lines=True)
    for col in ("task", "description", "metadata", "status"):
        table.add_column(col, overflow="fold")
    for row in rows:
        meta = ", ".join(f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}"
                         for k, v in row["metadata"].items() if v not in (None, "", [], False))
        table.add_row(Text(row["name"]), Text(row["description"]), Text(meta),
                      Text(row["status"] + (f"\n· {row['reason']}" if row.get("reason") else "")))
    out.print(table)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    plain(out, f"{len(rows)} tasks in {suite}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))


if __name__ == "__main__":  # pragma: no cover - `hoh bench` is the entry point
    sys.exit(app())
