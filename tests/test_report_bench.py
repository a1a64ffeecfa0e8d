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
from harbor_env import bench_runs, bench_trust, harbor  # noqa: F401 - fixtures
from report_html import Page
from test_cli import _fails_cleanly

from hoh.bench.records import LoopState
from hoh.bench.report import compare, summarize
from hoh.bench.runner import report_run
from hoh.report.bench_adapter import run_from_results, trial_from_record
from hoh.report.bench_model import BenchCalibration, BenchComparison, BenchLoop, BenchReport, BenchRun, BenchTrial
from hoh.report.render import bench_html

TASKS = ["csvstat", "kvstore", "roman", "rpn", "wordfreq"]



def copy_run(src: Path, dst: Path) -> Path:
    """A copy of a shared bench run; other workers may be writing a report into it meanwhile (the `.*.tmp`
    of an atomic write can vanish mid-copy)."""
    return Path(shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns(".*.tmp")))

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
    rows = re.findall(r'<tr data-run="\d" data-metric="headline">(.*?)</tr>', page.text, re.S)
    assert "1.000" in rows[0] and re.search(r"0\.500</td><td class=\"n\">1\.000</td><td class=\"n\">1\.000", rows[1])
    assert all(page.ids[f"task-{task}"] == "tr" for task in TASKS)
    assert [_cell(page.text, f"cell-{r}-csvstat-{k}")[1].split()[0] for r, k in ((1, 1), (2, 1), (2, 2), (2, 3))] == \
        ["1.000", "0.500", "1.000", "1.000"]
    csv_row = page.text[page.text.index('<tr id="task-csvstat">'):]
    assert re.search(r'<td class="n delta">([\d.+–-]+)</td>', csv_row)[1] == "+0.000"
    assert 'data-state="graded"' in _cell(page.text, "cell-2-csvstat-1")[0]
    assert "A ran 1 loop and B 3: HoH@k beyond 1 has no value for the shorter run" in page.text
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


def test_the_adapter_agrees_with_the_text_summary_in_every_state(bench_trust):
    for path in bench_trust.values():
        run = run_from_results(path)
        summary = report_run(path)[1]
        rows = {t["task"]: t for t in summary["tasks"]}
        assert {t.task for t in run.trials} == set(rows)
        for t in run.trials:
            row = rows[t.task]
            assert [str(e.state) for e in t.loops] == row["states"] and t.scores == row["scores"], t.task
            assert [e.rewards for e in t.loops] == row["rewards_at"] and t.scored() == row["scored"], t.task
            assert (t.outcome, t.cause, t.calibration.state) == (row["outcome"], row["cause"],
                                                                 row["calibration"]["state"])
        assert [p["mean"] for p in run.curve()] == [e["mean"] for e in summary["hoh_at"]]
        assert run.headline == summary["headline"] and run.outcomes() == summary["outcomes"]
        assert {key: run.key_curve(key) for key in run.keys()} == summary["by_key"]
        assert [t.task for t in run.errors() if t.outcome in ("error", "not_gradable")] == \
            [e["task"] for e in summary["errors"]]


def test_the_headline_metric_of_the_html_report(bench_trust, tmp_path):
    out = tmp_path / "correctness.html"
    result = run_hoh("bench", "report", bench_trust["stop"], "--html", "--metric", "correctness", "-o", out)
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert re.fullmatch(r"scripted · hoh: HoH@1 1\.000( → HoH@\d 1\.000)+", first), result.stdout
    page = Page(out)
    headline = re.search(r'<tr data-run="0" data-metric="headline">(.*?)</tr>', page.text, re.S)[1]
    assert "<code>correctness</code>" in headline
    # twokeys is scored on correctness alone; a task reporting only `reward` has no headline score now
    assert _cell(page.text, "cell-1-twokeys-1")[1] == "1.000 correctness 1.000 performance 0.500"
    _fails_cleanly(run_hoh("bench", "report", bench_trust["stop"], "--html", "--metric", "speed", "-o", out),
                   "no task reports that reward key")


def test_default_output_is_in_the_run(bench_runs, tmp_path):
    run = tmp_path / "scripted"
    copy_run(bench_runs["scripted"], run)
    result = run_hoh("bench", "report", run, "--html")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == f"report: {run / 'report.html'}"
    assert Page(run / "report.html").plot_data()["curves"]["runs"][0]["label"] == "scripted · hoh"


