"""Self-contained HTML reports: one workspace's run (`hoh report`), one or more benchmark runs
(`hoh bench report --html`).

    data.py          a workspace's state files → RunModel (the only module that knows where they are)
    bench_model.py   BenchReport / BenchRun / BenchTrial / BenchLoop: runs × tasks × loops in their states, every
                     reward key, calibration, errors with their cause, comparisons
    bench_adapter.py today's `hoh bench run` OUT directories → BenchReport (hoh bench's records, summaries, compare)
    plots.py         matplotlib figures as inline SVG, each with the data it draws (why matplotlib: there)
    pages.py         the workspace report's layout (a main page, a folder of loop and ledger pages) and which
                     pages are stale: a sealed loop's page is written once
    render.py        jinja2 templates (templates/) → HTML strings; the checked, atomic write
    rolefiles.py     a role's file as the report links it: the report's own text copy (`.txt`), never the file
    templates/       base.html.j2 (CSS, table sort/filter script), bench.html.j2, workspace.html.j2 (the main
                     page), ws_loop/ws_loops/ws_issues/ws_behaviours.html.j2 (its pages), _run.html.j2 (their parts)

Arrows: cli → report → {bench, runtime, evidence}. matplotlib is imported only when a plot is drawn.
"""

from __future__ import annotations

from pathlib import Path

from .bench_model import BenchReport
from .data import RunModel


def write_workspace_report(workspace: Path, out: Path | None = None) -> tuple[Path, RunModel]:
    """Write the report of the run in `workspace` to `out` (default WORKSPACE/report.html) and its pages to the
    folder beside it (`OUT-STEM-pages/`), only the pages that are missing or changed (`pages.py`). Everything
    is read and rendered before a file is written; on any error nothing is."""
    from .data import read_run
    from .render import check_output, workspace_pages, write

    run = read_run(Path(workspace))
    target = check_output(out if out is not None else run.workspace / "report.html")
    made = workspace_pages(run, target)
    for path, content in made:  # the main page last: it never links to a page not yet written
        if path != target:
            path.parent.mkdir(parents=True, exist_ok=True)
        write(content, path)
    return target, run


def write_bench_report(runs: list[Path], out: Path | None = None,
                       metric: str | None = None) -> tuple[Path, BenchReport]:
    """Write one report of the benchmark runs in `runs` (the first is the reference for deltas) to `out`
    (default FIRST/report.html), the headline score being reward `metric` when given (see hoh bench report).
    Nothing is written into the runs' folders but that default report."""
    from .bench_adapter import report_from_results
    from .render import bench_html, check_output, write

    report = report_from_results([Path(r) for r in runs], metric)
    target = check_output(out if out is not None else Path(report.runs[0].source) / "report.html")
    write(bench_html(report), target)
    return target, report
