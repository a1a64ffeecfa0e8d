"""Today's `hoh bench run` OUT directory → the report's `BenchRun`: the one function to rewire
when the results move (e.g. onto Harbor's job directories)."""

from __future__ import annotations

from pathlib import Path

from ..bench.report import PASS_THRESHOLD, score_at
from ..bench.results import load_run, records
from .bench_model import BenchRun, BenchTrial


def run_from_results(out: Path) -> BenchRun:
    """Read OUT's settings and trial records (UsageError: not a run; StateError: a corrupt record)."""
    paths, settings = load_run(Path(out))
    found = records(paths)
    loops = max([settings.loops] + [r.get("loops") or 0 for r in found])
    harness = settings.base_config().harness
    label = " · ".join(filter(None, [f"{harness.name}{'/' + harness.model if harness.model else ''}",
                                     settings.mode, " ".join(f"−{a}" for a in settings.ablate)]))
    trials = [BenchTrial(task=r["task"], outcome=r["outcome"] or "unknown",
                         scores=[score_at(r, k) for k in range(1, loops + 1)], tokens=r.get("tokens"),
                         cost_usd=r.get("cost_usd"), wall_seconds=r.get("wall_seconds"), error=r.get("error"))
              for r in found]
    return BenchRun(label=label, harness=harness.name, model=harness.model, mode=settings.mode,
                    ablate=list(settings.ablate), loops=loops, source=str(paths.root), trials=trials,
                    pass_threshold=PASS_THRESHOLD)