def _loop(k, state, score=None, rewards=None, graded_loop=None, cause=None):
    error = f"{cause} (full text)" if cause and state in ("failed", "not_run", "ungraded") else None
    return BenchLoop(k, LoopState(state), score, rewards, graded_loop if graded_loop is not None else
                     (k if state == "graded" else None), cause, error)


def _trial(task, loops, outcome="completed", tokens=1000, **kw):
    errors = [entry.error for entry in loops if entry.error]
    kw.setdefault("error", errors[0] if errors else None)
    kw.setdefault("cause", loops[[e.error for e in loops].index(errors[0])].cause if errors else None)
    return BenchTrial(task, outcome, loops, {"input": tokens, "output": 0}, None, 1.0, **kw)


def _cell(html: str, ident: str) -> tuple[str, str]:
    """The opening tag of the cell with id `ident`, and its visible text (tags dropped, spaces squeezed)."""
    found = re.search(rf'(<td [^>]*id="{re.escape(ident)}"[^>]*>)(.*?)</td>', html, re.S)
    assert found, ident
    return found[1], " ".join(re.sub(r"<[^>]+>", " ", found[2]).split())


def every_state_run() -> BenchRun:
    """One run whose tasks are in every state a loop and a trial can be in."""
    two = {"correctness": 1.0, "performance": 0.5}
    return BenchRun("pi/m · hoh", "pi", "m", "hoh", [], 3, "/runs/a", [
        _trial("a", [_loop(1, "graded", 0.2, {"reward": 0.2}), _loop(2, "graded", 0.6, {"reward": 0.6}),
                     _loop(3, "carried", 0.6, {"reward": 0.6}, graded_loop=2)]),
        _trial("b", [_loop(1, "carried", 0.0, {"reward": 0.0}, graded_loop=0), _loop(2, "graded", 0.5, {"reward": 0.5}),
                     _loop(3, "graded", 1.0, {"reward": 1.0})], note="AgentTimeoutError: the agent ran out of time",
               note_cause="AgentTimeoutError: the agent ran out of time"),
        _trial("dies", [_loop(1, "graded", 1.0, {"reward": 1.0}), _loop(2, "not_run", cause="loop 2 not run: Boom"),
                        _loop(3, "not_run", cause="loop 3 not run: Boom")], "error", tokens=500),
        _trial("fails", [_loop(1, "failed", cause="loop 1: planner failed: Unknown provider"),
                         _loop(2, "ungraded", cause="RewardFileNotFoundError: no reward"),
                         _loop(3, "pending")], "error"),
        _trial("offline", [_loop(k, "not_run", cause="not gradable here: reward 0 of 1") for k in (1, 2, 3)],
               "not_gradable", tokens=0, error="not gradable here: reward 0 of 1",
               cause="not gradable here: reward 0 of 1",
               calibration=BenchCalibration("not_gradable", "reward 0 of 1", ["Name or service not known"])),
        _trial("keys", [_loop(1, "graded", 0.75, two), _loop(2, "graded", 1.0, {**two, "performance": 1.0}),
                        _loop(3, "carried", 1.0, {**two, "performance": 1.0}, graded_loop=2)]),
    ], headline="reward, else the mean of correctness, performance")


