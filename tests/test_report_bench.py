"""`hoh bench report --html`: HoH@k curves of Harbor's oracle and hoh's scripted run on benchmarks/examples
(Harbor on Docker, the session's `bench_runs`), checked from the HTML against the runs' own summaries;
the model's rules; bad input."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import run_hoh
from harbor_env import bench_runs, harbor  # noqa: F401 - fixtures
from report_html import Page
from test_cli import _fails_cleanly

from hoh.bench.runner import report_run
from hoh.report.bench_adapter import run_from_results
from hoh.report.bench_model import BenchReport, BenchRun, BenchTrial
from hoh.report.render import bench_html

TASKS = ["csvstat", "kvstore", "roman", "rpn", "wordfreq"]


def test_oracle_and_scripted_runs_show_hoh_curves(bench_runs, tmp_path):
    out = tmp_path / "bench.html"
    result = run_hoh("bench", "report", bench_runs["oracle"], "--html", "--compare", bench_runs["scripted"], "-o", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["oracle: HoH@1 1.000",
                                          "scripted · hoh: HoH@1 0.500 → HoH@2 1.000 → HoH@3 1.000", f"report: {out}"]
    page = Page(out)
    page.assert_self_contained()
    summaries = {name: json.loads((path / "summary.json").read_text()) for name, path in bench_runs.items()}

    curves = page.plot_data()["curves"]["runs"]
    assert [c["label"] for c in curves] == ["oracle", "scripted · hoh"]
    for curve, name in zip(curves, ("oracle", "scripted")):
        expected = summaries[name]["hoh_at"]
        assert [p["mean"] for p in curve["curve"]] == [e["mean"] for e in expected]
        assert [p["n"] for p in curve["curve"]] == [e["n"] for e in expected]
    assert [p["min"] for p in curves[1]["curve"]] == [0.5, 1.0, 1.0]  # every example scores 0.5, then 1.0
    svg = page.svg("curves")
    assert 'id="curves-mean-0"' in svg and 'id="curves-mean-1"' in svg and 'id="curves-range-1"' in svg
    final = page.plot_data()["final"]
    assert final["tasks"] == TASKS and [r["final"] for r in final["runs"]] == [[1.0] * 5, [1.0] * 5]
    assert all(f'id="final-1-{task}"' in page.svg("final") for task in TASKS)

    # tables: HoH@k per run, pass rates, one row per task with both runs' scores, no errors
    rows = re.findall(r'<tr data-run="\d">(.*?)</tr>', page.text, re.S)
    assert "1.000" in rows[0] and re.search(r"0\.500</td><td class=\"n\">1\.000</td><td class=\"n\">1\.000", rows[1])
    assert all(page.ids[f"task-{task}"] == "tr" for task in TASKS)
    csv_row = page.text[page.text.index('<tr id="task-csvstat">'):]
    assert re.findall(r'<td class="n">([\d.+–-]+)</td>', csv_row)[:5] == ["1.000", "0.500", "1.000", "1.000", "+0.000"]
    assert "None: every trial completed and was graded." in page.text
    tokens = sum(t["tokens"]["input"] + t["tokens"]["output"] for t in summaries["scripted"]["tasks"])
    assert tokens > 0 and f"{tokens:,}" in page.text


def test_the_adapter_agrees_with_the_text_summary(bench_runs):
    for path in bench_runs.values():
        run = run_from_results(path)
        summary = report_run(path)[1]
        assert [p["mean"] for p in run.curve()] == [e["mean"] for e in summary["hoh_at"]]
        assert run.final_mean() == summary["final_mean"]
        assert run.curve()[-1]["pass_rate"] == summary["pass_rate"]
        assert run.outcomes() == summary["outcomes"]


def test_default_output_is_in_the_run(bench_runs, tmp_path):
    run = tmp_path / "scripted"
    shutil.copytree(bench_runs["scripted"], run, symlinks=True)
    result = run_hoh("bench", "report", run, "--html")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == f"report: {run / 'report.html'}"
    assert Page(run / "report.html").plot_data()["curves"]["runs"][0]["label"] == "scripted · hoh"


def test_errors_are_listed_with_their_reason_and_left_out_of_the_means():
    def trial(task, scores, outcome="completed", error=None, tokens=1000):
        return BenchTrial(task, outcome, scores, {"input": tokens, "output": 0}, None, 1.0, error)

    run = BenchRun("pi/m · hoh", "pi", "m", "hoh", [], 3, "/runs/a", [
        trial("a", [0.2, 0.6, 1.0]), trial("b", [0.0, 0.5, 0.5]),
        trial("c", [None, None, None], "error", "verifier could not start: docker unreachable", tokens=500)])
    vanilla = BenchRun("pi/m · vanilla", "pi", "m", "vanilla", [], 1, "/runs/b", [trial("a", [0.4]), trial("b", [0.1])])
    report = BenchReport([run, vanilla])
    assert [p["mean"] for p in run.curve()] == [0.1, 0.55, 0.75] and run.curve()[2]["pass_rate"] == 0.5
    assert run.tokens_per_point() == round(2000 / 150, 1)  # the errored trial's tokens buy no points
    page_text = bench_html(report)
    assert "verifier could not start: docker unreachable" in page_text
    assert "pi/m · vanilla (one pass)" in page_text  # a one-pass run is drawn as a level across k
    assert ">-0.500<" in page_text  # Δ final of the second run (0.25) against the first (0.75)


def test_bad_input_writes_nothing(bench_runs, tmp_path):
    _fails_cleanly(run_hoh("bench", "report", tmp_path, "--html"), "not a benchmark run")
    assert list(tmp_path.iterdir()) == []
    _fails_cleanly(run_hoh("bench", "report", bench_runs["oracle"], "-o", tmp_path / "x.html"), "add --html")
    _fails_cleanly(run_hoh("bench", "report", bench_runs["oracle"], "--html", "--json"), "choose one")
    _fails_cleanly(run_hoh("bench", "report", bench_runs["oracle"], "--html", "-o", tmp_path / "no" / "x.html"),
                   "does not exist")
    broken = tmp_path / "broken"
    shutil.copytree(bench_runs["scripted"], broken, symlinks=True)
    (broken / "report.html").unlink(missing_ok=True)
    [result] = (broken / "jobs" / "rpn.agent").glob("*/result.json")
    result.write_text("{")
    _fails_cleanly(run_hoh("bench", "report", broken, "--html"), "corrupt Harbor trial result")
    assert not (broken / "report.html").exists()


@pytest.mark.parametrize("args", [["--compare"], ["--html", "--compare"]])
def test_compare_needs_a_run(bench_runs, tmp_path: Path, args):
    result = run_hoh("bench", "report", bench_runs["oracle"], *args, tmp_path / "none")
    _fails_cleanly(result, "not a benchmark run")


def test_text_report_compares_with_each_run(bench_runs):
    one = run_hoh("bench", "report", bench_runs["scripted"], "--compare", bench_runs["oracle"], "--json")
    assert one.returncode == 0, one.stderr
    assert json.loads(one.stdout)["comparisons"][0]["rows"][0] == {"metric": "HoH@1", "a": 0.5, "b": 1.0, "delta": 0.5}
    two = run_hoh("bench", "report", bench_runs["scripted"], "--compare", bench_runs["oracle"],
                  "--compare", bench_runs["scripted"], "--json")
    assert two.returncode == 0, two.stderr
    assert [c["rows"][0]["delta"] for c in json.loads(two.stdout)["comparisons"]] == [0.5, 0.0]
    human = run_hoh("bench", "report", bench_runs["scripted"], "--compare", bench_runs["oracle"],
                    "--compare", bench_runs["scripted"])
    assert human.returncode == 0 and human.stdout.count("B − A") == 4  # two tables per comparison


def test_cost_per_trial_and_per_point_when_the_agent_reports_one(bench_runs, tmp_path):
    # Harbor records the cost an agent reports in its trial's agent_result; the scripted harness
    # reports none, so a copy of its run gets one per trial as a priced harness would leave it.
    priced = shutil.copytree(bench_runs["scripted"], tmp_path / "priced", symlinks=True)
    for result in (priced / "jobs").glob("*.agent/*/result.json"):
        data = json.loads(result.read_text())
        data["agent_result"]["cost_usd"] = 0.25
        result.write_text(json.dumps(data))
    summary = json.loads(run_hoh("bench", "report", priced, "--json").stdout)
    assert [t["cost_usd"] for t in summary["tasks"]] == [0.25] * 5 and summary["cost_usd"] == 1.25
    assert summary["cost_per_point"] == round(1.25 / 500, 6)  # five tasks at 1.0: 500 points
    text = run_hoh("bench", "report", priced)
    assert text.returncode == 0 and text.stdout.count("$0.2500") == 5 and "$0.0025/point" in text.stdout
    compared = json.loads(run_hoh("bench", "report", bench_runs["scripted"], "--compare", priced, "--json").stdout)
    rows = {r["metric"]: r for r in compared["comparisons"][0]["rows"]}
    assert rows["cost $"] == {"metric": "cost $", "a": None, "b": 1.25, "delta": None}
    assert rows["cost $/point"]["b"] == 0.0025
