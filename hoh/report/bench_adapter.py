"""`hoh bench run` OUT directories (Harbor's job dirs and hoh bench's settings) → the report's `BenchReport`:
the one module to rewire when the results move.

The records, the summary (headline metric, loop count) and the comparisons are hoh bench's own
(hoh/bench/records.py, report.py), computed here without writing anything into the runs' folders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..bench.records import LoopState, Outcome, records_of
from ..bench.report import PASS_THRESHOLD, check_metric, compare, summarize
from ..bench.results import load_run
from .bench_model import BenchCalibration, BenchComparison, BenchLoop, BenchReport, BenchRun, BenchTrial


def read_run(out: Path, metric: str | None = None) -> tuple[BenchRun, dict[str, Any]]:
    """OUT's run and its summary (UsageError: not a run, or a --metric no task reports; StateError: a corrupt file)."""
    paths, settings = load_run(Path(out))
    records, invalid = records_of(paths, settings, metric)
    check_metric(metric, records)
    summary = summarize(records, settings.model_dump(mode="json"), invalid, metric)
    loops = len(summary["hoh_at"])
    trials = [trial_from_record(r, loops) for r in records]
    trials += [BenchTrial(task=bad["task"], outcome="invalid", error=bad["reason"], cause=bad["reason"],
                          loops=_missing(loops, LoopState.NOT_RUN, bad["reason"])) for bad in invalid]
    run = BenchRun(label=settings.label(), harness=settings.harness, model=settings.model, mode=settings.mode,
                   ablate=list(settings.ablate), loops=loops, source=str(paths.root), trials=trials,
                   pass_threshold=PASS_THRESHOLD, headline=summary["headline"])
    return run, summary


def run_from_results(out: Path, metric: str | None = None) -> BenchRun:
    return read_run(out, metric)[0]


def report_from_results(outs: list[Path], metric: str | None = None) -> BenchReport:
    """The runs in `outs` side by side, each later one compared with the first over the tasks both scored."""
    read = [read_run(out, metric) for out in outs]
    comparisons = [BenchComparison.from_json(n, compare(read[0][1], summary))
                   for n, (_, summary) in enumerate(read) if n > 0]
    return BenchReport([run for run, _ in read], comparisons)


def _loop(entry: dict[str, Any]) -> BenchLoop:
    return BenchLoop(loop=int(entry["loop"]), state=LoopState(entry["state"]), score=entry.get("score"),
                     rewards=entry.get("rewards"), graded_loop=entry.get("graded_loop"), cause=entry.get("cause"),
                     error=entry.get("error"), note=entry.get("note"))


def _missing(loops: int, state: LoopState, why: str | None) -> list[BenchLoop]:
    return [BenchLoop(k, state, cause=why) for k in range(1, loops + 1)]


def trial_from_record(r: dict[str, Any], loops: int) -> BenchTrial:
    """One task record of hoh bench (records.task_record) as the report's trial, with a state for each of `loops`."""
    entries = [_loop(e) for e in r.get("loops") or []]
    if len(entries) < loops:
        # a task that has no loop entries yet (pending, refused, checked only) still shows each loop's state
        state = LoopState.PENDING if r["outcome"] == Outcome.PENDING else LoopState.NOT_RUN
        entries += _missing(loops, state, r.get("cause"))[len(entries):]
    return BenchTrial(task=r["task"], outcome=str(r["outcome"]), loops=entries, tokens=r.get("tokens"),
                      cost_usd=r.get("cost_usd"), wall_seconds=r.get("wall_seconds"), error=r.get("error"),
                      cause=r.get("cause"), note=r.get("note"), note_cause=r.get("note_cause"),
                      calibration=BenchCalibration.from_json(r.get("calibration")))