def test_every_state_of_a_loop_and_a_trial_shows_distinctly():
    run = every_state_run()
    assert [t.task for t in run.scored()] == ["a", "b", "keys"]  # the error and the not-gradable task are not
    assert [p["mean"] for p in run.curve()] == [round(0.95 / 3, 4), 0.7, 0.8667]
    assert run.curve()[2]["pass_rate"] == 0.6667
    assert run.keys() == ["correctness", "performance", "reward"]
    assert [p["mean"] for p in run.key_curve("performance")] == [0.5, 1.0, 1.0]
    assert run.left_out() == {"error": 2, "not_gradable": 1}
    assert run.tokens_per_point() == round(3000 / 260, 1)  # the errored trials' tokens buy no points
    html = bench_html(BenchReport([run]))

    def state(ident: str) -> tuple[str | None, str]:
        tag, text = _cell(html, ident)
        return re.search(r'data-state="(\w+)"', tag)[1], text

    assert state("cell-1-a-2") == ("graded", "0.600")
    assert state("cell-1-a-3") == ("carried", "0.600 carried from @2")
    assert state("cell-1-b-1") == ("carried", "0.000 carried from A₀")
    assert state("cell-1-dies-1") == ("graded", "1.000")
    assert state("cell-1-dies-2") == ("not_run", "not run")
    assert 'title="loop 2 not run: Boom"' in _cell(html, "cell-1-dies-2")[0]
    assert state("cell-1-fails-1") == ("failed", "failed") and "Unknown provider" in _cell(html, "cell-1-fails-1")[0]
    assert state("cell-1-fails-2") == ("ungraded", "ungraded")
    assert state("cell-1-fails-3") == ("pending", "pending")
    assert state("cell-1-offline-1") == ("not_run", "not gradable")
    assert state("cell-1-keys-1") == ("graded", "0.750 correctness 1.000 performance 0.500")
    assert state("cell-1-keys-3") == ("carried", "1.000 carried from @2 correctness 1.000 performance 1.000")
    # each state has a colour of its own
    styles = re.findall(r"\.s-(\w+)[ ,{]", html)
    assert {"graded", "carried", "failed", "not_run", "ungraded", "pending", "not_gradable", "note"} <= set(styles)

    # the headline named, a row per reward key, the trials left out of the means said
    score_rows = re.findall(r'<tr (?:class="key-row" )?data-run="0" data-(?:metric|key)="(\w+)">(.*?)</tr>', html, re.S)
    assert [name for name, _ in score_rows] == ["headline", "correctness", "performance", "reward"]
    assert "reward, else the mean of correctness, performance" in score_rows[0][1]
    assert re.findall(r'<td class="n">([\d.]+)</td>', score_rows[2][1])[:4] == ["0.500", "1.000", "1.000", "1.000"]
    left_out = html[html.index('id="left-out"'):html.index("</ul>", html.index('id="left-out"'))]
    assert "3 of 6 trials scored; left out of every mean" in left_out and "not gradable</em> 1" in left_out

    # the errors: cause first, the full text folded, the calibration's telling lines; no "None: ..."
    errors = {m[1]: m[2] for m in re.finditer(r'<tr id="error-1-([\w-]+)"[^>]*>(.*?)</tr>', html, re.S)}
    assert list(errors) == ["b", "dies", "fails", "offline"]
    assert re.search(r'<div class="cause">loop 2 not run: Boom</div>', errors["dies"])
    assert "<details><summary>full text</summary>" in errors["dies"]
    assert "loop 2 not run: Boom (full text)" in errors["dies"]
    assert "loop 3: loop 3 not run: Boom" in errors["dies"]  # another loop's own cause, under the first
    assert "Name or service not known" in errors["offline"] and "left out of every mean" in errors["offline"]
    assert "s-note" in errors["b"] and "AgentTimeoutError" in errors["b"]
    assert "None: every trial completed" not in html
    why = _cell(html, "cell-1-offline-1")[0]
    assert 'data-outcome="not_gradable"' in why


def test_all_clear_only_when_every_trial_completed_and_every_loop_was_graded():
    clean = BenchRun("pi/m · hoh", "pi", "m", "hoh", [], 2, "/runs/a", [
        _trial("a", [_loop(1, "graded", 0.5, {"reward": 0.5}), _loop(2, "carried", 0.5, {"reward": 0.5}, 1)])])
    html = bench_html(BenchReport([clean]))
    assert "None: every trial completed and was graded. 1 loop carried an earlier loop's grade" in html
    for bad in (_trial("b", [_loop(1, "graded", 1.0, {"reward": 1.0}), _loop(2, "pending")], "pending"),
                _trial("b", [_loop(1, "graded", 1.0, {"reward": 1.0}), _loop(2, "graded", 1.0, {"reward": 1.0})],
                       note="VerifierTimeoutError: late", note_cause="VerifierTimeoutError: late"),
                BenchTrial("b", "invalid", [_loop(1, "not_run", cause="no task.toml"), _loop(2, "not_run")],
                           error="no task.toml", cause="no task.toml")):
        run = BenchRun("pi/m · hoh", "pi", "m", "hoh", [], 2, "/runs/a", [*clean.trials, bad])
        html = bench_html(BenchReport([run]))
        assert "None: every trial completed" not in html and 'id="error-1-b"' in html, bad


def test_a_one_pass_run_is_a_level_and_a_shorter_hoh_run_is_not():
    vanilla = BenchRun("pi/m · vanilla", "pi", "m", "vanilla", [], 1, "/runs/b",
                       [_trial("a", [_loop(1, "graded", 0.4, {"reward": 0.4})])])
    short = BenchRun("pi/m · hoh", "pi", "m", "hoh", [], 1, "/runs/c",
                     [_trial("a", [_loop(1, "graded", 0.3, {"reward": 0.3})])])
    page_text = bench_html(BenchReport([every_state_run(), vanilla, short]))
    assert "pi/m · vanilla (one pass)" in page_text  # a one-pass run is drawn as a level across k
    assert "pi/m · hoh (c) (one pass)" not in page_text  # a hoh run of one loop has no HoH@2
    keys = re.search(r'"keys": \{"correctness": \[(.*?)\]', page_text)
    assert keys and '"mean": 1.0' in keys[1]
    final = json.loads(re.search(r'id="data-final">(.*?)</script>', page_text, re.S)[1])
    assert final["runs"][0]["not_scored"] == {"dies": "error", "fails": "error", "offline": "not_gradable"}
    assert final["runs"][0]["final"][final["tasks"].index("dies")] is None  # no bar at 0 for a task in error


def _record(task: str, scores: list[float | None], outcome: str = "completed") -> dict:
    """A task record as hoh bench's records.task_record leaves it (only what the summary and the report read)."""
    why = "RuntimeError: the trial died"
    loops = [{"loop": k, "state": "graded" if s is not None else "not_run", "score": s, "graded_loop": k,
              "rewards": {"reward": s} if s is not None else None, "error": None if s is not None else why,
              "cause": None if s is not None else why, "note": None} for k, s in enumerate(scores, 1)]
    return {"task": task, "outcome": outcome, "scores": scores, "final_score": scores[-1], "loops": loops,
            "tokens": {"input": 100, "output": 10}, "cost_usd": None, "wall_seconds": 1.0,
            "error": None if outcome == "completed" else why, "cause": None if outcome == "completed" else why,
            "note": None, "note_cause": None, "calibration": {"state": "gradable"}}


def test_a_comparison_counts_only_what_both_runs_scored_and_says_what_differs():
    a = [_record("x", [0.5, 1.0]), _record("y", [0.2, 0.4]), _record("z", [1.0, 1.0])]
    b = [_record("x", [0.75]), _record("y", [None], "error")]
    settings = {"harness": "pi", "model": "m", "mode": "hoh"}
    sa, sb = summarize(a, {**settings, "loops": 2}), summarize(b, {**settings, "loops": 1})
    runs = [BenchRun(f"pi/m · hoh {n}", "pi", "m", "hoh", [], len(s["hoh_at"]), f"/runs/{n}",
                     [trial_from_record(r, len(s["hoh_at"])) for r in rs], headline=s["headline"])
            for n, (rs, s) in enumerate(((a, sa), (b, sb)), 1)]
    html = bench_html(BenchReport(runs, [BenchComparison.from_json(1, compare(sa, sb))]))
    section = html[html.index('id="compare-2"'):html.index("</section>")]
    notes = re.findall(r'<li class="compare-note">(.*?)</li>', section)
    assert notes == ["the runs cover different tasks (1 only in A, 0 only in B): HoH@k compares the 1 both scored",
                     "A ran 2 loops and B 1: HoH@k beyond 1 has no value for the shorter run"]
    rows = {m[1]: re.findall(r'<td class="n"[^>]*>(.*?)</td>', m[2])
            for m in re.finditer(r'<tr data-metric="([^"]+)">(.*?)</tr>', section, re.S)}
    assert rows["HoH@1"] == ["0.500", "0.750", "+0.250"]  # x alone: y is an error in B, z is only in A
    assert rows["HoH@2"] == ["1.000", "–", "–"]
    delta = re.compile(r'<td class="n delta"( title="[^"]*")?>(.*?)</td>')
    deltas = {task: delta.search(html, html.index(f'id="task-{task}"')) for task in "xyz"}
    assert deltas["x"][2] == "-0.250" and deltas["y"][2] == "–" and deltas["z"][2] == "–"
    assert "RuntimeError: the trial died" in deltas["y"][1] and "only in A" in deltas["z"][1]


def test_bad_input_writes_nothing(bench_runs, tmp_path):
    _fails_cleanly(run_hoh("bench", "report", tmp_path, "--html"), "not a benchmark run")
    assert list(tmp_path.iterdir()) == []
    _fails_cleanly(run_hoh("bench", "report", bench_runs["oracle"], "-o", tmp_path / "x.html"), "add --html")
    _fails_cleanly(run_hoh("bench", "report", bench_runs["oracle"], "--html", "--json"), "choose one")
    _fails_cleanly(run_hoh("bench", "report", bench_runs["oracle"], "--html", "-o", tmp_path / "no" / "x.html"),
                   "does not exist")
    broken = tmp_path / "broken"
    copy_run(bench_runs["scripted"], broken)
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
    priced = copy_run(bench_runs["scripted"], tmp_path / "priced")
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
